"""The README's examples run as a person runs them, so the README cannot drift from what happens.

tests/readme_examples.py collects them (each command line of each ```sh block, each `curl` call, each
```yaml block) and lists the few that cannot run here. Every other one runs, against a copy of the
checkout's config and a temporary data dir:

- `picoagent ...` commands as a subprocess with ``--config`` and ``--data-dir``, each block in the
  README's order (`tokens add` before `tokens scope`), while one `picoagent serve` of this module runs on a
  free port: exit 0 and no traceback; where the README shows what a command prints, that too;
- `curl` calls with the real curl against that daemon: the URL's host and port rewritten, `pat_...` a token
  made with `picoagent tokens add` (the default scope, chat), the webhook's secret the daemon's; a 2xx;
- `echo 'NAME=...' >> config/secrets.env` in a folder holding a copy of the config: the file then holds NAME;
- each ```yaml block merged into a copy of the checkout's config (a mapping merges key by key, anything
  else replaces: "in the config" means added to it) and loaded with ``load_config``; the secrets a block
  names with ``${NAME}`` are the ones a person puts in the secrets file, so the test gives each a value.

The skills and the MCP server of "Plugins, skills and MCP" run further in tests/test_readme_skills_mcp.py.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from appliance.config import CHECKOUT_CONFIG, load_config
from appliance.config.load import read_secrets
from tests.helpers import ROOT, config_file, free_port, picoagent, wait_healthy
from tests.readme_examples import NOT_RUN, Example, collect, not_run_reason

EXAMPLES = collect()
WEBHOOK_SECRET = "5e" * 32  # the daemon's webhooks.home_assistant secret, as `openssl rand -hex 32` makes one

# What the README shows a command prints, as a pattern its output must match; COMMENT: the line's comment
# is the output itself, word for word.
COMMENT = "the comment"
SHOWN: dict[str, str] = {
    'picoagent chat -m "Hi" --json': r'(?s)(?=.*"text")(?=.*"route")(?=.*"reason")(?=.*"actions")(?=.*"timings")',
    "picoagent devices read living_room": COMMENT,
    "picoagent devices set fan on": r"^fan: state: on$",
    "picoagent devices scan --bus 1": r"0x76 +found +bme280 +living_room",
    'picoagent chat -m "turn on the fan" --json': r'"route": "intent"',
    "picoagent tools run calculator": r'"result": "391"',
    "picoagent tokens add grafana --scope read": r"^pat_\S+\n",
    "picoagent memory search where is the shed key": r"garden shed .*similarity 0\.\d+",
    'curl -H "Authorization: Bearer pat_..." -X POST': r'"reset": "api"',  # "the default session"
    "curl -s http://localhost:8080/api/webhook/": r'(?s)(?=.*"reply")(?=.*"route")(?=.*"chat": "kitchen")',
}


@dataclass
class Appliance:
    """The module's daemon: its config, data dir, port, a chat-scope token for curl, and what commands learnt."""

    folder: Path
    config: Path
    data: Path
    port: int
    token: str = ""
    found: dict[str, str] = field(default_factory=dict)  # placeholders filled by earlier commands (ID)

    def run(
        self, args: list[str], stdin: str | None = None, data: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`picoagent ARGS` on this config and data dir (or ``data``)."""
        where = ["--config", str(self.config), "--data-dir", str(data or self.data)]
        return picoagent(*where, *args, cwd=self.folder, timeout=180, stdin=stdin)


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Appliance]:
    """The README's `picoagent serve` (with --host and --port) on the checkout's config, stopped by its PID."""
    folder = tmp_path_factory.mktemp("readme")
    # The bridge's curl needs a bridge to sign for: the README's own block is loaded by run_yaml.
    hook = f"\nwebhooks:\n  home_assistant:\n    secret: {WEBHOOK_SECRET}\n"
    config = config_file(folder / "config", {"\nwebhooks: {}\n": hook})
    port, data, log = free_port(), folder / "data", folder / "serve.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PICOAGENT_CONFIG", "NOTIFY_SOCKET", "WATCHDOG_USEC")}
    command = [sys.executable, "-m", "appliance", "--config", str(config), "--data-dir", str(data)]
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*command, "serve", "--host", "127.0.0.1", "--port", str(port)], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    try:
        wait_healthy(port, timeout=60)
        here = Appliance(folder, config, data, port)
        made = here.run(["tokens", "add", "readme-curl"])
        assert made.returncode == 0, made.stderr
        here.token = made.stdout.split()[0]
        yield here
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    assert "Traceback" not in log.read_text(), log.read_text()


def blocks() -> list[list[Example]]:
    """The examples that run, grouped by their block (a curl or a yaml block alone), in the README's order."""
    groups: list[list[Example]] = []
    for example in EXAMPLES:
        if not_run_reason(example) is not None:
            continue
        if groups and example.kind == "sh" and groups[-1][-1].kind == "sh" and example.line - groups[-1][-1].line < 4:
            groups[-1].append(example)
        else:
            groups.append([example])
    return groups


def test_every_example_runs_or_says_why_not() -> None:
    runs = {e.id for group in blocks() for e in group}
    for example in EXAMPLES:
        if example.id not in runs:
            assert not_run_reason(example), f"{example.id} (README line {example.line}) neither runs nor is in NOT_RUN"
        else:
            assert runner(example) is not None, (
                f"{example.id} (README line {example.line}): no way to run it here, and it is not in NOT_RUN"
            )
    for key in NOT_RUN:
        assert any(not_run_reason(e) == NOT_RUN[key] for e in EXAMPLES), f"NOT_RUN[{key!r}] names no example any more"
    assert len(EXAMPLES) > 60, len(EXAMPLES)


def runner(example: Example) -> Any:
    """The function that runs an example, or None."""
    command = example.command()
    if example.kind == "yaml":
        return run_yaml
    if example.kind == "curl":
        return run_curl
    if command.startswith("picoagent "):
        return run_picoagent
    if re.fullmatch(r"echo .*>> config/secrets\.env", command):
        return run_secret_line
    if command == "chmod 600 config/secrets.env":
        return run_secrets_mode
    return None


@pytest.mark.parametrize("group", blocks(), ids=lambda group: group[0].id)
def test_the_readme_example_runs(group: list[Example], appliance: Appliance, tmp_path: Path) -> None:
    failures = []
    for example in group:
        problem = runner(example)(example, appliance, tmp_path)
        if problem:
            failures.append(f"{example.id} (README line {example.line}): {problem}")
    assert not failures, "\n".join(failures)


# --- picoagent commands -------------------------------------------------------------------------------------


def commands_of(example: Example, appliance: Appliance) -> list[list[str]]:
    """The argument lists a line stands for: `[OPTIONAL]` parts left out, `a X | b | c` as three commands of
    one group, `ID` the one an earlier `memory add` printed."""
    text = re.sub(r"\s*\[[^\]]*\]", "", example.command().removeprefix("picoagent "))
    first, *others = [shlex.split(part) for part in text.split(" | ")]
    commands = [first, *[[first[0], *other] for other in others]]
    return [[appliance.found.get(word, word) for word in args] for args in commands]


def run_picoagent(example: Example, appliance: Appliance, tmp_path: Path) -> str | None:
    for args in commands_of(example, appliance):
        stdin, data = None, None
        if args == ["serve"]:  # the module's daemon is this command, with --host and --port
            return None if appliance.run(["status"]).returncode == 0 else "the daemon is not running"
        if args == ["chat"]:  # the terminal chat, as a person leaves it
            stdin = "/help\n/quit\n"
        if args[:2] == ["models", "pull"] or args[:2] == ["models", "use"]:
            data = installed(args[2], tmp_path)
        out = appliance.run(args, stdin=stdin, data=data)
        said = out.stdout + out.stderr
        if out.returncode != 0 or "Traceback" in said:
            return f"`picoagent {shlex.join(args)}` exited {out.returncode}:\n{said[-2000:]}"
        if match := re.search(r"^remembered as (\d+):", out.stdout, re.MULTILINE):
            appliance.found["ID"] = match.group(1)
        shown = next((p for prefix, p in SHOWN.items() if example.command().startswith(prefix)), None)
        shown = re.escape(example.comment) if shown == COMMENT else shown
        if shown and not re.search(shown, out.stdout, re.MULTILINE):
            return f"`picoagent {shlex.join(args)}` printed no {shown!r}:\n{out.stdout[-2000:]}"
    return None


def installed(name: str, tmp_path: Path) -> Path:
    """A data dir of its own where the catalog model ``name`` is already in place (a sparse file of its size:
    installed means the size matches), so `models pull` finds it present and `models use` may choose it. The
    download itself, resumed and checked, is tests/test_models.py's, against a real local HTTP server."""
    from appliance.llm import models

    entry = models.get_entry(name)
    folder = tmp_path / "models-data" / "models"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / entry.file).open("wb") as fh:
        fh.truncate(entry.size_bytes)
    return folder.parent


