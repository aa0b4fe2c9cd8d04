"""What the assistant remembers, seen and changed from the Settings page's memory tab (and any `admin` client).

``GET /api/memory`` browses (newest first) or, with ``?q=``, searches by meaning and by keyword as the assistant
recalls (``read`` scope); ``PATCH /api/memory/{id}`` edits one (stored and embedded anew, so it is found by its
new words and meaning, not its old ones); ``DELETE /api/memory/{id}`` forgets one; ``POST /api/memory/forget``
with ``{"about": X}`` answers what "everything about X" is by meaning and deletes nothing, and with ``{"about":
X, "ids": [...], "confirm": true}`` deletes exactly those; ``GET /api/memory/export?format=md|json``; the
conversations, and ``DELETE /api/conversations/{id}``. Forgetting removes a memory's vectors and keywords too
(the keyword index follows the table by its triggers). Each change is in the events list (kind ``config``).

Routed by app.SETTINGS_ROUTES, which imports this module at its first request (the idle daemon never does).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from aiohttp import web

from appliance.channels.web.auth import principal
from appliance.channels.web.http import json_error, read_json
from appliance.channels.web.state import RUNTIME
from appliance.errors import Conflict, NotFound, UsageError

if TYPE_CHECKING:
    from appliance.memory.records import Memory
    from appliance.memory.store import MemoryStore

PAGE = 50  # memories a browse answers at most
ABOUT_K = 20  # memories a "forget everything about X" preview offers at most


def _store(request: web.Request) -> MemoryStore:
    store = request.app[RUNTIME].memory
    if store is None:
        raise Conflict("memory is off on this appliance", fix="see `picoagent doctor` (memory)")
    return store


def _shown(memory: Memory) -> dict[str, Any]:
    row = dataclasses.asdict(memory)
    row.pop("embedded_with", None)
    return row


def _number(text: str, what: str, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= high:
        raise UsageError(f"{what}: expected a whole number from 0 to {high}, got {text!r}")
    return value


async def _audit(request: web.Request, what: str) -> None:
    from appliance.hardware.events import record_settings_change

    who, db = principal(request), request.app[RUNTIME].db
    await db.call(record_settings_change, db, [what], f"{who.kind}:{who.name}" if who else "unknown")


async def list_memory(request: web.Request) -> web.Response:
    """Newest first, or the best matches for ?q= (by meaning and keyword); ?kind=fact|summary; ?limit, ?offset."""
    store, query = _store(request), request.query.get("q", "").strip()
    kind = request.query.get("kind") or None
    kinds = [kind] if kind else None
    limit = _number(request.query.get("limit", str(PAGE)), "limit", 500) or PAGE
    if query:
        hits = await asyncio.to_thread(store.search, query, limit, kinds=kinds)
        found = [{**_shown(h.memory), "score": round(h.score, 4), "matched_by": sorted(h.matched_by)} for h in hits]
        return web.json_response({"query": query, "mode": hits.mode, "memories": found})
    offset = _number(request.query.get("offset", "0"), "offset", 10**9)
    page = await asyncio.to_thread(store.newest, limit, offset, kinds)
    total = await asyncio.to_thread(store.count, kinds)
    return web.json_response({"total": total, "memories": [_shown(m) for m in page]})


async def edit_memory(request: web.Request) -> web.Response:
    """{"text": ...}: the memory stored anew with this text (a new id), the old one forgotten."""
    memory_id = _number(request.match_info["id"], "id", 2**62)
    text = (await read_json(request)).get("text")
    if not isinstance(text, str) or not text.strip():
        return json_error(400, 'expected {"text": "..."}', key="text")
    edited = await asyncio.to_thread(_store(request).edit, memory_id, text)
    if edited is None:
        raise NotFound(f"no memory {memory_id}", fix="GET /api/memory lists them")
    await _audit(request, f"memory.{memory_id} (edited, now {edited.id})")
    return web.json_response(_shown(edited))


async def forget_memory(request: web.Request) -> web.Response:
    """Forget one memory, its vectors and keywords with it."""
    memory_id = _number(request.match_info["id"], "id", 2**62)
    if not await asyncio.to_thread(_store(request).forget, memory_id):
        raise NotFound(f"no memory {memory_id}", fix="GET /api/memory lists them")
    await _audit(request, f"memory.{memory_id} (forgotten)")
    return web.json_response({"forgotten": [memory_id]})


async def forget_about(request: web.Request) -> web.Response:
    """{"about": X}: what would go (by meaning), nothing deleted; with "ids" and "confirm": those deleted."""
    from appliance.memory.records import MIN_SIMILARITY

    body = await read_json(request)
    about, store = body.get("about"), _store(request)
    if not isinstance(about, str) or not about.strip():
        return json_error(400, 'expected {"about": "what to forget"}', key="about")
    if body.get("confirm") is not True:
        hits = await asyncio.to_thread(store.search, about, ABOUT_K)
        close = [
            {**_shown(h.memory), "similarity": round(1 - h.distance, 3) if h.distance is not None else None}
            for h in hits
            if "keyword" in h.matched_by or (h.distance is not None and 1 - h.distance >= MIN_SIMILARITY)
        ]
        return web.json_response({"about": about, "would_forget": close, "deleted": 0})
    ids = body.get("ids")
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        return json_error(400, 'confirm needs "ids": the memories the preview named', key="ids")
    deleted = await asyncio.to_thread(store.forget_many, ids)
    await _audit(request, f"memory (forgot {deleted} about {about.strip()[:40]!r})")
    return web.json_response({"about": about, "deleted": deleted})


async def export_memory(request: web.Request) -> web.Response:
    """?format=md: MEMORY.md's text (the facts), as `picoagent memory export` writes it; json: every memory."""
    from appliance.memory.export import facts_markdown

    store, form = _store(request), request.query.get("format", "md")
    if form not in ("md", "json"):
        raise UsageError(f"format: md or json, not {form!r}")
    everything = await asyncio.to_thread(store.newest, 10**9, 0, None)
    if form == "json":
        return web.json_response({"memories": [_shown(m) for m in everything]})
    text = facts_markdown([m for m in everything if m.kind == "fact"])
    headers = {"Content-Disposition": 'attachment; filename="MEMORY.md"'}
    return web.Response(text=text, content_type="text/markdown", headers=headers)


async def list_conversations(request: web.Request) -> web.Response:
    """The newest conversations, each with its channel, chat, dates and number of messages."""
    db = request.app[RUNTIME].db
    return web.json_response({"conversations": await db.call(db.conversations, PAGE)})


async def forget_conversation(request: web.Request) -> web.Response:
    """Delete a conversation's messages (the memories made from it stay, unless forgotten themselves)."""
    conversation_id, db = _number(request.match_info["id"], "id", 2**62), request.app[RUNTIME].db
    gone = await db.call(db.forget_conversation, conversation_id)
    if gone < 0:
        raise NotFound(f"no conversation {conversation_id}", fix="GET /api/conversations lists them")
    await _audit(request, f"conversation.{conversation_id} (deleted, {gone} messages)")
    return web.json_response({"deleted": conversation_id, "messages": gone})
