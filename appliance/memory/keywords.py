"""The keyword leg of a memory search: FTS5 over ``memories_fts``, ranked by bm25.

A query becomes an OR of its words, each quoted as an FTS5 phrase of its tokens, so no input can
become FTS5 syntax. bm25 ranks every match (~2 µs each), so only the rarest words are ranked, up to a
budget of matches in all (``MemoryStore.RANK_BUDGET``); a query of common words only gets the newest
matches instead.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Sequence

# FTS5's default tokenizer (unicode61) keeps letters and digits and splits on everything else.
_TOKEN = re.compile(r"[^\W_]+")
_MAX_TERMS = 32
_STOPWORD_TEXT = """
    a about above after again all am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now
    of off on once only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself yourselves"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _query_terms(query: str) -> list[str]:
    """Each whitespace-separated word of a query as an FTS5 phrase of its tokens.

    "192.168.1.40" becomes the phrase "192 168 1 40", which is how the tokenizer indexed it. Phrases
    hold only letters, digits and spaces, so no input can become FTS5 syntax. Stopwords are dropped
    unless nothing else is left.
    """
    terms: list[str] = []
    content: list[str] = []
    for word in unicodedata.normalize("NFC", query).split():
        tokens = _TOKEN.findall(word)
        phrase = '"' + " ".join(tokens) + '"'
        if tokens and phrase not in terms:
            terms.append(phrase)
            if len(tokens) > 1 or tokens[0].lower() not in _STOPWORDS:
                content.append(phrase)
    return (content or terms)[:_MAX_TERMS]


RARE_MATCHES = 3  # a name, number or code found in at most this many memories names them


class KeywordHits(list[int]):
    """Keyword-leg ids, best first; ``rare`` holds those that matched a word found in few memories."""

    def __init__(self, ids: Sequence[int] = (), rare: set[int] | None = None) -> None:
        super().__init__(ids)
        self.rare = rare or set()


def _names(query: str) -> set[str]:
    """The query's words that look like names, numbers or codes, as FTS5 phrases.

    A word with a digit ("30419982", "marmalade47", "TR-88120"), a capital inside ("ParentPay") or a
    capital not at the start of a sentence ("Fernhill", "Dr Okafor") names something; a plain word
    ("watering", "bills") says what the question is about, which the vector leg judges better.
    """
    names: set[str] = set()
    start = True
    for word in unicodedata.normalize("NFC", query).split():
        tokens = _TOKEN.findall(word)
        phrase = '"' + " ".join(tokens) + '"'
        if tokens and (
            any(c.isdigit() for c in word) or any(c.isupper() for c in word[1:]) or (word[:1].isupper() and not start)
        ):
            names.add(phrase)
        start = word.endswith((".", "?", "!"))
    return names


def keyword_search(
    conn: sqlite3.Connection, query: str, depth: int, kinds: Sequence[str] | None, *, rank_budget: int
) -> KeywordHits:
    """FTS5 ids for a query, best bm25 first: an OR of its words, each quoted (never FTS5 syntax).

    Also which of them matched a rare word (in at most RARE_MATCHES memories): the fusion trusts those
    far more than a match on a common word, which says little about meaning.
    """
    terms = _query_terms(query)
    if not terms:
        return KeywordHits()
    # bm25 ranks every match (~2 µs each): rank only the rarest terms, up to rank_budget matches in all.
    # Common words add little to bm25 anyway (their inverse document frequency is small). Matches are
    # counted only up to the budget, so a word in every memory costs no more to size than a rare one.
    count = "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)"
    sized = sorted((conn.execute(count, (phrase, rank_budget + 1)).fetchone()[0], phrase) for phrase in terms)
    chosen: list[str] = []
    total = 0
    for n, phrase in sized:
        if n == 0 or (chosen and total + n > rank_budget):
            continue
        chosen.append(phrase)
        total += n
    if not chosen:
        return KeywordHits()
    names = _names(query)
    rare_terms = [phrase for n, phrase in sized if 0 < n <= RARE_MATCHES and phrase in names]
    rare: set[int] = set()
    if rare_terms:
        rows = conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", (" OR ".join(rare_terms),))
        rare = {r[0] for r in rows}
    where = "memories_fts MATCH ?"
    params: list[object] = [" OR ".join(chosen)]
    join = ""
    if kinds is not None:
        join = " JOIN memories m ON m.id = memories_fts.rowid"
        marks = ", ".join("?" * len(kinds))
        where += f" AND m.kind IN ({marks})"
        params.extend(kinds)
    # Too common to rank (one word in thousands of memories): the newest matches instead.
    order = "memories_fts.rank" if total <= rank_budget else "memories_fts.rowid DESC"
    sql = f"SELECT memories_fts.rowid FROM memories_fts{join} WHERE {where} ORDER BY {order} LIMIT ?"
    return KeywordHits([r[0] for r in conn.execute(sql, (*params, depth))], rare)


__all__ = ["RARE_MATCHES", "KeywordHits", "keyword_search"]
