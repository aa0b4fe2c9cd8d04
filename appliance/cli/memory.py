"""`picoagent memory`: long-term memory searched, added to, forgotten, pruned and exported.

``forget --about X`` shows everything about X (by meaning and words) and asks before it forgets exactly those;
``--yes`` answers for you, and with no terminal to ask on nothing is forgotten unless it was given. While the
daemon runs it asks the daemon (whose embedding model is loaded), else it searches the database itself.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from appliance.cli.common import action, command_group, load, open_db, print_json

if TYPE_CHECKING:
    from appliance.config import Config


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `memory` command group."""
    msub2 = command_group(sub, common, "memory", "long-term memory: search, add, forget, prune, export")
    msearch = action(msub2, common, "search", "find memories by meaning and keyword", cmd_memory_search)
    msearch.add_argument("query", nargs="+")
    msearch.add_argument("-k", type=int, default=5, help="how many (default 5)")
    msearch.add_argument("--json", action="store_true", help="print the hits as JSON")
    msearch.add_argument("--all", action="store_true", help="also the hits below the similarity bar (0.20)")
    action(msub2, common, "add", "remember a fact", cmd_memory_add).add_argument("text", nargs="+")
    mforget = action(msub2, common, "forget", "forget one memory, or everything about something", cmd_memory_forget)
    mforget.add_argument("id", type=int, nargs="?", help="the memory's id (memory search shows it)")
    mforget.add_argument("--about", metavar="TEXT", help="everything about this (by meaning, words): shown, then asked")
    mforget.add_argument("--yes", action="store_true", help="with --about: forget what is shown without asking")
    mprune = action(msub2, common, "prune", "forget facts older than some days", cmd_memory_prune)
    mprune.add_argument("--older-than", type=float, required=True, metavar="DAYS")
    action(msub2, common, "export", "write MEMORY.md and HISTORY.md into the workspace", cmd_memory_export)


class _Memory:
    """The memory store opened by this process (WAL lets it work beside the daemon)."""

    def __init__(self, config: Config, *, vectors: bool = True) -> None:
        from appliance.memory.store import MemoryStore
        from appliance.runtime import local_model, memory_store

        self.db = open_db(config)
        self.model = local_model(config) if vectors else None
        try:
            if self.model is not None:
                # One-shot: reading every vector into memory first would cost more than the search.
                self.store = memory_store(config, self.db, self.model, vector_cache=False)
            else:
                self.store = MemoryStore(self.db, None, model_name="none", dimensions=0)
        except Exception:
            self.close()
            raise

    def __enter__(self) -> Any:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        embedder = getattr(getattr(self, "store", None), "embedder", None)
        if embedder is not None:
            embedder.close()
        if self.model is not None:
            self.model.close()
        self.db.close()


def cmd_memory_search(args: argparse.Namespace) -> int:
    """Memories by meaning and keyword, each with its similarity; those too far from the question left out."""
    from appliance.memory.records import MIN_SIMILARITY

    with _Memory(load(args)) as store:
        found = store.search(" ".join(args.query), args.k)
    hits = list(found) if args.all else found.relevant()
    if args.json:
        print_json(
            [
                {
                    "id": h.memory.id,
                    "text": h.memory.text,
                    "similarity": None if h.distance is None else round(1 - h.distance, 3),
                    "score": h.score,
                    "matched_by": sorted(h.matched_by),
                }
                for h in hits
            ]
        )
        return 0
    left_out = len(found) - len(hits)
    if not hits:
        cut = f" ({left_out} left out: similarity below {MIN_SIMILARITY:.2f}; --all shows them)" if left_out else ""
        print(f"nothing remembered matches{cut}")
    for hit in hits:
        how = [f"similarity {1 - hit.distance:.2f}"] if hit.distance is not None else []
        how += ["keyword"] if "keyword" in hit.matched_by else []
        print(f"{hit.memory.id:>5}  {hit.memory.text}  ({', '.join(how)})")
    if hits and left_out:
        print(f"({left_out} more below similarity {MIN_SIMILARITY:.2f}; --all shows them)")
    if getattr(found, "note", ""):
        print(f"note: {found.note}", file=sys.stderr)
    return 0


