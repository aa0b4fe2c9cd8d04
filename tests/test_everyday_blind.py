"""Every blind held-out everyday set (tests/everyday_blind.py): whole, held, shaped like the others, checkable,
and sharing no question with another set.

"Checkable": every placeholder a question names is one the fixture fills (tests/eval/everyday.py
PLACEHOLDERS), and, filled from a fixed moment, the home's values, the sun and a forecast like the
fixture's, every pattern is a regular expression and no question is left without a source (skipped).
Other sets' questions are compared here, never printed: each set was written without reading them.
"""

from __future__ import annotations

from itertools import combinations

import pytest

from tests.eval.everyday import Question
from tests.everyday_blind import BLIND, EVERY, check_checkable, check_none_shared, check_whole


@pytest.mark.parametrize("name", sorted(BLIND))
def test_each_blind_set_is_whole_held_and_shaped_like_the_one_before(name: str) -> None:
    check_whole(name)


@pytest.mark.parametrize(("one", "other"), list(combinations(sorted(EVERY), 2)))
def test_no_question_is_in_two_sets(one: str, other: str) -> None:
    check_none_shared(one, other)


QUESTIONS = [(name, q) for name, everyday in sorted(BLIND.items()) for q in everyday.questions]


@pytest.mark.parametrize(("name", "question"), QUESTIONS, ids=[f"{n}:{q.id}" for n, q in QUESTIONS])
def test_every_blind_question_is_checkable(name: str, question: Question) -> None:
    check_checkable(name, question)
