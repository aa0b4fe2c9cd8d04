"""Check tests/eval/recall.yaml, the memory-recall-by-meaning set.

Each question must point at one known fact and share no content word with it, not even in another
form (key/keys, water/watering): a recall that finds the fact then does so by meaning, not by
matching words. Words are compared lower-cased after a crude stemmer (possessive 's removed, then
-ing, -ed, -es, -s, -ly, -er stripped repeatedly, a final -e dropped and a final double letter made
single, so that water/waters/watering and service/serviced all meet). Words of 3 letters or fewer
and stopwords are not content words, except numbers (always content) and a few short household
nouns that matter here (key, car, vet, ...): the check is crude on purpose, and stricter rather than
looser. It also fails on unknown or duplicate ids, on tune/test splits out of balance (overall or
within a topic), and on fewer than 44 facts or 66 questions.

    .venv/bin/python tests/eval/check_recall_set.py [path]    # exit 1 and a list of problems
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
DEFAULT_PATH = HERE / "recall.yaml"

MIN_FACTS = 44
MIN_QUESTIONS = 66
SPLITS = ("tune", "test")

# Function words only: articles, pronouns, prepositions, conjunctions, auxiliaries and modals,
# question words, determiners and quantifiers. Anything meaningful stays a content word.
_STOPWORDS = """
    about above across after again against along also although always among another anyone anything
    anywhere around because been before behind being below beneath beside besides between beyond both
    but can't cannot could couldn't does doesn't doing done don't down during each either else enough
    even ever every everyone everything from have haven't having he'd he's here hers herself himself
    i'd i'll i'm i've into isn't it's itself just many might mine more most much must mustn't myself
    near neither never none nor often once only onto other others ought ours ourselves over perhaps
    please quite rather really same shall shan't she'd she's should shouldn't some someone something
    somewhere soon such than that that's their theirs them themselves then there there's these they
    they'd they'll they're they've thing things this those though through throughout thus till toward
    towards under unless until upon very wasn't we'd we'll we're we've were weren't what what's
    whatever when whenever where where's whereas wherever whether which while whom whose who's why
    will with within without won't would wouldn't yet you'd you'll you're you've your yours yourself
    yourselves
"""
STOPWORDS = frozenset(_STOPWORDS.split())

# Short words that are plainly content words in this set: sharing one of these is sharing the topic.
_SHORT_CONTENT = """
    key car vet dog cat pin tax gas bin bus van pet gym gp nas pe mot tv pc ink oil fan bed eye ear
    tea cot kit bag map id
"""
SHORT_CONTENT = frozenset(_SHORT_CONTENT.split())

SUFFIXES = ("ing", "ied", "ies", "ed", "es", "ly", "er", "s")
WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")


def stem(word: str) -> str:
    """A crude stemmer: good enough to make water, waters, watered and watering one word."""
    word = word.lower().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    word = word.rstrip("'")
    if word.isdigit():
        return word
    changed = True
    while changed:
        changed = False
        for suffix in SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)] + ("y" if suffix in ("ied", "ies") else "")
                changed = True
                break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]
    return word


def content_words(text: str) -> dict[str, str]:
    """The content words of a text, stem -> the word as written."""
    found: dict[str, str] = {}
    for raw in WORD.findall(text.lower().replace("’", "'")):
        bare = raw[:-2] if raw.endswith("'s") else raw
        if raw in STOPWORDS or bare in STOPWORDS:
            continue
        if not bare.isdigit() and len(bare) <= 3 and bare not in SHORT_CONTENT:
            continue
        found.setdefault(stem(raw), raw)
    return found


def shared_content_words(fact: str, question: str) -> set[str]:
    """The content words (as stems) that a question shares with its fact; empty when it shares none."""
    return set(content_words(fact)) & set(content_words(question))


def problems(data: Any) -> list[str]:
    """Everything wrong with a loaded recall set (empty: it passes)."""
    if not isinstance(data, dict):
        return ["the file is not a mapping with facts and questions"]
    facts = data.get("facts") or []
    questions = data.get("questions") or []
    found: list[str] = []
    if len(facts) < MIN_FACTS:
        found.append(f"only {len(facts)} facts (at least {MIN_FACTS})")
    if len(questions) < MIN_QUESTIONS:
        found.append(f"only {len(questions)} questions (at least {MIN_QUESTIONS})")

    ids = Counter(str(f.get("id")) for f in facts)
    found += [f"duplicate fact id: {i}" for i, n in ids.items() if n > 1]
    texts = Counter(str(f.get("text", "")).strip().lower() for f in facts)
    found += [f"duplicate fact text: {t}" for t, n in texts.items() if n > 1]
    asked = Counter(str(q.get("q", "")).strip().lower() for q in questions)
    found += [f"duplicate question: {t}" for t, n in asked.items() if n > 1]
    by_id = {str(f.get("id")): f for f in facts}
    for f in facts:
        if not str(f.get("text", "")).strip():
            found.append(f"fact {f.get('id')}: no text")

    per_topic: dict[str, Counter[str]] = {}
    for q in questions:
        text, fact_id, split = str(q.get("q", "")), str(q.get("fact")), q.get("split")
        if split not in SPLITS:
            found.append(f"{text!r}: split must be one of {SPLITS}, not {split!r}")
        fact = by_id.get(fact_id)
        if fact is None:
            found.append(f"{text!r}: unknown fact id {fact_id!r}")
            continue
        shared = shared_content_words(str(fact.get("text", "")), text)
        if shared:
            found.append(f"{text!r} shares {sorted(shared)} with {fact_id}: {fact.get('text')!r}")
        per_topic.setdefault(str(fact.get("topic", "all")), Counter())[str(split)] += 1

    totals = Counter(str(q.get("split")) for q in questions)
    if abs(totals["tune"] - totals["test"]) > max(2, len(questions) // 20):
        found.append(f"splits out of balance: {totals['tune']} tune, {totals['test']} test")
    for topic, counts in sorted(per_topic.items()):
        if abs(counts["tune"] - counts["test"]) > 1:
            found.append(f"topic {topic}: splits out of balance ({counts['tune']} tune, {counts['test']} test)")
    return found


def load(path: Path = DEFAULT_PATH) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEFAULT_PATH
    data = load(path)
    found = problems(data)
    for line in found:
        print(line)
    if found:
        print(f"{path}: {len(found)} problem(s)")
        return 1
    splits = Counter(q["split"] for q in data["questions"])
    print(f"{path}: ok, {len(data['facts'])} facts, {len(data['questions'])} questions {dict(splits)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
