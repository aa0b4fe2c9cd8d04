"""The README's examples, collected as a person copies them, and the few that cannot run here.

Collected: each command line of each fenced ```sh block (a trailing ``\\`` joins the next line, a ``#``
outside quotes starts a comment, a line that only sets shell variables is kept as the setup of the
commands after it in its block), each ``curl ...`` call wherever it stands (fenced or an inline code
span, even across a line break), and each fenced ```yaml block. Each example's id is its heading and its
first words, so a failure names it. tests/test_readme_examples.py runs them; what it cannot run is in
:data:`NOT_RUN`, with why.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"

# What cannot run in `make test`, by example id or by the start of its command, with why. Keep it as small
# as honest: an example that can run against a temporary data dir, a local daemon or a local server runs.
NOT_RUN: dict[str, str] = {
    "make run": "installs apt packages and the venv, then serves in the foreground: `picoagent serve` runs instead",
    "make test": "the suite this test is part of",
    "make lint": "installs first, then ruff and mypy over the tree: the lint step before every commit",
    "make bench": "benchmarks never run in make test; each runs once at its smallest size in tests/test_bench_*.py",
    "python tests/bench/run.py": "a benchmark (each runs at its smallest size in tests/test_bench_*.py); "
    "tests/test_bench_smoke.py runs --only with an unknown name and with a row's name",
    "make keys": "writes keys/ota.key into the checkout; the `signing` fixture (tests/conftest.py) makes OTA keys "
    "in a temporary folder",
    "make image": "needs root, debootstrap and an arm64 root file system (minutes to hours)",
    "make image-test": "boots the image under qemu (needs `make image` first)",
    "make ota": "needs a Pi reachable over SSH as root; tests/test_ota_push.py pushes to a local sshd",
    "mosquitto_sub": "waits for messages from a broker at homeassistant.local for ever; tests/test_mqtt_daemon.py "
    "reads the same topics from a real mosquitto",
    "mosquitto_pub": "needs a broker at homeassistant.local; tests/test_mqtt_daemon.py switches through a real "
    "mosquitto",
    "picoagent update rollback": "switches the releases of an installed device (/opt/picoagent); tests/test_update.py "
    "rolls back on a temporary device root",
    "python3 -m firmware_tools verify": "needs a signed bundle (`make ota` builds one); tests/test_update.py "
    "verifies them",
    "python3 -m firmware_tools push": "needs a device over SSH; tests/test_ota_push.py pushes to a local sshd",
    "python3 -m firmware_tools flash": "writes a whole SD card (/dev/sdX)",
    "ssh root@picoagent.local": "runs on a Pi over SSH; make image-test runs the same tar line and "
    "picoagent-import-state on the booted image",
    "scp": "copies a file from or to a Pi over SSH",
    "curl --insecure --pinnedpubkey": "a template with placeholders (the pin, the URL): `picoagent status` prints the "
    "real one over HTTPS; tests/test_web_tls.py runs a pinned curl",
    "curl -LsSf https://astral.sh/uv/install.sh": "installs uv from the internet",
    "Slack · yaml display_information features oauth_config settings": "Slack's app manifest, pasted at "
    "api.slack.com: not picoagent's config",
    "Webhook bridge · yaml shell_command script": "Home Assistant's configuration.yaml (`!secret`), not picoagent's",
    "Webhook bridge · yaml automation": "Home Assistant's configuration.yaml, not picoagent's",
}


@dataclass(frozen=True)
class Example:
    """One example: ``kind`` is sh (a command line), curl or yaml; ``setup`` the shell lines before it."""

    id: str
    kind: str
    text: str
    line: int
    setup: tuple[str, ...] = ()
    comment: str = ""  # what the README says after the command's `#`

    def command(self) -> str:
        """The command as typed, without the venv's folder (`.venv/bin/picoagent` is `picoagent`)."""
        return self.text.removeprefix(".venv/bin/")


