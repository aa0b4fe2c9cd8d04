"""A model mirror (what ``PICOAGENT_MODEL_MIRROR`` points at): a real aiohttp server on 127.0.0.1 serving
real files by name, honouring ``Range`` as Hugging Face does (206 with Content-Range), and misbehaving on
request: hold every request until released, drop the connection once mid-body, serve flipped bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

BLOCK = 1 << 20


@dataclass
class ModelMirror:
    """The files it serves (name -> path) and what it was asked."""

    files: dict[str, Path]
    url: str = ""
    gate: asyncio.Event = field(default_factory=asyncio.Event)  # requests wait here until it is set
    cut_after: int | None = None  # close the connection once the body reaches this offset (once)
    corrupt: bool = False  # the first bytes flipped: the right size, the wrong sha256
    ranges: list[str] = field(default_factory=list)  # the Range header of every request ("" for none)

    def __post_init__(self) -> None:
        self.gate.set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """GET /NAME: the file, or the rest of it from a Range offset."""
        await self.gate.wait()
        path = self.files.get(request.match_info["name"])
        if path is None:
            raise web.HTTPNotFound()
        self.ranges.append(request.headers.get("Range", ""))
        total = path.stat().st_size
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", request.headers.get("Range", ""))
        if match:
            start = int(match.group(1))
            if start >= total:
                raise web.HTTPRequestRangeNotSatisfiable(headers={"Content-Range": f"bytes */{total}"})
        response = web.StreamResponse(status=206 if match else 200)
        response.content_length = total - start
        if match:
            response.headers["Content-Range"] = f"bytes {start}-{total - 1}/{total}"
        await response.prepare(request)
        end = total
        if self.cut_after is not None and self.cut_after > start:
            end, self.cut_after = self.cut_after, None
        with path.open("rb") as fh:
            fh.seek(start)
            offset = start
            while offset < end:
                block = fh.read(min(BLOCK, end - offset))
                if self.corrupt and offset == 0:
                    block = bytes(b ^ 0xFF for b in block[:16]) + block[16:]
                await response.write(block)
                offset += len(block)
        if end < total:  # drop the connection mid-body, as a dying mirror or a flaky Wi-Fi link would
            assert request.transport is not None
            request.transport.close()  # after what was written: the client holds exactly cut_after bytes
            return response
        await response.write_eof()
        return response


@contextlib.asynccontextmanager
async def serving(files: dict[str, Path]) -> AsyncIterator[ModelMirror]:
    """A ModelMirror listening on 127.0.0.1 (an ephemeral port) for the duration of the block."""
    mirror = ModelMirror(files)
    app = web.Application()
    app.router.add_get("/{name}", mirror.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    mirror.url = f"http://127.0.0.1:{port}"
    try:
        yield mirror
    finally:
        mirror.gate.set()
        await runner.cleanup()
