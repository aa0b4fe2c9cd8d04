"""A device root the OTA tests drive: its updater run as a real process (`python -m appliance.ota`),
its "service" a real HTTP server restarted by a real command, bundles signed by the laptop's release
tool (tests/test_update.py, tests/test_ota_boot_updater.py and tests/test_ota_push.py share it)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from appliance.ota import boot_updater
from appliance.ota.layout import Layout, release_info
from appliance.ota.updater import Updater
from firmware_tools import release as host
from tests.fakes import ota_release
from tests.helpers import free_port

ARCH = os.uname().machine
REPO = Path(__file__).resolve().parents[1]
INSTALL = ("/bin/sh", "install.sh")
# Where OTA was before appliance/ota/: a real release still carries these (appliance/update.py says why).
OLD_PATHS = ("appliance/update.py", "appliance/update_cli.py", "appliance/bundle.py", "appliance/boot_updater.py")
TAGGED = "appliance/__init__.py"  # in every boot-time updater, old and new: its last line names the release
SELFTEST = ("/bin/sh", "selftest.sh")


class Device:
    """A device root, its service port and the commands that drive its updater."""

    def __init__(self, root: Path, tools: Path, key: Path) -> None:
        self.root, self.tools, self.key = root, tools, key
        self.port = free_port()
        self.restart = ota_release.write_restart(tools)
        self.stop = ota_release.write_stop(tools)
        self.layout = Layout(root)
        (root / "etc/picoagent").mkdir(parents=True)
        (root / "etc/picoagent/ota.pub").write_bytes(key.with_suffix(".pub").read_bytes())

    def bundle(
        self,
        version: str,
        *markers: str,
        arch: str = ARCH,
        min_version: str = "0",
        key: Path | None = None,
        updater: str = "",
        schema: int = 9,
        python: str = "",
    ):
        folder = self.tools / f"tree-{version}-{'-'.join(markers)}-{arch}-{schema}"
        tree = ota_release.make_tree(folder, *markers, schema=schema)
        if updater:  # the release carries the updater's modules (a real one does), one of them tagged
            for name in (*boot_updater.modules(REPO), *OLD_PATHS):
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                (tree / name).write_bytes((REPO / name).read_bytes())
            with (tree / TAGGED).open("a") as f:
                f.write(f"# {updater}\n")
        out = self.tools / f"{version}-{'-'.join(markers)}-{arch}.bundle"
        return host.build_bundle(
            out,
            key or self.key,
            arch=arch,
            tree=tree,
            version_text=version,
            min_version=min_version,
            install=INSTALL,
            selftest=SELFTEST,
            python=python,
        )

    def updater_argv(self, action: str, *args: str, timeout: float = 15, module: str = "appliance.ota") -> list[str]:
        argv = [sys.executable, "-m", module, action, "--root", str(self.root)]
        if action in ("apply", "rollback"):
            argv += ["--restart-command", f"{sys.executable} {self.restart} {self.root} {self.port}"]
            argv += ["--health-url", f"http://127.0.0.1:{self.port}/healthz", "--health-timeout", str(timeout)]
            if module == "appliance.ota":  # what releases before appliance/ota/ run has no --stop-command
                argv += ["--stop-command", f"{sys.executable} {self.stop} {self.root} {REPO}"]
        return [*argv, *args]

    def run(self, action: str, *args: str, kill_at: str | None = None, timeout: float = 15, code: Path | None = None):
        """Run the updater; ``code``: a tree of an older release's updater to run instead of this checkout's."""
        env = dict(os.environ)
        env.pop("PICOAGENT_UPDATE_KILL_AT", None)
        if kill_at:
            env["PICOAGENT_UPDATE_KILL_AT"] = kill_at
        module = "appliance.ota"
        if code is not None:
            env["PYTHONPATH"] = str(code)
            module = "appliance.update"  # what releases before appliance/ota/ run
        argv = self.updater_argv(action, *args, timeout=timeout, module=module)
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=code)

    def apply(self, bundle: Path, *args: str, **kw):
        return self.run("apply", str(bundle), *args, **kw)

    def healthz(self) -> dict:
        """The service's /healthz (it may still be starting: a few seconds' grace)."""
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5) as resp:
                    return json.loads(resp.read())
            except ConnectionRefusedError:
                time.sleep(0.05)
            except urllib.error.URLError as exc:
                if not isinstance(exc.reason, ConnectionRefusedError):
                    raise
                time.sleep(0.05)
        raise AssertionError("the service does not answer")

    def current(self) -> str | None:
        info = release_info(self.layout.current.resolve())
        return info["version"] if info else None

    def journal(self) -> dict:
        return json.loads(self.layout.journal.read_text())

    def snapshot(self) -> dict[str, str]:
        """Every path under the root with its content hash or link target (the lock file aside)."""
        state = {}
        for path in sorted(self.root.rglob("*")):
            rel = str(path.relative_to(self.root))
            if path.name == ".update.lock" or rel.startswith("run/"):
                continue
            if path.is_symlink():
                state[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                state[rel] = "dir"
        return state

    def assert_current_complete(self) -> str:
        """`current` names a complete release whose files match its signed manifest; no half releases."""
        updater = Updater(self.root, restart=None, say=lambda _: None)
        version = updater.current_version()
        assert version is not None, f"current is not a complete release: {os.readlink(self.layout.current)}"
        assert updater.verify_current() == []
        for child in self.layout.releases.iterdir():
            assert release_info(child) is not None, f"an incomplete release was left: {child.name}"
        return version
