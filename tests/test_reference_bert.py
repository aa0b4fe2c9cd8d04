"""Tests of the numpy reference of all-MiniLM-L6-v2 itself (tests/reference_bert.py); no llama.cpp here."""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest

from tests.reference_bert import INSTALL_HINT, PACKAGE, ReferenceBert, load_reference

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec(PACKAGE) is None, reason=f"all-MiniLM-L6-v2 weights not installed ({INSTALL_HINT})"
)

# Expected ids come from the Hugging Face tokenizer of the same model (tokenizers 0.23.3, transformers 5.23.0:
# Tokenizer.from_file(tokenizer.json) with truncation at 256), recorded once when the reference was validated.
KNOWN_IDS = {
    "Hello, world!": [101, 7592, 1010, 2088, 999, 102],
    # Accents stripped (NFD, marks dropped): cafe naive resume ang ##strom facade.
    "café naïve résumé Ångström façade": [101, 7668, 15743, 13746, 17076, 15687, 8508, 102],
    # Emoji are not in the vocabulary: [UNK].
    "I love pizza 🍕 so much 😀!": [101, 1045, 2293, 10733, 100, 2061, 2172, 100, 999, 102],
    # Each CJK ideograph is a word of its own; kana are not (て ##す); 首 is [UNK].
    "東京は日本の首都です。": [101, 1879, 1755, 1672, 1864, 1876, 1671, 100, 1961, 1665, 30184, 1636, 102],
    # Lowercased character by character: a final capital sigma becomes σ, not ς.
    "ΟΔΟΣ": [101, 1169, 29722, 29730, 29733, 102],
    # ° is a symbol (So), not punctuation, so it stays inside its word: 5 ##° ##c.
    "It's 21.5°C (70.7°F).": [
        101, 2009, 1005, 1055, 2538, 1012, 1019, 7737, 2278, 1006, 3963, 1012, 1021, 7737, 2546, 1007, 1012, 102,
    ],
    # Special tokens written in the text are matched before normalisation.
    "Special [MASK] tokens [CLS] here": [101, 2569, 103, 19204, 2015, 101, 2182, 102],
    # Tab and newline are whitespace, NBSP too; NUL and the zero-width space (Cf) are removed.
    "tabs\tand\nnewlines\u00a0nbsp\u200bzwsp\u0000nul": [
        101, 21628, 2015, 1998, 2047, 12735, 1050, 5910, 2361, 2480, 9333, 2361, 11231, 2140, 102,
    ],
    # A word longer than max_input_chars_per_word (100) is a single [UNK].
    "a" * 101: [101, 100, 102],
    "": [101, 102],
}  # fmt: skip


@pytest.fixture(scope="module")
def model() -> ReferenceBert:
    return load_reference()


@pytest.mark.parametrize("text", list(KNOWN_IDS))
def test_token_ids_match_the_hf_tokenizer(model: ReferenceBert, text: str) -> None:
    assert model.tokenize(text) == KNOWN_IDS[text]


def test_a_word_of_100_chars_is_split_not_unknown(model: ReferenceBert) -> None:
    ids = model.tokenize("a" * 100)
    assert len(ids) == 52 and ids[1] == 13360 and 100 not in ids  # aaa ##aa ... (HF: 52 ids)


def test_long_text_is_truncated_to_256_keeping_sep_last(model: ReferenceBert) -> None:
    ids = model.tokenize("temperature sensor " * 200)
    assert len(ids) == 256
    assert ids[:3] == [101, 4860, 13617] and ids[-3:] == [4860, 13617, 102]
    assert model.tokenize("temperature sensor " * 200, max_len=8) == [101, 4860, 13617, 4860, 13617, 4860, 13617, 102]


def test_embeddings_are_unit_length_and_384_wide(model: ReferenceBert) -> None:
    vectors = model.embed(["Hello, world!", "", "temperature sensor " * 200])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float64
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-12)
    assert model.embed("Hello, world!").shape == (1, 384)


def test_paraphrases_are_closer_than_unrelated_sentences(model: ReferenceBert) -> None:
    cat, rug, stocks = model.embed(
        ["The cat sits on the mat", "A cat is sitting on a rug", "Stock markets fell sharply today"]
    )
    paraphrase, unrelated = float(cat @ rug), float(cat @ stocks)
    print(f"paraphrase cosine {paraphrase:.4f}, unrelated cosine {unrelated:.4f}")
    assert paraphrase > 0.6 and unrelated < 0.3 and paraphrase > unrelated + 0.3


def test_embedding_is_deterministic_and_independent_of_batch(model: ReferenceBert) -> None:
    alone = model.embed("The cat sits on the mat")
    together = model.embed(["Stock markets fell sharply today", "The cat sits on the mat"])
    assert np.array_equal(alone[0], together[1])


def test_run_time_of_five_short_sentences(model: ReferenceBert) -> None:
    sentences = ["Turn on the kitchen light", "What is the weather?", "Remind me at 7", "Hello", "Read sensor 3"]
    start = time.perf_counter()
    vectors = model.embed(sentences)
    elapsed = time.perf_counter() - start
    print(f"embedded {len(sentences)} short sentences in {elapsed * 1000:.1f} ms")
    assert vectors.shape == (5, 384)