# --- curl ------------------------------------------------------------------------------------------------


def run_curl(example: Example, appliance: Appliance, tmp_path: Path) -> str | None:
    """The call with the real curl, against the module's daemon; its status must be 2xx."""
    local = f"http://127.0.0.1:{appliance.port}"
    script = [line.replace("SECRET=...", f"SECRET={WEBHOOK_SECRET}") for line in example.setup]
    call = re.sub(r"https?://(?:picoagent\.local|localhost):8080", local, example.command())
    call = call.replace("pat_...", appliance.token)
    assert call.startswith("curl "), call
    script.append("curl -sS --max-time 120 -w '\\n%{http_code}' " + call.removeprefix("curl "))
    out = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True, timeout=150, check=False)
    body, _, status = out.stdout.rpartition("\n")
    if out.returncode != 0 or not status.startswith("2"):
        return f"{call} -> exit {out.returncode}, HTTP {status}:\n{out.stdout[-1500:]}{out.stderr[-500:]}"
    shown = next((p for prefix, p in SHOWN.items() if example.command().startswith(prefix)), None)
    if shown and not re.search(shown, body):
        return f"{call} answered no {shown!r}:\n{body[-1500:]}"
    return None


# --- secrets and config ---------------------------------------------------------------------------------------


def run_secret_line(example: Example, appliance: Appliance, tmp_path: Path) -> str | None:
    """The line in a folder holding config/ (as the checkout does): the secrets file then has its NAME."""
    (tmp_path / "config").mkdir(exist_ok=True)
    out = subprocess.run(["bash", "-c", example.command()], cwd=tmp_path, capture_output=True, text=True, check=False)
    name = re.search(r"echo ['\"](\w+)=", example.command())
    secrets = read_secrets(tmp_path / "config" / "secrets.env")
    if out.returncode != 0 or name is None or not secrets.get(name.group(1)):
        return f"exit {out.returncode} {out.stderr}; the secrets file holds {sorted(secrets)}"
    return None


