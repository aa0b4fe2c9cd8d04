"""What the assistant remembers, seen and changed from the Settings page's memory tab (and any `admin` client).

``GET /api/memory`` browses (newest first) or, with ``?q=``, searches by meaning and by keyword as the assistant
recalls (``read`` scope); each memory says where it came from (its source, and the channel and chat of the
conversation it was taken from while that is kept). ``PATCH /api/memory/{id}`` edits one in place (its keywords
and vectors made again, so it is found by its new words and meaning, not its old ones); ``DELETE
/api/memory/{id}`` forgets one; ``POST /api/memory/forget`` with ``{"about": X}`` answers what "everything about
X" is by meaning and deletes nothing, with a token for exactly those ids, and with ``{"about": X, "ids": [...],
"token": T, "confirm": true}`` deletes exactly those; ``GET /api/memory/export?format=md|json``; the
conversations, and ``DELETE /api/conversations/{id}``. Forgetting removes a memory's vectors and keywords too
(the keyword index follows the table by its triggers). Each change is in the events list (kind ``config``).

Routed by app.SETTINGS_ROUTES, which imports this module at its first request (the idle daemon never does).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterable
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
PREVIEW_S = 600  # how long a preview's token may confirm it
_SECRET = secrets.token_bytes(32)  # a preview's token holds in this process only (a restart asks again)


def _store(request: web.Request) -> MemoryStore:
    store = request.app[RUNTIME].memory
    if store is None:
        raise Conflict("memory is off on this appliance", fix="see `picoagent doctor` (memory)")
    return store


async def _shown(request: web.Request, memories: list[Memory]) -> list[dict[str, Any]]:
    """Memories as the API gives them: where each came from too, the channel and chat of its conversation."""
    db = request.app[RUNTIME].db
    chats = await db.call(db.conversation_channels, [m.conversation_id for m in memories if m.conversation_id])
    shown = []
    for memory in memories:
        row = dataclasses.asdict(memory)
        row.pop("embedded_with", None)
        channel, chat = chats.get(memory.conversation_id or 0, (None, None))
        shown.append({**row, "channel": channel, "chat_id": chat})
    return shown


def _number(text: str, what: str, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= high:
        raise UsageError(f"{what}: expected a whole number from 0 to {high}, got {text!r}")
    return value


def _id(request: web.Request) -> int:
    """The path's id: a memory or conversation that cannot exist (not a whole number) is a 404, like a gone one."""
    text = request.match_info["id"]
    if not text.isdigit() or len(text) > 18:
        raise NotFound(f"no memory or conversation {text!r}: ids are whole numbers", fix="GET /api/memory lists them")
    return int(text)


def preview_token(about: str, ids: Iterable[int], issued: int) -> str:
    """The token a preview answers with: it confirms exactly these ids for this subject, for PREVIEW_S seconds."""
    said = json.dumps([about.strip(), sorted(set(ids)), issued]).encode()
    return f"{issued}.{hmac.new(_SECRET, said, hashlib.sha256).hexdigest()[:32]}"


def _check_token(token: object, about: str, ids: list[int]) -> None:
    """Refuse a confirmation that is not of a recent preview of exactly these ids."""
    fix = f'preview again with {{"about": {about.strip()!r}}}, then confirm with the ids and token it answers'
    if not isinstance(token, str) or not token:
        raise UsageError('confirm needs the "token" the preview answered', fix=fix)
    issued_text = token.partition(".")[0]
    issued = int(issued_text) if issued_text.isdigit() else -1
    if not hmac.compare_digest(token, preview_token(about, ids, issued)):
        raise Conflict(f"these ids are not the ones the preview of {about.strip()!r} named: nothing forgotten", fix=fix)
    if time.time() - issued > PREVIEW_S:
        raise Conflict(f"that preview is over {PREVIEW_S // 60} minutes old: nothing forgotten", fix=fix)


async def _audit(request: web.Request, what: str) -> None:
    from appliance.hardware.events import record_settings_change

    who, db = principal(request), request.app[RUNTIME].db
    await db.call(record_settings_change, db, [what], f"{who.kind}:{who.name}" if who else "unknown")


