#!/usr/bin/python3
"""picoagent's first boot: apply picoagent-setup.yaml from the boot partition, once.

Run by picoagent-firstboot.service (before picoagent, ssh and avahi) with Debian's python3 and
python3-yaml, so it does not depend on the picoagent release. In order:

1. read /boot/firmware/picoagent-setup.yaml (optional; every key is optional);
2. hostname, time zone, root's SSH keys, Wi-Fi (wpa_supplicant for wlan0, a hashed WPA2 key);
3. secrets (Telegram token, cloud keys) into /etc/picoagent/secrets.env (0600 picoagent:picoagent: the
   daemon reads it, and its Settings page changes it; nobody else can), and the matching config in
   picoagent.yaml (picoagent's too, for the same page);
   ``model:`` (auto or a chat model of the release's catalog) becomes llm.model there: the daemon
   serves with the packaged model and downloads that one in the background (appliance/model_fetch.py);
4. the web password and an API token, through `picoagent passwd --stdin` / `picoagent tokens add
   NAME --stdin --scope SCOPE` as user picoagent (only their hashes are stored);
5. the setup file on the FAT partition is overwritten in place with blanks (so the clusters that held
   the secrets no longer do), then rewritten without the secrets, with what was done and any errors;
   this happens even when applying failed half-way (the failure is one of the errors), so a secret
   never stays on the card because something else went wrong;
6. SSH host keys (the image ships none), and the root partition and file system grown to the card;
7. a marker that stops the unit from ever running again.

`--root DIR` applies everything to a directory instead of / (what tests/test_firstboot.py does); then
commands that act on the running system (growpart, systemctl, running picoagent) are only logged.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

SETUP_NAME = "picoagent-setup.yaml"
MARKER = "var/lib/picoagent-image/firstboot.done"
CONFIG = "etc/picoagent/picoagent.yaml"
SECRETS = "etc/picoagent/secrets.env"
PICOAGENT = "/opt/picoagent/current/.venv/bin/picoagent"
CATALOG = "opt/picoagent/current/appliance/llm/catalog.json"  # the release's model catalog
CHECKOUT_CATALOG = Path(__file__).resolve().parents[2] / "appliance/llm/catalog.json"  # run from a checkout

# Setup keys that hold secrets: erased from the FAT partition once applied.
SECRET_KEYS = ("web_password", "setup_code", "api_token", "anthropic_api_key", "openai_api_key")
CLOUD = {
    "anthropic_api_key": (
        "ANTHROPIC_API_KEY",
        "claude",
        {
            "type": "anthropic",
            "api_base": "https://api.anthropic.com",
            "model": "claude-3-5-haiku-latest",
            "api_key": "${ANTHROPIC_API_KEY}",
            "price_in_per_mtok": 0.8,
            "price_out_per_mtok": 4.0,
        },
    ),
    "openai_api_key": (
        "OPENAI_API_KEY",
        "openai",
        {
            "type": "openai",
            "api_base": "https://api.openai.com/v1",
            "model": "gpt-4o-mini",
            "api_key": "${OPENAI_API_KEY}",
            "price_in_per_mtok": 0.15,
            "price_out_per_mtok": 0.6,
        },
    ),
}
HOSTNAME_RE = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")  # fullmatch: "$" would let a newline through


class FirstBoot:
    def __init__(self, root: Path, boot: Path, live: bool) -> None:
        self.root = root
        self.boot = boot
        self.live = live  # acting on the running system (root is /)
        self.done: list[str] = []
        self.errors: list[str] = []

    # ---- helpers

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def log(self, message: str) -> None:
        print(f"picoagent-firstboot: {message}", flush=True)

    def ok(self, message: str) -> None:
        self.done.append(message)
        self.log(message)

    def error(self, message: str) -> None:
        self.errors.append(message)
        print(f"picoagent-firstboot: error: {message}", file=sys.stderr, flush=True)

    def run(self, argv: list[str], *, stdin: str | None = None, check: bool = True) -> int:
        """Run a command on the live system; with --root, only log it."""
        if not self.live:
            self.log("would run: " + shlex.join(argv))
            return 0
        result = subprocess.run(argv, input=stdin, text=True, capture_output=True)
        if check and result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise RuntimeError(f"{shlex.join(argv[:4])} failed: {detail[-1] if detail else result.returncode}")
        return result.returncode

    def write(self, rel: str, text: str, mode: int = 0o644, group: str | None = None) -> None:
        """Write a file atomically with its mode (and group, when the group exists). A file of the daemon's
        group is its user's too: the Settings page changes the config and the secrets file in place."""
        target = self.path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".firstboot")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        gid = self.gid(group) if group else None
        if gid is not None and os.geteuid() == 0:
            os.chown(tmp, self.uid(group) or 0, gid)
        os.replace(tmp, target)

    def uid(self, user: str) -> int | None:
        """The user's id in the target root's /etc/passwd (not the build machine's)."""
        return self._id("etc/passwd", user)

    def gid(self, group: str) -> int | None:
        """The group's id in the target root's /etc/group (not the build machine's)."""
        return self._id("etc/group", group)

    def _id(self, table: str, name: str) -> int | None:
        """The third field of ``name``'s line in a passwd-format file of the target root."""
        try:
            for line in self.path(table).read_text().splitlines():
                fields = line.split(":")
                if len(fields) > 2 and fields[0] == name:
                    return int(fields[2])
        except OSError:
            pass
        return None

    # ---- the steps

    def read_setup(self) -> dict[str, Any] | None:
        setup = self.boot / SETUP_NAME
        if not setup.exists():
            self.log(f"no {setup}: nothing to apply")
            return None
        try:
            data = yaml.safe_load(setup.read_text(encoding="utf-8-sig")) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise SystemExit(f"{setup} is not valid YAML ({exc}); fix it and reboot") from None
        if not isinstance(data, dict):
            raise SystemExit(f"{setup} must be a mapping of settings (key: value); fix it and reboot")
        return data

    def hostname(self, name: Any) -> None:
        name = str(name).strip().lower()
        if not HOSTNAME_RE.fullmatch(name):
            self.error(f"hostname {name!r} is not valid (letters, digits and -, up to 63): kept the old one")
            return
        self.write("etc/hostname", name + "\n")
        hosts = self.path("etc/hosts")
        lines = hosts.read_text().splitlines() if hosts.exists() else ["127.0.0.1\tlocalhost"]
        lines = [line for line in lines if not line.startswith("127.0.1.1")]
        lines.insert(1, f"127.0.1.1\t{name}")
        self.write("etc/hosts", "\n".join(lines) + "\n")
        if self.live:
            self.run(["hostname", name], check=False)
        self.ok(f"hostname {name} (https://{name}.local:8080)")

    def timezone(self, zone: Any) -> None:
        zone = str(zone).strip()
        zonefile = self.path("usr/share/zoneinfo") / zone
        if ".." in zone or not zonefile.is_file():
            self.error(f"time zone {zone!r} is unknown: kept UTC")
            return
        localtime = self.path("etc/localtime")
        if localtime.is_symlink() or localtime.exists():
            localtime.unlink()
        localtime.symlink_to(f"/usr/share/zoneinfo/{zone}")
        self.write("etc/timezone", zone + "\n")
        self.ok(f"time zone {zone}")

    def ssh_keys(self, keys: Any) -> None:
        if isinstance(keys, str):
            keys = [keys]
        if not isinstance(keys, list):
            self.error("ssh_authorized_keys must be a list of public keys")
            return
        good = [str(k).strip() for k in keys if str(k).strip().startswith(("ssh-", "ecdsa-", "sk-"))]
        if len(good) != len(keys):
            self.error(f"{len(keys) - len(good)} ssh_authorized_keys entries are not public keys: skipped")
        if not good:
            return
        ssh = self.path("root/.ssh")
        ssh.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(ssh, 0o700)
        auth = ssh / "authorized_keys"
        existing = auth.read_text().splitlines() if auth.exists() else []
        self.write(
            "root/.ssh/authorized_keys", "\n".join(existing + [k for k in good if k not in existing]) + "\n", 0o600
        )
        self.ok(f"{len(good)} SSH key(s) for root")

    def wifi(self, wifi: Any) -> None:
        if not isinstance(wifi, dict) or not wifi.get("ssid"):
            self.error("wifi needs at least ssid (and password, country)")
            return
        ssid = str(wifi["ssid"])
        password = "" if wifi.get("password") is None else str(wifi["password"])
        country = str(wifi.get("country") or "").strip().upper()
        if country and not re.fullmatch(r"[A-Z]{2}", country):
            self.error(f"wifi country {country!r} is not a two-letter code: left out")
            country = ""
        lines = ["ctrl_interface=DIR=/run/wpa_supplicant GROUP=netdev", "update_config=0"]
        if country:
            lines.append(f"country={country}")
        lines += ["", "network={", f"\tssid={ssid.encode().hex()}"]
        if not password:
            lines.append("\tkey_mgmt=NONE")
        elif re.fullmatch(r"[0-9a-fA-F]{64}", password):
            lines.append(f"\tpsk={password.lower()}")
        elif 8 <= len(password) <= 63:
            # The WPA2 key derived from the passphrase: the passphrase itself is not stored.
            psk = hashlib.pbkdf2_hmac("sha1", password.encode(), ssid.encode(), 4096, 32).hex()
            lines.append(f"\tpsk={psk}")
        else:
            self.error("wifi password must be 8 to 63 characters: Wi-Fi not set up")
            return
        lines += ["\tscan_ssid=1", "}", ""]
        self.write("etc/wpa_supplicant/wpa_supplicant-wlan0.conf", "\n".join(lines), 0o600)
        # wpa_supplicant@wlan0 starts when wlan0 appears (udev rule); if it already has, start it now.
        if self.live and Path("/sys/class/net/wlan0").exists():
            self.run(["systemctl", "restart", "--no-block", "wpa_supplicant@wlan0.service"], check=False)
        self.ok(f"Wi-Fi {ssid!r}" + (f" (country {country})" if country else ""))

    def chat_models(self) -> dict[str, str] | None:
        """The release catalog's chat models (name -> title), or None when it cannot be read."""
        for path in (self.path(CATALOG), CHECKOUT_CATALOG):
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            return {m["name"]: m["title"] for m in doc.get("models", []) if m.get("kind", "chat") == "chat"}
        return None

    def configured_model(self) -> str:
        """llm.model as the image's config sets it ("" for the packaged default)."""
        try:
            config = yaml.safe_load(self.path(CONFIG).read_text()) or {}
        except (OSError, yaml.YAMLError):
            return ""
        llm = config.get("llm") if isinstance(config, dict) else None
        return str(llm.get("model") or "") if isinstance(llm, dict) else ""

    def model(self, value: Any) -> str | None:
        """llm.model for the setup's ``model:``: auto, or a chat model of the catalog (None: an error, logged)."""
        name = str(value).strip()
        baked = self.configured_model()
        if name == "auto" and baked:  # `make image MODEL=...` put one in the image: that is the one wanted
            self.ok(f"model auto: kept {baked}, the model built into the image")
            return None
        if name == "auto":
            self.ok(
                "model auto: picoagent picks the catalog model for this board's RAM and CPU and downloads it "
                "in the background; the packaged model answers meanwhile"
            )
            return name
        known = self.chat_models()
        if known is None:
            self.error(f"model {name!r}: the model catalog ({CATALOG}) cannot be read: kept the packaged model")
            return None
        if name not in known:
            self.error(
                f"model {name!r} is not a chat model of the catalog: kept the packaged model "
                f"(use auto or one of: {', '.join(sorted(known))})"
            )
            return None
        self.ok(
            f"model {name} ({known[name]}): downloaded in the background at the first start; "
            "the packaged model answers meanwhile"
        )
        return name

    def secrets(self, values: dict[str, str]) -> None:
        """Merge NAME=value lines into secrets.env (0640 root:picoagent)."""
        if not values:
            return
        path = self.path(SECRETS)
        kept = []
        if path.exists():
            for line in path.read_text().splitlines():
                name = line.split("=", 1)[0].strip().removeprefix("export ").strip()
                if name not in values:
                    kept.append(line)
        for name, value in values.items():
            if "\n" in value or "\r" in value:
                self.error(f"{name} holds a line break: left out")
                continue
            kept.append(f"{name}={value}")
        self.write(SECRETS, "\n".join(kept) + "\n", 0o600, "picoagent")
        self.ok("secrets in /etc/picoagent/secrets.env: " + ", ".join(values))

    def config(self, update: dict[str, Any]) -> None:
        """Merge top-level sections into /etc/picoagent/picoagent.yaml."""
        if not update:
            return
        path = self.path(CONFIG)
        config = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
        for key, value in update.items():
            if isinstance(value, dict) and isinstance(config.get(key), dict):
                config[key].update(value)
            else:
                config[key] = value
        header = "# picoagent on this Pi (first boot added: " + ", ".join(update) + ").\n"
        header += "# Every key, with its comment: /opt/picoagent/current/config/picoagent.yaml\n"
        self.write(CONFIG, header + yaml.safe_dump(config, sort_keys=False), 0o640, "picoagent")

    def picoagent(self, args: list[str], stdin: str, what: str) -> None:
        """Run the picoagent CLI as user picoagent (it owns the database)."""
        argv = [
            "runuser",
            "-u",
            "picoagent",
            "--",
            "env",
            "PICOAGENT_CONFIG=/etc/picoagent/picoagent.yaml",
            "HOME=/var/lib/picoagent",
            PICOAGENT,
            *args,
        ]
        try:
            self.run(argv, stdin=stdin + "\n")
            self.ok(what)
        except (RuntimeError, OSError) as exc:
            self.error(f"{what}: {exc}")

    def apply(self, setup: dict[str, Any]) -> None:
        secrets: dict[str, str] = {}
        config: dict[str, Any] = {}
        steps = {
            "hostname": self.hostname,
            "timezone": self.timezone,
            "ssh_authorized_keys": self.ssh_keys,
            "wifi": self.wifi,
        }
        for key, step in steps.items():
            if setup.get(key) not in (None, "", []):
                try:
                    step(setup[key])
                except Exception as exc:  # one bad setting must not stop the rest (or the wipe)
                    self.error(f"{key}: {exc}")
        telegram = setup.get("telegram")
        if isinstance(telegram, dict) and telegram.get("bot_token"):
            secrets["TELEGRAM_BOT_TOKEN"] = str(telegram["bot_token"]).strip()
            section: dict[str, Any] = {"enabled": True, "token": "${TELEGRAM_BOT_TOKEN}"}
            owner = telegram.get("owner_id")
            if owner is not None:
                try:
                    section["allow_from"] = [int(owner)]
                except (TypeError, ValueError):
                    self.error(f"telegram owner_id {owner!r} is not a number: pair with `picoagent telegram pair`")
            config["telegram"] = section
        elif telegram:
            self.error("telegram needs bot_token (and owner_id)")
        providers: dict[str, Any] = {}
        for key, (name, provider, entry) in CLOUD.items():
            if setup.get(key):
                secrets[name] = str(setup[key]).strip()
                providers[provider] = entry
        if providers:
            config["providers"] = providers
        if setup.get("model") not in (None, ""):
            model = self.model(setup["model"])
            if model is not None:
                config["llm"] = {"model": model}
        unknown = set(setup) - {*steps, "telegram", "api_token_scope", "model", *SECRET_KEYS}
        if unknown:
            self.error("unknown settings ignored: " + ", ".join(sorted(unknown)))
        self.secrets(secrets)
        self.config(config)
        if setup.get("web_password"):
            self.picoagent(["passwd", "--stdin"], str(setup["web_password"]), "web password set")
        elif setup.get("setup_code"):
            self.picoagent(["passwd", "--initial"], str(setup["setup_code"]), "setup code set for the web page")
        if setup.get("api_token"):
            scope = str(setup.get("api_token_scope") or "chat")  # what `picoagent tokens add` gives by default
            self.picoagent(
                ["tokens", "add", "setup", "--stdin", "--scope", scope],
                str(setup["api_token"]).strip(),
                f"API token 'setup' added (scope {scope})",
            )
        self.web_note("web_password" if setup.get("web_password") else "setup_code" if setup.get("setup_code") else "")

    def web_note(self, given: str) -> None:
        """Where the web page is and how to sign in (never a password: this log is the journal's)."""
        hostname = self.path("etc/hostname")
        name = (hostname.read_text().strip() if hostname.exists() else "") or "picoagent"
        password = {
            "web_password": "your web_password",
            "setup_code": "your setup_code; the page's setup follows",
        }.get(given, f"the password its first start makes: `ssh root@{name}.local {PICOAGENT} passwd --show-initial`")
        self.ok(
            f"web page https://{name}.local:8080 ({password}); "
            f"the certificate's fingerprint: `{PICOAGENT} status` or `journalctl -u picoagent`"
        )

    def wipe(self, setup: dict[str, Any]) -> None:
        """Overwrite the setup file in place, then rewrite it without the secrets."""
        path = self.boot / SETUP_NAME
        size = path.stat().st_size
        with open(path, "r+b") as handle:  # same clusters on FAT: the old bytes are gone from the card
            handle.write(b"#" * size)
            handle.flush()
            os.fsync(handle.fileno())
        clean = {k: v for k, v in setup.items() if k not in SECRET_KEYS}
        if isinstance(clean.get("wifi"), dict):
            clean["wifi"] = {k: v for k, v in clean["wifi"].items() if k != "password"}
        if isinstance(clean.get("telegram"), dict):
            clean["telegram"] = {k: v for k, v in clean["telegram"].items() if k != "bot_token"}
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        text = [f"# picoagent first boot applied this file on {now}."]
        if self.errors:
            text.append(
                "# Its secrets were erased here. Settings with an ERROR below were not applied: set them on the Pi "
                "itself (ssh, `picoagent passwd`, /etc/picoagent/secrets.env)."
            )
        else:
            text.append(
                "# Its secrets were moved to the Pi (/etc/picoagent/secrets.env, picoagent's database) and erased here."
            )
        text.append("# Editing it again has no effect: first boot runs once. Change settings on the Pi itself.")
        text += [f"# done: {line}" for line in self.done]
        text += [f"# ERROR: {line}" for line in self.errors]
        text.append("")
        body = yaml.safe_dump(clean, sort_keys=False) if clean else ""
        with open(path, "r+b") as handle:
            handle.write(("\n".join(text) + "\n" + body).encode())
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
        self.log(f"secrets erased from {path}")

    def host_keys(self) -> None:
        existing = list(self.path("etc/ssh").glob("ssh_host_*_key"))
        if existing:
            return
        self.path("etc/ssh").mkdir(parents=True, exist_ok=True)
        # -A with -f: make the missing host keys under that root (works without --root too).
        subprocess.run(["ssh-keygen", "-A", "-f", str(self.root)], check=True, capture_output=True)
        self.ok("SSH host keys made")

    def grow_root(self) -> None:
        if not self.live:
            self.log("would grow the root partition and file system")
            return
        source = subprocess.run(["findmnt", "-no", "SOURCE", "/"], capture_output=True, text=True).stdout.strip()
        dev = os.path.basename(os.path.realpath(source))
        part_file = Path(f"/sys/class/block/{dev}/partition")
        if not part_file.exists():
            self.error(f"root {source} is not a partition: not grown")
            return
        number = part_file.read_text().strip()
        disk = os.path.basename(os.path.realpath(f"/sys/class/block/{dev}/.."))
        code = self.run(["growpart", f"/dev/{disk}", number], check=False)
        if code not in (0, 1):  # 1: NOCHANGE (already fills the card)
            self.error(f"growpart /dev/{disk} {number} failed ({code})")
            return
        self.run(["resize2fs", f"/dev/{dev}"])
        self.ok(f"root file system /dev/{dev} grown to fill /dev/{disk}")

    def main(self) -> int:
        setup = self.read_setup()
        if setup is not None:
            try:
                self.apply(setup)
            except Exception as exc:  # on the card and in the journal; the steps after it still run
                self.error(f"applying the settings stopped: {type(exc).__name__}: {exc}")
            finally:  # whatever happened, the secrets leave the card
                self.wipe(setup)
        for step in (self.host_keys, self.grow_root):
            try:
                step()
            except Exception as exc:
                self.error(f"{step.__name__}: {exc}")
        marker = self.path(MARKER)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("\n".join(["done"] + self.done + [f"ERROR: {e}" for e in self.errors]) + "\n")
        self.log("done" + (f" with {len(self.errors)} error(s)" if self.errors else ""))
        return 1 if self.errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="/", help="apply to this directory instead of / (tests)")
    parser.add_argument("--boot", help="the boot partition (default: ROOT/boot/firmware)")
    args = parser.parse_args(argv)
    root = Path(args.root)
    boot = Path(args.boot) if args.boot else root / "boot/firmware"
    live = root.resolve() == Path("/")
    return FirstBoot(root, boot, live).main()


if __name__ == "__main__":
    sys.exit(main())