def cmd_memory_add(args: argparse.Namespace) -> int:
    """Remember a fact."""
    with _Memory(load(args)) as store:
        memory = store.add(" ".join(args.text), source="cli")
    print(f"remembered as {memory.id}: {memory.text}")
    return 0


def cmd_memory_forget(args: argparse.Namespace) -> int:
    """Forget one memory, or everything about something (shown, then asked)."""
    from appliance.errors import UsageError

    if (args.id is None) == (args.about is None):
        raise UsageError(
            "memory forget: give a memory's id or --about TEXT (one of them)",
            fix="picoagent memory search QUERY shows ids; --about forgets everything about a subject",
        )
    config = load(args)
    if args.about is not None:
        return _forget_about(config, args.about, args.yes)
    with _Memory(config, vectors=False) as store:
        if not store.forget(args.id):
            raise UsageError(f"no memory {args.id}", fix="picoagent memory search QUERY shows ids")
    print(f"memory {args.id} forgotten")
    return 0


def _forget_about(config: Config, about: str, yes: bool) -> int:
    """Show what is about it, ask, forget exactly those: through the running daemon, else here."""
    import shlex

    from appliance.cli.common import confirm
    from appliance.cli.daemon_client import daemon_get
    from appliance.errors import PicoagentError, UsageError
    from appliance.memory.records import ABOUT_K

    if not about.strip():
        raise UsageError("memory forget --about: say what about", fix='e.g. --about "my sister"')
    preview = daemon_get(config, "/api/memory/forget", {"about": about}, timeout=60)
    if preview is not None:
        shown = [(int(m["id"]), str(m["text"]), m.get("similarity")) for m in preview["would_forget"]]
    else:
        with _Memory(config) as store:
            hits = store.search(about, ABOUT_K).about()
        shown = [(h.memory.id, h.memory.text, None if h.distance is None else 1 - h.distance) for h in hits]
    if not shown:
        print(f"nothing remembered is about {about!r}")
        return 0
    print(f"{len(shown)} memor{'y' if len(shown) == 1 else 'ies'} about {about!r}:")
    for memory_id, text, similarity in shown:
        print(f"{memory_id:>5}  {text}" + (f"  (similarity {similarity:.2f})" if similarity is not None else ""))
    ids = [memory_id for memory_id, _, _ in shown]
    again = f"picoagent memory forget --about {shlex.quote(about)}"
    refused = "nothing was forgotten: there is no terminal to ask whether the above may be forgotten"
    if not confirm(f"forget these {len(ids)}?", yes, refused=refused, fix=f"read it, then run {again} --yes"):
        print("nothing forgotten")
        return 1
    if preview is not None:
        body = {"about": about, "ids": ids, "token": preview["token"], "confirm": True}
        answer = daemon_get(config, "/api/memory/forget", body, timeout=60)
        if answer is None:
            raise PicoagentError("the daemon stopped before it forgot them: nothing was forgotten", fix="run it again")
        deleted = int(answer["deleted"])
    else:
        with _Memory(config, vectors=False) as store:
            deleted = store.forget_many(ids)
    print(f"{deleted} memor{'y' if deleted == 1 else 'ies'} about {about!r} forgotten")
    return 0


def cmd_memory_prune(args: argparse.Namespace) -> int:
    """Forget facts older than some days."""
    with _Memory(load(args), vectors=False) as store:
        count = store.prune(args.older_than)
    print(f"{count} memor{'y' if count == 1 else 'ies'} older than {args.older_than:g} days forgotten")
    return 0


def cmd_memory_export(args: argparse.Namespace) -> int:
    """MEMORY.md and HISTORY.md in the workspace."""
    from appliance.config import data_dir

    config = load(args)
    with _Memory(config, vectors=False) as store:
        facts, history = store.export_markdown(data_dir(config) / "workspace")
    print(f"wrote {facts} and {history}")
    return 0
