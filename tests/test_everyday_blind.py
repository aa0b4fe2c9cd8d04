"""Every blind held-out everyday set (tests/everyday_blind.py): whole, held, shaped like the others, checkable,
and sharing no question with another set.

"Checkable": every placeholder a question names is one the fixture fills (tests/eval/everyday.py
PLACEHOLDERS), and, filled from a fixed moment, the home's values, the sun and a forecast like the
fixture's, every pattern is a regular expression and no question is left without a source (skipped).
Other sets' questions are compared here, never printed: each set was written without reading them.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import combinations

import pytest

from tests.eval.everyday import BLIND_SETS, CLASSES, PLACEHOLDERS, EverydaySet, Fill, Question, fill, grade, skip_reason
from tests.everyday_blind import BLIND, MAIN, VALUES

EVERY = {"main": MAIN, **BLIND}
ORDER = list(BLIND)  # in the order they were written (tests/eval/everyday.py BLIND_LOADERS)


@pytest.mark.parametrize("name", sorted(BLIND))
def test_each_blind_set_is_whole_held_and_shaped_like_the_one_before(name: str) -> None:
    questions = BLIND[name].questions
    assert len(questions) >= BLIND_SETS[name] >= 100
    assert {q.split for q in questions} == {"held"} and BLIND[name].half("tune") == []
    assert {q.cls for q in questions} == set(CLASSES)
    model, slack = (MAIN, 3) if name == "fresh" else (BLIND["fresh"], 2)  # the fresh one was shaped like the main
    mine, theirs = Counter(q.cls for q in questions), Counter(q.cls for q in model.questions)
    for cls in CLASSES:  # about the same proportions
        assert abs(mine[cls] - len(questions) * theirs[cls] / len(model.questions)) <= slack, cls
    for cls in ("memory", "weather", "unknowable"):  # things it cannot know, where only a decline is right
        assert any(q.expect == "decline" for q in questions if q.cls == cls), cls
    assert any(q.setup == "bare" for q in questions)
    # the main set's honest declines count in every set (later sets add a few general ones, none dropped)
    assert BLIND[name].declines[: len(MAIN.declines)] == MAIN.declines
    written = ORDER.index(name)
    if written >= ORDER.index("sixth"):  # from the sixth on: five of each class, follow-ups, more declines
        counts = Counter(q.cls for q in questions)
        assert all(counts[c] >= 5 for c in CLASSES), counts
        assert sum(bool(q.history) for q in questions) >= 5  # follow-ups
        declining = ("devices", "memory", "weather", "sun", "unknowable")
        declining += ("abilities",) if written >= ORDER.index("seventh") else ()
        for cls in declining:  # what it cannot know or does not have
            assert any(q.expect == "decline" for q in questions if q.cls == cls), cls
    if written >= ORDER.index("seventh"):  # each copies the set before it's declines whole
        before = BLIND[ORDER[written - 1]].declines
        assert BLIND[name].declines[: len(before)] == before


@pytest.mark.parametrize(("one", "other"), list(combinations(sorted(EVERY), 2)))
def test_no_question_is_in_two_sets(one: str, other: str) -> None:
    def said(text: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())

    # counted, never shown (a failed assert would print a set: questions their writers did not read)
    a, b = EVERY[one], EVERY[other]
    shared = len({said(q.q) for q in a.questions} & {said(q.q) for q in b.questions})
    same_ids = len({q.id for q in a.questions} & {q.id for q in b.questions})
    assert shared == 0, f"{shared} question(s) of {one} are also in {other}"
    assert same_ids == 0, f"{same_ids} id(s) of {one} are also in {other}"


QUESTIONS = [(name, q) for name, everyday in sorted(BLIND.items()) for q in everyday.questions]


@pytest.mark.parametrize(("name", "question"), QUESTIONS, ids=[f"{n}:{q.id}" for n, q in QUESTIONS])
def test_every_blind_question_is_checkable(name: str, question: Question) -> None:
    everyday: EverydaySet = BLIND[name]
    assert question.placeholders() <= set(PLACEHOLDERS)
    assert question.placeholders() <= set(VALUES), question.placeholders() - set(VALUES)
    assert skip_reason(question, VALUES) == ""
    assert grade(question, "", VALUES, everyday.declines)[0] == "wrong"  # saying nothing is never right
    for near in question.near:  # a quantity's placeholder has numbers, or is unknown here (declined is right)
        name_ = str(near.value).strip("{}")
        got = VALUES.get(name_, Fill()) if str(near.value).startswith("{") else Fill(numbers=(1.0,))
        assert got.numbers or not got.known, f"{near.value} is a pattern, not a number: use any_of"
    for pattern in (*question.any_of, *question.all_of, *question.must_not):
        filled = fill(pattern, VALUES)
        if filled is not None:  # None: a value the fixture cannot know here (declined is right)
            re.compile(filled)
    assert grade(question, "", VALUES, everyday.declines)[0] == "wrong"  # an empty reply is never right