async def list_memory(request: web.Request) -> web.Response:
    """Newest first, or the best matches for ?q= (by meaning and keyword); ?kind=fact|summary; ?limit, ?offset."""
    store, query = _store(request), request.query.get("q", "").strip()
    kind = request.query.get("kind") or None
    if kind not in (None, "fact", "summary"):
        raise UsageError(f"kind: fact or summary, not {kind!r}", fix="leave it out for both")
    kinds = [kind] if kind else None
    limit = _number(request.query.get("limit", str(PAGE)), "limit", 500) or PAGE
    if query:
        offset = _number(request.query.get("offset", "0"), "offset", 500)
        hits = await asyncio.to_thread(store.search, query, limit + offset, kinds=kinds)
        page = hits[offset:]
        found = [
            {**shown, "score": round(h.score, 4), "matched_by": sorted(h.matched_by), "similarity": _similarity(h)}
            for h, shown in zip(page, await _shown(request, [h.memory for h in page]), strict=True)
        ]
        return web.json_response({"query": query, "mode": hits.mode, "note": hits.note, "memories": found})
    offset = _number(request.query.get("offset", "0"), "offset", 10**9)
    newest = await asyncio.to_thread(store.newest, limit, offset, kinds)
    total = await asyncio.to_thread(store.count, kinds)
    return web.json_response({"total": total, "memories": await _shown(request, newest)})


def _similarity(hit: Any) -> float | None:
    return None if hit.distance is None else round(1 - hit.distance, 3)


async def edit_memory(request: web.Request) -> web.Response:
    """{"text": ...}: the memory's text changed in place, its keywords and vectors made again from it."""
    memory_id = _id(request)
    text = (await read_json(request)).get("text")
    if not isinstance(text, str) or not text.strip():
        return json_error(400, 'expected {"text": "the new text"}: a text that is not empty', key="text")
    edited = await asyncio.to_thread(_store(request).edit, memory_id, text)
    if edited is None:
        raise NotFound(f"no memory {memory_id}", fix="GET /api/memory lists them")
    merged = f", merged into {edited.id}" if edited.id != memory_id else ""
    await _audit(request, f"memory.{memory_id} (edited{merged})")
    return web.json_response((await _shown(request, [edited]))[0])


async def forget_memory(request: web.Request) -> web.Response:
    """Forget one memory, its vectors and keywords with it."""
    memory_id = _id(request)
    if not await asyncio.to_thread(_store(request).forget, memory_id):
        raise NotFound(f"no memory {memory_id}", fix="GET /api/memory lists them")
    await _audit(request, f"memory.{memory_id} (forgotten)")
    return web.json_response({"forgotten": [memory_id]})


async def forget_about(request: web.Request) -> web.Response:
    """{"about": X}: what would go (by meaning and words) and a token, nothing deleted; with the "ids" and "token"
    it answered and "confirm": true, exactly those deleted."""
    body = await read_json(request)
    about, store = body.get("about"), _store(request)
    if not isinstance(about, str) or not about.strip():
        return json_error(400, 'expected {"about": "what to forget"}: a text that is not empty', key="about")
    ids = body.get("ids")
    if body.get("confirm") is not True:
        if ids is not None or "confirm" in body:
            return json_error(400, 'to forget, send "confirm": true (exactly true) with the ids; nothing forgotten')
        from appliance.memory.records import ABOUT_K

        hits = (await asyncio.to_thread(store.search, about, ABOUT_K)).about()
        shown = await _shown(request, [h.memory for h in hits])
        close = [{**row, "similarity": _similarity(h)} for h, row in zip(hits, shown, strict=True)]
        token = preview_token(about, [h.memory.id for h in hits], int(time.time()))
        return web.json_response({"about": about, "would_forget": close, "token": token, "deleted": 0})
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return json_error(400, 'confirm needs "ids": the list of memory ids the preview named', key="ids")
    _check_token(body.get("token"), about, ids)
    deleted = await asyncio.to_thread(store.forget_many, sorted(set(ids)))
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
        return web.json_response({"memories": await _shown(request, everything)})
    text = facts_markdown([m for m in everything if m.kind == "fact"])
    headers = {"Content-Disposition": 'attachment; filename="MEMORY.md"'}
    return web.Response(text=text, content_type="text/markdown", headers=headers)


async def list_conversations(request: web.Request) -> web.Response:
    """The newest conversations, each with its channel, chat, dates and number of messages."""
    db = request.app[RUNTIME].db
    return web.json_response({"conversations": await db.call(db.conversations, PAGE)})


async def forget_conversation(request: web.Request) -> web.Response:
    """Delete a conversation's messages (the memories made from it stay, unless forgotten themselves)."""
    conversation_id, db = _id(request), request.app[RUNTIME].db
    gone = await db.call(db.forget_conversation, conversation_id)
    if gone < 0:
        raise NotFound(f"no conversation {conversation_id}", fix="GET /api/conversations lists them")
    await _audit(request, f"conversation.{conversation_id} (deleted, {gone} messages)")
    return web.json_response({"deleted": conversation_id, "messages": gone})
