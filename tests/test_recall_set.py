"""The memory-recall eval set (tests/eval/recall.yaml) keeps its own rules: no model, plain YAML."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "eval"))

from check_recall_set import load, problems, shared_content_words


def test_recall_set_keeps_its_rules() -> None:
    assert problems(load()) == []


def test_shared_content_words_sees_other_forms() -> None:
    assert shared_content_words("Water the tomatoes.", "When is the watering due?") == {"wat"}
    assert shared_content_words("The spare key is by the door.", "Where are the keys?") == {"key"}
    assert shared_content_words("The car was serviced.", "When is the next service?") == {"servic"}
    assert shared_content_words("Mum's birthday is on the 12th.", "When is my mother's birthday?") == {"birthday"}
    assert shared_content_words("The code is 4512.", "Is it 4512?") == {"4512"}


def test_shared_content_words_ignores_function_words() -> None:
    assert shared_content_words("The spare key is under the blue flowerpot.", "Where can I get in?") == set()
    assert shared_content_words("It is on the shelf.", "Is it in the cupboard?") == set()