def run_secrets_mode(example: Example, appliance: Appliance, tmp_path: Path) -> str | None:
    """The secrets file a line above appended to (created 0644, as echo makes it): 0600 after the command."""
    secrets = tmp_path / "config" / "secrets.env"
    secrets.parent.mkdir(exist_ok=True)
    secrets.touch(mode=0o644)
    out = subprocess.run(["bash", "-c", example.command()], cwd=tmp_path, capture_output=True, text=True, check=False)
    mode = secrets.stat().st_mode & 0o777
    return None if out.returncode == 0 and mode == 0o600 else f"exit {out.returncode} {out.stderr}; mode {mode:o}"


def merged(base: Any, block: Any) -> Any:
    """``block`` put into ``base``: mappings key by key, anything else replaced."""
    if isinstance(base, dict) and isinstance(block, dict):
        out = copy.deepcopy(base)
        for key, value in block.items():
            out[key] = merged(out[key], value) if key in out else value
        return out
    return block


def run_yaml(example: Example, appliance: Appliance, tmp_path: Path) -> str | None:
    """The block merged into the checkout's config, in a folder beside the checkout's examples/, loaded."""
    block = yaml.safe_load(example.text)
    config = merged(yaml.safe_load(CHECKOUT_CONFIG.read_text(encoding="utf-8")), block)
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # `../examples/...` as from the checkout's config/
    path = tmp_path / "config" / "picoagent.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    secrets = {name: f"{name.lower()}-value" for name in re.findall(r"\$\{(\w+)\}", example.text)}
    try:
        load_config(path, data_dir=tmp_path / "data", environ=secrets)
    except Exception as exc:  # the README's block must load: any failure is the finding
        return f"{type(exc).__name__}: {exc}"
    return None


def test_the_home_assistant_script_signs_asks_and_prints_the_reply(appliance: Appliance, tmp_path: Path) -> None:
    """The README's `picoagent_ask.py`, saved as written and run as Home Assistant's shell_command runs it (over
    plain http, the module's daemon; the certificate argument is the same ssl call test_web_tls makes)."""
    from tests.readme_examples import _fences

    lines = (ROOT / "README.md").read_text().splitlines()
    [script] = [b for _, _, kind, b in _fences(lines) if kind == "python" and "X-Picoagent-Signature" in "\n".join(b)]
    saved = tmp_path / "picoagent_ask.py"
    saved.write_text("\n".join(script) + "\n")
    url = f"http://127.0.0.1:{appliance.port}/api/webhook/home_assistant"
    asked = subprocess.run(
        [sys.executable, str(saved), url, WEBHOOK_SECRET, "what time is it?"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    assert re.match(r"It's \d\d:\d\d \(", asked.stdout), asked.stdout  # the grounded clock's answer, printed
    wrong = subprocess.run(
        [sys.executable, str(saved), url, "0" * 64, "what time is it?"], capture_output=True, text=True, timeout=60
    )
    assert wrong.returncode != 0 and "HTTP Error 401" in wrong.stderr  # a wrong secret is refused
