"""Public repositories behind an API of GitHub's shape, on 127.0.0.1 (what ``tools.skills_api`` points at).

It answers what GitHub's REST API answers for the three requests a skill install makes:
``GET /repos/OWNER/REPO`` (``default_branch``), ``GET /repos/OWNER/REPO/commits/REF`` (``sha`` of a branch,
a tag or a full sha; 404 ``{"message": "Not Found"}`` or 422 for an unknown one) and
``GET /repos/OWNER/REPO/tarball/SHA``, which redirects (302) to a download host path, as GitHub sends it to
codeload.github.com, serving a real .tar.gz whose single top folder is ``OWNER-REPO-SHORTSHA/``.

:meth:`FakeRepo.commit` builds that archive from files, and from :class:`Entry` items for what no honest
repository holds (a link, a path with ``..``, an absolute path, a device): tests make malicious archives
with the real ``tarfile`` module, the same format the code under test reads. The server runs on a thread
of its own, so both the CLI's blocking urllib and a test's event loop can call it; ``requests`` records
every path asked for.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import tarfile
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

from aiohttp import web


@dataclass(frozen=True)
class Entry:
    """One archive entry beyond plain files: ``name`` inside the top folder unless ``raw`` (taken as it is)."""

    name: str
    kind: Literal["file", "symlink", "hardlink", "fifo", "chr"] = "file"
    data: bytes = b""
    target: str = ""  # a link's target
    raw: bool = False


@dataclass
class FakeRepo:
    """One repository: its branches (name -> sha) and each commit's archive."""

    owner: str
    name: str
    default_branch: str = "main"
    branches: dict[str, str] = field(default_factory=dict)
    archives: dict[str, bytes] = field(default_factory=dict)

    def commit(self, files: dict[str, str | bytes], extra: tuple[Entry, ...] = (), branch: str | None = None) -> str:
        """A new commit of ``files`` (path -> text) and ``extra`` entries on ``branch`` (default: the default
        branch); its sha."""
        digest = hashlib.sha1(f"{self.owner}/{self.name}/{len(self.archives)}/{time.time_ns()}".encode())
        sha = digest.hexdigest()
        top = f"{self.owner}-{self.name}-{sha[:7]}"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            tar.addfile(_info(f"{top}/", tarfile.DIRTYPE))
            folders: set[str] = set()
            for path, content in files.items():
                data = content.encode() if isinstance(content, str) else content
                parts = path.split("/")
                for depth in range(1, len(parts)):
                    folder = "/".join(parts[:depth])
                    if folder not in folders:
                        folders.add(folder)
                        tar.addfile(_info(f"{top}/{folder}/", tarfile.DIRTYPE))
                info = _info(f"{top}/{path}", tarfile.REGTYPE, size=len(data))
                tar.addfile(info, io.BytesIO(data))
            for entry in extra:
                name = entry.name if entry.raw else f"{top}/{entry.name}"
                kinds = {
                    "file": tarfile.REGTYPE,
                    "symlink": tarfile.SYMTYPE,
                    "hardlink": tarfile.LNKTYPE,
                    "fifo": tarfile.FIFOTYPE,
                    "chr": tarfile.CHRTYPE,
                }
                info = _info(name, kinds[entry.kind], size=len(entry.data) if entry.kind == "file" else 0)
                info.linkname = entry.target
                tar.addfile(info, io.BytesIO(entry.data) if entry.kind == "file" else None)
        self.archives[sha] = buffer.getvalue()
        self.branches[branch or self.default_branch] = sha
        return sha


def _info(name: str, kind: bytes, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode, info.mtime = kind, size, 0o755 if kind == tarfile.DIRTYPE else 0o644, 1700000000
    return info


class FakeSkillHost:
    """The API (and its download host) for some repositories, on a thread of its own."""

    def __init__(self) -> None:
        self.repos: dict[tuple[str, str], FakeRepo] = {}
        self.requests: list[str] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """What tools.skills_api is set to."""
        return f"http://127.0.0.1:{self.port}"

    def repo(self, owner: str, name: str, default_branch: str = "main") -> FakeRepo:
        """A new, empty public repository."""
        made = FakeRepo(owner, name, default_branch)
        self.repos[(owner, name)] = made
        return made

    def __enter__(self) -> FakeSkillHost:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            runner = loop.run_until_complete(self._start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="fake-skill-host", daemon=True)
        self._thread.start()
        assert ready.wait(10), "the fake skill host did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    async def _start(self) -> web.AppRunner:
        app = web.Application(middlewares=[self._record])
        app.router.add_get("/repos/{owner}/{repo}", self._repository)
        app.router.add_get("/repos/{owner}/{repo}/commits/{ref:.+}", self._commit)
        app.router.add_get("/repos/{owner}/{repo}/tarball/{sha}", self._tarball)
        app.router.add_get("/codeload/{owner}/{repo}/legacy.tar.gz/{sha}", self._download)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = runner.addresses[0][1]
        return runner

    @web.middleware
    async def _record(self, request: web.Request, handler: web.RequestHandler) -> web.StreamResponse:
        self.requests.append(request.path)
        return await handler(request)

    def _found(self, request: web.Request) -> FakeRepo:
        repo = self.repos.get((request.match_info["owner"], request.match_info["repo"]))
        if repo is None:
            raise web.HTTPNotFound(text='{"message": "Not Found"}', content_type="application/json")
        return repo

    async def _repository(self, request: web.Request) -> web.Response:
        repo = self._found(request)
        return web.json_response({"full_name": f"{repo.owner}/{repo.name}", "default_branch": repo.default_branch})

    async def _commit(self, request: web.Request) -> web.Response:
        repo, ref = self._found(request), request.match_info["ref"]
        sha = repo.branches.get(ref) or (ref if ref in repo.archives else None)
        if sha is None:
            raise web.HTTPUnprocessableEntity(
                text=f'{{"message": "No commit found for SHA: {ref}"}}', content_type="application/json"
            )
        return web.json_response({"sha": sha, "commit": {"message": "a commit"}})

    async def _tarball(self, request: web.Request) -> web.Response:
        repo, sha = self._found(request), request.match_info["sha"]
        raise web.HTTPFound(f"/codeload/{repo.owner}/{repo.name}/legacy.tar.gz/{sha}")

    async def _download(self, request: web.Request) -> web.Response:
        archive = self._found(request).archives.get(request.match_info["sha"])
        if archive is None:
            raise web.HTTPNotFound()
        return web.Response(body=archive, content_type="application/x-gzip")