def split_comment(line: str) -> tuple[str, str]:
    """The line and its shell comment: from a ``#`` at the start or after a blank, outside quotes."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def _fences(lines: list[str]) -> list[tuple[int, str, str, list[str]]]:
    """Each fenced block: its first line's number, the heading above it, its kind and its dedented lines."""
    found, heading, i = [], "", 0
    while i < len(lines):
        if lines[i].startswith("#"):
            heading = lines[i].lstrip("#").strip()
        fence = re.match(r"^( *)```(\w*)\s*$", lines[i])
        if fence:
            end = next(j for j in range(i + 1, len(lines)) if re.match(rf"^{fence.group(1)}```\s*$", lines[j]))
            body = textwrap.dedent("\n".join(lines[i + 1 : end])).splitlines()
            found.append((i + 1, heading, fence.group(2), body))
            i = end
        i += 1
    return found


def _sh_examples(start: int, heading: str, body: list[str]) -> list[tuple[str, str, int, tuple[str, ...], str]]:
    out: list[tuple[str, str, int, tuple[str, ...], str]] = []
    setup: list[str] = []
    joined, first = "", 0
    for offset, raw in enumerate(body, start=start + 1):
        text, comment = split_comment(raw)
        if not joined:
            first = offset
        if text.endswith("\\"):
            joined += text[:-1].rstrip() + " "
            continue
        command, joined = (joined + text.strip()).strip(), ""
        if not command:
            continue
        if re.match(r"^[A-Za-z_]\w*=", command):  # SECRET=...; BODY=...: the setup of the lines after it
            setup.append(command)
            continue
        out.append((heading, command, first, tuple(setup), comment))
    return out


def _yaml_name(body: list[str]) -> str:
    keys = [m.group(1) for line in body if (m := re.match(r"^([A-Za-z_]\w*):", line))]
    return "yaml " + " ".join(keys)


def collect(readme: str | None = None) -> list[Example]:
    """Every example of the README, in its order."""
    text = README.read_text(encoding="utf-8") if readme is None else readme
    lines = text.splitlines()
    raw: list[tuple[str, str, str, int, tuple[str, ...], str]] = []  # heading, kind, text, line, setup, comment
    fenced_lines: set[int] = set()
    for start, heading, kind, body in _fences(lines):
        fenced_lines.update(range(start, start + len(body) + 2))
        if kind == "sh":
            for head, command, line, setup, comment in _sh_examples(start, heading, body):
                raw.append((head, "curl" if command.startswith("curl ") else "sh", command, line, setup, comment))
        elif kind == "yaml":
            raw.append((heading, "yaml", "\n".join(body) + "\n", start, (), ""))
    heading = ""
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    headings = {n + 1: ln.lstrip("#").strip() for n, ln in enumerate(lines) if ln.startswith("#")}
    for span in re.finditer(r"`(curl [^`]+)`", text):
        line = next(n for n, off in enumerate(offsets) if off > span.start())
        if line in fenced_lines:
            continue
        heading = headings[max(n for n in headings if n <= line)]
        raw.append((heading, "curl", " ".join(span.group(1).split()), line, (), ""))
    raw.sort(key=lambda r: r[3])
    return _named(raw)


def _named(raw: list[tuple[str, str, str, int, tuple[str, ...], str]]) -> list[Example]:
    """Ids from the heading and the fewest first words (at least three) that tell the examples apart."""

    def words(kind: str, text: str, n: int) -> str:
        if kind == "yaml":
            return _yaml_name(text.splitlines())
        return " ".join(text.removeprefix(".venv/bin/").split()[:n])

    sizes = [3] * len(raw)
    while True:
        ids = [f"{h} · {words(k, t, n)}" for (h, k, t, *_), n in zip(raw, sizes, strict=True)]
        twins = {i for i, x in enumerate(ids) if ids.count(x) > 1 and raw[i][1] != "yaml"}
        grown = [i for i in twins if sizes[i] < len(raw[i][2].split())]
        if not grown:
            break
        for i in grown:
            sizes[i] += 1
    return [Example(i, k, t, ln, s, c) for i, (_, k, t, ln, s, c) in zip(ids, raw, strict=True)]


def not_run_reason(example: Example) -> str | None:
    """Why ``example`` does not run here, or None when it runs."""
    if example.id in NOT_RUN:
        return NOT_RUN[example.id]
    command = example.command() + " "
    return next((why for prefix, why in NOT_RUN.items() if command.startswith(prefix + " ")), None)
