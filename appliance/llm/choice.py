"""Which model a config runs: the wanted one (``llm.model``, ``auto``: the board's choice), the packaged one
while it downloads, and its file; where pulled models live; the RAM it needs.

Below the runtime, which builds the model from this, so that ``python -m appliance.llm.proof --config``
and the model commands name the config's model the way the daemon does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.config import data_dir

if TYPE_CHECKING:
    from appliance.config import Config

AUTO = "auto"  # llm.model's value for the board's choice (appliance.llm.board.AUTO, not imported unless used)


def models_dir(config: Config) -> Path:
    """Where pulled models live."""
    return data_dir(config) / "models"


def wanted_model(config: Config) -> str:
    """The model this config asks for: llm.model (``auto``: the one chosen with `models use`, else this
    board's choice, appliance/llm/board.py), else the one chosen with `models use`, else the default."""
    from appliance.llm import models

    spec = config.llm.model
    if spec == AUTO:
        from appliance.llm import board  # only for auto: the idle daemon's memory is at its limit

        return models.selected_model(models_dir(config)) or board.choose_for(board.read_board())
    if spec and ("/" in spec or spec.endswith(".gguf")):
        return str(config.resolve_path(spec))  # a path: relative to the config file's folder
    return spec or models.selected_model(models_dir(config)) or models.default_model_name()


def downloads_models(config: Config) -> bool:
    """Whether llm.model may name a model to download in the background: auto, or a catalog name."""
    from appliance.llm import models

    return config.llm.model == AUTO or config.llm.model in models.load_catalog()


def model_spec(config: Config, *, fallback: bool = False) -> str:
    """Which model to run now: the wanted one (:func:`wanted_model`), or the packaged default while the
    wanted catalog model is not installed yet, with ``llm.model: auto`` or ``fallback`` (the daemon, which
    downloads the wanted one in the background: appliance/model_fetch.py)."""
    from appliance.llm import models

    wanted = wanted_model(config)
    entry = models.load_catalog().get(wanted)
    if entry is None or not (fallback or config.llm.model == AUTO):
        return wanted
    if entry.kind == "chat" and models.installed_path(entry, models_dir(config)) is None:
        return models.default_model_name()
    return wanted


def model_path(config: Config, *, fallback: bool = False) -> Path:
    """The model file to run (ModelNotFoundError with the fix when it is not there)."""
    from appliance.llm import models

    spec = model_spec(config, fallback=fallback)
    entry = models.load_catalog().get(spec)
    if entry is not None:
        models.require_chat(entry)  # a file given by path is checked when it loads
    return models.resolve_model(spec, models_dir(config))


def model_memory_bytes(config: Config, path: Path) -> int:
    """The RAM the chat model at ``path`` needs with this config's context, KV type and micro-batch."""
    from appliance.llm import footprint, gguf

    llm = config.llm
    ubatch = None if llm.ubatch_size == "auto" else int(llm.ubatch_size)
    kind, micro = footprint.resolved(llm.kv_type, llm.batch_size, ubatch)
    return gguf.estimate_memory_bytes(path, llm.context_tokens, micro, kind)


def fits_here(row: Any, mem_bytes: int, context_tokens: int) -> bool | None:
    """Whether the row's model fits this board's RAM (None: unknown, a file that is not GGUF)."""
    from appliance.llm import board, gguf

    if row.entry is not None:
        return board.fits(row.entry.ram_mb, mem_bytes)
    try:
        need = gguf.estimate_memory_bytes(row.where, context_tokens)
    except Exception:  # a file that is not a model is listed without the mark
        return None
    return need + board.SYSTEM_RESERVE_BYTES <= mem_bytes


def _row_json(row: Any, active: str, wanted: str, fits: bool | None) -> dict[str, Any]:
    """One model of `models list --json`."""
    entry = row.entry
    return {
        "name": row.name,
        "title": row.title,
        "kind": entry.kind if entry is not None else "chat",
        "size_bytes": row.size_bytes,
        "ram_mb": entry.ram_mb if entry is not None else None,
        "installed": row.installed,
        "path": str(row.where) if row.where is not None else None,
        "running": row.name == active,
        "wanted": row.name == wanted,
        "selected": row.selected,
        "default": row.default,
        "fits": fits,
        "pi5_tps": entry.pi5_tps if entry is not None and entry.kind == "chat" else None,
        "license": entry.license if entry is not None else None,
    }


def models_document(config: Config) -> dict[str, Any]:
    """The catalog as `models list --json` and GET /api/models give it: this board, what auto picks, the model
    running and the one wanted, and each model with its size, RAM, speed on a Pi 5, whether it fits here."""
    from appliance.llm import board, models

    rows = models.list_models(models_dir(config))
    active, wanted = model_spec(config), wanted_model(config)
    here = board.read_board()
    return {
        "board": {"name": here.name, "mem_bytes": here.mem_bytes, "cores": here.cores},
        "auto": board.choose_for(here),
        "running": active,
        "wanted": wanted,
        "models": [
            _row_json(row, active, wanted, fits_here(row, here.mem_bytes, config.llm.context_tokens)) for row in rows
        ],
    }
