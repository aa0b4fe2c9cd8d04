"""A skill folder fetched from a public repository through an API of GitHub's shape, read safely into memory.

``OWNER/REPO[/PATH]`` names a folder of a repository (the repository's root without PATH). Three requests,
as GitHub's REST API answers them (``tools.skills_api``, default https://api.github.com; a local server of
the same shape in the tests):

1. ``GET repos/OWNER/REPO`` for the default branch, when no ref is given;
2. ``GET repos/OWNER/REPO/commits/REF`` for the commit the ref names now (a 40-digit sha);
3. ``GET repos/OWNER/REPO/tarball/SHA``: a .tar.gz whose single top folder is ``OWNER-REPO-SHORTSHA/``.

The archive is read into memory, never unpacked onto the disk: every entry's name is checked (no absolute
path, no ``..``, one top folder), the reading stops at MAX_MEMBERS entries or MAX_UNPACKED_BYTES (a gzip
bomb ends there), and under PATH only plain files and folders are taken (a link, hard link or device
refuses the whole skill), at most MAX_SKILL_FILES files and MAX_SKILL_FOLDER_BYTES in all. Entries outside
PATH are skipped unread. A refusal writes nothing; what is kept is handed to :mod:`skill_install`, which
checks it as the skills loader does before anything reaches the workspace.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from appliance import __version__
from appliance.errors import NotFound, PolicyError, Unavailable, UsageError

DEFAULT_API = "https://api.github.com"
MAX_ARCHIVE_BYTES = 25 * 1024 * 1024  # the repository's .tar.gz as downloaded
MAX_UNPACKED_BYTES = 256 * 1024 * 1024  # what its entries may declare in all, read or skipped
MAX_MEMBERS = 20_000
MAX_SKILL_FILES = 200
MAX_SKILL_FOLDER_BYTES = 2 * 1024 * 1024
MAX_JSON_BYTES = 1024 * 1024
TIMEOUT_S = 30.0
_PART = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_REF = re.compile(r"[A-Za-z0-9_./-]{1,200}")
SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Source:
    """Where a skill comes from: a repository and the folder in it ("" for its root)."""

    owner: str
    repo: str
    path: str = ""

    @classmethod
    def parse(cls, text: str) -> Source:
        """``OWNER/REPO[/PATH]`` (a github.com URL's path works too), or a UsageError saying what is wrong."""
        text = text.strip()
        for prefix in ("https://github.com/", "http://github.com/", "github.com/"):
            text = text.removeprefix(prefix)
        parts = [p for p in text.strip("/").split("/") if p]
        if len(parts) >= 4 and parts[2] == "tree":  # a browser's address: OWNER/REPO/tree/BRANCH/PATH
            raise UsageError(
                f"{text!r} is a browser address with a branch in it",
                fix=f"write {'/'.join(parts[:2] + parts[4:])} --ref {parts[3]}",
            )
        if len(parts) < 2 or any(not _PART.fullmatch(p) or p in (".", "..") for p in parts):
            raise UsageError(
                f"{text!r} is not a skill's source",
                fix="write OWNER/REPO/PATH, e.g. anthropics/skills/skills/pdf (letters, digits, . _ - between the /)",
            )
        return cls(parts[0], parts[1], "/".join(parts[2:]))

    def __str__(self) -> str:
        return "/".join(p for p in (self.owner, self.repo, self.path) if p)

    @property
    def folder(self) -> str:
        """The skill's folder name, which must be its name: PATH's last part, or the repository's."""
        return self.path.rsplit("/", 1)[-1] if self.path else self.repo


@dataclass(frozen=True)
class SkillFiles:
    """A skill folder read out of an archive: each file's path inside the folder and its bytes."""

    files: dict[str, bytes]
    executable: frozenset[str] = field(default_factory=frozenset)

    def size(self) -> int:
        """The folder's bytes in all."""
        return sum(len(data) for data in self.files.values())


class _NoDowngrade(urllib.request.HTTPRedirectHandler):
    """Follows redirects (GitHub sends tarballs to codeload.github.com), never from https to http."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        if req.full_url.startswith("https:") and not newurl.startswith("https:"):
            raise Unavailable(f"{req.full_url} redirected to {newurl}, which is not https; nothing was fetched")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _get(url: str, what: str, limit: int) -> bytes:
    """The body of a GET, at most ``limit`` bytes; the API's refusals as errors for people (``what`` it was)."""
    request = urllib.request.Request(
        url, headers={"User-Agent": f"picoagent/{__version__}", "Accept": "application/vnd.github+json"}
    )
    host = urllib.parse.urlsplit(url).netloc
    try:
        with urllib.request.build_opener(_NoDowngrade).open(request, timeout=TIMEOUT_S) as response:
            data: bytes = response.read(limit + 1)
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 422):
            raise NotFound(f"{what}: not found at {host} (a private repository is not found either)") from None
        if exc.code in (403, 429):
            raise Unavailable(
                f"{what}: {host} refused ({exc.code}), most likely its limit of requests without an account",
                fix="try again in an hour",
            ) from None
        raise Unavailable(f"{what}: {host} answered {exc.code}", fix="try again later") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unavailable(
            f"{what}: cannot reach {host} ({reason})", fix="check the network, or tools.skills_api in the config"
        ) from None
    if len(data) > limit:
        raise PolicyError(f"{what}: larger than {limit // (1024 * 1024) or 1} MiB; nothing was installed")
    return data


