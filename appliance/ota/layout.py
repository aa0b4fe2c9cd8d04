"""Where OTA keeps things on a device, and what makes a release complete.

The layout (the image and ``make install-service`` make it; ``--root DIR`` moves all of it under DIR):

    /opt/picoagent/releases/<version>/   a complete release: app files, .venv, .release.json (written last)
    /opt/picoagent/current               symlink to releases/<version>, replaced atomically (rename(2))
    /opt/picoagent/update.json           the journal: current, previous, pending switch, last result
    /etc/picoagent/ota.pub               the trusted Ed25519 key (the image bakes it in)
    /usr/local/lib/picoagent/updater.pyz the boot-time updater, outside every release (ota/boot_updater.py)

Boot-time updaters written by older releases read this layout and ``update.json`` too (a rollback at
boot may run one: ota/boot_updater.py says when), so neither changes without a release that teaches the
boot-time updater first. Moving the updater into ``appliance/ota/`` (issue 34) changed neither.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RELEASE_FILE = ".release.json"
MANIFEST_COPY = ".manifest.json"


@dataclass
class Layout:
    """Where the releases, the link, the journal and the trusted key are, under ``root``."""

    root: Path

    @property
    def base(self) -> Path:
        return self.root / "opt/picoagent"

    @property
    def releases(self) -> Path:
        return self.base / "releases"

    @property
    def current(self) -> Path:
        return self.base / "current"

    @property
    def journal(self) -> Path:
        return self.base / "update.json"

    @property
    def lock(self) -> Path:
        return self.base / ".update.lock"

    @property
    def web_certificate(self) -> Path:
        """The web face's own certificate when it serves HTTPS (web.tls: auto; see channels/web/certificate.py)."""
        return self.root / "var/lib/picoagent/tls/cert.pem"

    @property
    def database(self) -> Path:
        """The appliance's SQLite database (its schema version is ``PRAGMA user_version``)."""
        return self.root / "var/lib/picoagent/picoagent.db"

    @property
    def trusted_keys(self) -> list[Path]:
        etc = self.root / "etc/picoagent"
        return sorted([etc / "ota.pub", *etc.glob("ota.d/*.pub")]) if (etc / "ota.pub").exists() else []


def timestamp() -> str:
    """The time a journal entry or a release records (UTC, seconds)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def release_info(release: Path) -> dict[str, Any] | None:
    """A release directory's ``.release.json`` when it is complete, else None."""
    try:
        info = json.loads((release / RELEASE_FILE).read_text())
        return info if isinstance(info, dict) and "version" in info else None
    except (OSError, ValueError):
        return None