def _json(url: str, what: str) -> dict[str, Any]:
    try:
        found = json.loads(_get(url, what, MAX_JSON_BYTES))
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise Unavailable(f"{what}: the answer of {url} is not a JSON object", fix="check tools.skills_api")
    return found


def _repo_url(api: str, source: Source) -> str:
    return f"{api.rstrip('/')}/repos/{source.owner}/{source.repo}"


def resolve(api: str, source: Source, ref: str | None) -> str:
    """The commit ``ref`` names now in the repository (its default branch when None)."""
    repo = f"{source.owner}/{source.repo}"
    if ref is None:
        branch = _json(_repo_url(api, source), f"repository {repo}").get("default_branch")
        if not isinstance(branch, str) or not branch:
            raise Unavailable(f"repository {repo}: the API named no default branch", fix="give one with --ref")
        ref = branch
    if not _REF.fullmatch(ref) or ".." in ref.split("/"):
        raise UsageError(f"{ref!r} is not a branch, tag or commit", fix="e.g. --ref main, --ref v1.2")
    url = f"{_repo_url(api, source)}/commits/{urllib.parse.quote(ref, safe='/')}"
    sha = _json(url, f"{ref} of {repo}").get("sha")
    if not isinstance(sha, str) or not SHA.fullmatch(sha):
        raise Unavailable(f"{ref} of {repo}: the API named no commit (sha {sha!r})", fix="check tools.skills_api")
    return sha


def download(api: str, source: Source, commit: str) -> bytes:
    """The .tar.gz of the repository at ``commit``."""
    what = f"the archive of {source.owner}/{source.repo} at {commit[:7]}"
    return _get(f"{_repo_url(api, source)}/tarball/{commit}", what, MAX_ARCHIVE_BYTES)


def _refuse(source: Source, commit: str, why: str) -> PolicyError:
    return PolicyError(
        f"the archive of {source} at {commit[:7]} {why}; nothing was installed",
        fix="install only from a repository you trust; this one may be broken or malicious",
    )


def _parts(name: str, source: Source, commit: str) -> list[str]:
    """An entry's name as its parts, or a refusal when it is absolute or climbs out with ``..``."""
    if name.startswith("/") or PurePosixPath(name).is_absolute():
        raise _refuse(source, commit, f"holds an absolute path ({name!r})")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _refuse(source, commit, f"holds a path with .. ({name!r})")
    return parts


def _top_matches(top: str, commit: str) -> bool:
    """Whether the top folder is OWNER-REPO-SHORTSHA for this commit."""
    short = top.rsplit("-", 1)[-1].lower()
    return len(short) >= 7 and commit.startswith(short)


def extract(archive: bytes, source: Source, commit: str) -> SkillFiles:
    """The files of the folder PATH in ``archive``, checked entry by entry, in memory."""
    want = source.path.split("/") if source.path else []
    files: dict[str, bytes] = {}
    executable: set[str] = set()
    top: str | None = None
    members = unpacked = kept = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            while (member := tar.next()) is not None:
                members += 1
                unpacked += max(member.size, 0)
                if members > MAX_MEMBERS:
                    raise _refuse(source, commit, f"holds more than {MAX_MEMBERS} entries")
                if unpacked > MAX_UNPACKED_BYTES:  # a gzip bomb stops here, before its data is unpacked
                    raise _refuse(source, commit, f"unpacks to more than {MAX_UNPACKED_BYTES // (1024 * 1024)} MiB")
                parts = _parts(member.name, source, commit)
                if not parts:
                    continue
                top = top or parts[0]
                if parts[0] != top:
                    raise _refuse(source, commit, f"has more than one top folder ({top}, {parts[0]})")
                inner = parts[1:]
                if inner[: len(want)] != want:
                    continue  # elsewhere in the repository: not read
                inner = inner[len(want) :]
                shown = "/".join(inner) or source.path
                if member.issym() or member.islnk():
                    raise _refuse(source, commit, f"holds a link in the skill folder ({shown} -> {member.linkname})")
                if not (member.isfile() or member.isdir()):
                    raise _refuse(source, commit, f"holds a device or pipe in the skill folder ({shown})")
                if member.isdir():
                    continue
                if not inner:
                    raise UsageError(f"{source} is a file at {commit[:7]}, not a folder", fix="name the skill's folder")
                kept += member.size
                if len(files) >= MAX_SKILL_FILES or kept > MAX_SKILL_FOLDER_BYTES:
                    limit = f"{MAX_SKILL_FILES} files or {MAX_SKILL_FOLDER_BYTES // (1024 * 1024)} MiB"
                    raise _refuse(source, commit, f"has a skill folder larger than {limit} ({shown})")
                handle = tar.extractfile(member)
                files[shown] = handle.read() if handle is not None else b""
                if member.mode & 0o111:
                    executable.add(shown)
    except PolicyError:
        raise  # a refusal above (a PermissionError, so an OSError too): as it is
    except tarfile.TarError as exc:
        raise _refuse(source, commit, f"is not a .tar.gz this appliance can read ({exc})") from None
    except (EOFError, OSError, zlib.error) as exc:  # a truncated or corrupt gzip stream
        raise _refuse(source, commit, f"is cut short or corrupt ({exc})") from None
    if top is not None and not _top_matches(top, commit):
        raise _refuse(source, commit, f"is not of that commit (its folder is {top})")
    if not files:
        raise NotFound(
            f"no folder {source.path or '/'} in {source.owner}/{source.repo} at {commit[:7]}",
            fix="check the path (case matters) and the ref",
        )
    return SkillFiles(files, frozenset(executable))
