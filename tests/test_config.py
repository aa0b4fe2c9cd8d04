"""The typed config: the shipped file, unknown keys, types, ranges, ${NAME} references, secrets, paths, jobs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from appliance.config import CHECKOUT_CONFIG, Config, config_path, describe_keys, doc, load_config, load_jobs
from appliance.config import load as config_module
from appliance.errors import ConfigError
from tests.helpers import write

SECRET = "hunter2-correct-horse-7731"


def refused(path: Path, environ: dict[str, str] | None = None) -> ConfigError:
    """The ConfigError loading `path` raises."""
    with pytest.raises(ConfigError) as info:
        load_config(path, environ=environ or {})
    return info.value


# --- the shipped file ----------------------------------------------------------------------------


def test_the_shipped_config_loads() -> None:
    config = load_config(CHECKOUT_CONFIG, environ={})
    assert config.source == CHECKOUT_CONFIG.resolve()
    assert config.base_dir == CHECKOUT_CONFIG.resolve().parent
    assert config.resolve_path(config.data_dir).is_absolute()
    assert config.llm.threads == "auto" or isinstance(config.llm.threads, int)


def _yaml_keys(lines: list[str]) -> dict[str, int]:
    """Dotted key path -> line index, from the indentation of `key:` lines."""
    keys: dict[str, int] = {}
    stack: list[tuple[int, str]] = []
    for index, line in enumerate(lines):
        match = re.match(r"^( *)([A-Za-z_][A-Za-z0-9_]*)\s*:", line)
        if not match:
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = ".".join([name for _, name in stack] + [match.group(2)])
        keys[dotted] = index
        stack.append((indent, match.group(2)))
    return keys


def test_every_config_key_is_documented_in_the_shipped_yaml() -> None:
    lines = CHECKOUT_CONFIG.read_text(encoding="utf-8").splitlines()
    found = _yaml_keys(lines)
    sections = {name for name, _ in describe_keys() if any(k.startswith(name + ".") for k, _ in describe_keys())}
    problems = []
    for key, description in describe_keys():
        assert description and "\n" not in description, f"{key}: needs a one-line description in config.py"
        if key not in found:
            problems.append(f"{key}: missing from {CHECKOUT_CONFIG.name}")
            continue
        index = found[key]
        above = lines[index - 1].strip() if index > 0 else ""
        # A section (agent:, llm:) may instead be introduced by a comment as the first line of its block.
        first_inside = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if not above.startswith("#") and not (key in sections and first_inside.startswith("#")):
            problems.append(f"{key} (line {index + 1}): no # comment directly above it")
    assert not problems, "\n".join(problems)
    # And the reverse: the shipped file holds no key the code does not know (load_config refuses those too).
    # devices.<name> and events[] hold user-named entries; their fields are described in the block comment.
    assert {k for k in found if not k.startswith(("devices.", "events."))} <= {name for name, _ in describe_keys()}


def test_an_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, ""), environ={})
    assert config.agent.max_rounds == 4 and config.llm.threads == "auto" and config.log_level == "warning"


# --- unknown keys and types ----------------------------------------------------------------------


def test_an_unknown_top_level_key_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "agnet:\n  name: Pico\n"))
    assert str(err).startswith("agnet: unknown key")
    assert "did you mean agent?" in str(err)
    assert "data_dir" in (err.fix or "") and "llm" in (err.fix or "")


def test_an_unknown_nested_key_is_refused_with_its_full_path(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "agent:\n  max_round: 3\n"))
    assert str(err).startswith("agent.max_round: unknown key")
    assert "max_rounds" in str(err)
    assert "max_rounds" in (err.fix or "")


def test_an_unknown_key_with_no_close_match_gets_no_guess(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "llm:\n  flux_capacitor: 1\n"))
    assert str(err) == "llm.flux_capacitor: unknown key"


def test_a_wrong_type_names_the_key_and_the_value(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "agent:\n  max_rounds: five\n"))
    assert str(err) == 'agent.max_rounds: expected an integer, got "five"'


@pytest.mark.parametrize("value", ["true", "false"])
def test_a_bool_is_not_an_integer(tmp_path: Path, value: str) -> None:
    err = refused(write(tmp_path, f"agent:\n  max_rounds: {value}\n"))
    assert str(err) == f"agent.max_rounds: expected an integer, got {value}"


def test_a_bool_is_not_a_number(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "agent:\n  temperature: yes\n"))
    assert str(err).startswith("agent.temperature: expected a number")


def test_a_section_must_be_a_mapping(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "llm: big\n"))
    assert str(err) == 'llm: expected a mapping, got "big"'


def test_an_integer_is_accepted_where_a_number_is_expected(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "agent:\n  temperature: 1\n"), environ={})
    assert config.agent.temperature == 1.0 and isinstance(config.agent.temperature, float)


@pytest.mark.parametrize(("value", "expected"), [("auto", "auto"), ("3", 3)])
def test_threads_take_auto_or_a_number(tmp_path: Path, value: str, expected: object) -> None:
    config = load_config(write(tmp_path, f"llm:\n  threads: {value}\n  batch_threads: {value}\n"), environ={})
    assert config.llm.threads == expected and config.llm.batch_threads == expected


@pytest.mark.parametrize("value", ["many", "true", "2.5"])
def test_threads_refuse_anything_else(tmp_path: Path, value: str) -> None:
    err = refused(write(tmp_path, f"llm:\n  threads: {value}\n"))
    assert str(err).startswith('llm.threads: expected an integer or one of "auto", got ')


def test_log_level_is_one_of_its_names(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "log_level: loud\n"))
    assert str(err) == 'log_level: expected one of "debug", "info", "warning", "error", got "loud"'


def test_stop_is_a_list_of_strings(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "llm:\n  stop: ['<end>', '###']\n"), environ={})
    assert config.llm.stop == ["<end>", "###"]
    err = refused(write(tmp_path, "llm:\n  stop: '<end>'\n"))
    assert str(err) == 'llm.stop: expected a list, got "<end>"'
    err = refused(write(tmp_path, "llm:\n  stop: ['a', [1]]\n"))
    assert str(err).startswith("llm.stop[1]: expected a string")


# --- ranges --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("agent:\n  temperature: 3\n", "agent.temperature: expected a number from 0 to 2"),
        ("agent:\n  temperature: -0.1\n", "agent.temperature: expected a number from 0 to 2"),
        ("agent:\n  max_rounds: 0\n", "agent.max_rounds: expected a whole number from 1 to 100, got 0"),
        ("agent:\n  history_messages: -1\n", "agent.history_messages: expected a whole number from 0 to 10000, got -1"),
        ("agent:\n  repeat_penalty: 0.5\n", "agent.repeat_penalty: expected a number from 1 to 2"),
        ("llm:\n  threads: 0\n", "llm.threads: expected auto or a number of threads from 1 to 256"),
        ("llm:\n  batch_threads: 1000\n", "llm.batch_threads: expected auto or a number of threads from 1 to 256"),
        ("llm:\n  context_tokens: 100\n", "llm.context_tokens: expected at least 256 tokens, got 100"),
        ("llm:\n  memory_margin_mb: -1\n", "llm.memory_margin_mb: expected 0 or more megabytes, got -1"),
        (
            "web:\n  login_attempts_per_minute_total: 0\n",
            "web.login_attempts_per_minute_total: expected a positive whole number, got 0",
        ),
        (
            "web:\n  login_attempts_per_minute: 10\n  login_attempts_per_minute_total: 5\n",
            "web.login_attempts_per_minute_total: expected at least web.login_attempts_per_minute (10)",
        ),
        ("tools:\n  workspace_max_mb: 0\n", "tools.workspace_max_mb: expected at least 1 MiB (what the workspace"),
        ("web:\n  port: 0\n", "web.port: expected a TCP port from 1 to 65535, got 0"),
        ("tools:\n  shell:\n    memory_mb: 8\n", "tools.shell.memory_mb: expected at least 16 MiB, got 8"),
        (
            "tools:\n  web_fetch:\n    max_redirects: 51\n",
            "tools.web_fetch.max_redirects: expected a whole number from 0 to 50, got 51",
        ),
        (
            "tasks:\n  max_steps: 30\n  max_steps_limit: 20\n",
            "tasks.max_steps: 30 is over tasks.max_steps_limit (20), the most any task may take",
        ),
    ],
)
def test_values_out_of_range_are_refused(tmp_path: Path, yaml_text: str, message: str) -> None:
    assert str(refused(write(tmp_path, yaml_text))).startswith(message)


def test_a_range_says_what_people_are_told() -> None:
    with pytest.raises(TypeError, match="a range needs expected="):
        doc("most things", 4, low=1)


def test_the_edges_of_the_ranges_are_accepted(tmp_path: Path) -> None:
    text = "agent:\n  temperature: 0\n  max_rounds: 1\n  history_messages: 0\n  repeat_penalty: 2\nllm:\n  threads: 1\n"
    config = load_config(write(tmp_path, text), environ={})
    assert config.agent.temperature == 0.0 and config.agent.history_messages == 0 and config.llm.threads == 1


# --- ${NAME} references and the secrets file -----------------------------------------------------


def test_a_reference_is_read_from_the_environment(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "agent:\n  name: ${BOT_NAME}\n"), environ={"BOT_NAME": "Robin"})
    assert config.agent.name == "Robin"


def test_a_reference_inside_a_string_is_substituted(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "agent:\n  name: Dr ${WHO}-${WHO}\n"), environ={"WHO": "Who"})
    assert config.agent.name == "Dr Who-Who"


def test_a_reference_is_read_from_the_secrets_file_next_to_the_config(tmp_path: Path) -> None:
    secrets = "# a comment\n\nexport BOT_NAME='Robin'\nROUNDS = \"7\"\n"
    config = load_config(write(tmp_path, "agent:\n  name: ${BOT_NAME}\n  max_rounds: ${ROUNDS}\n", secrets=secrets))
    assert config.agent.name == "Robin"
    assert config.agent.max_rounds == 7


def test_the_environment_wins_over_the_secrets_file(tmp_path: Path) -> None:
    path = write(tmp_path, "agent:\n  name: ${BOT_NAME}\n", secrets="BOT_NAME=FromFile\n")
    assert load_config(path, environ={"BOT_NAME": "FromEnv"}).agent.name == "FromEnv"
    assert load_config(path, environ={}).agent.name == "FromFile"


def test_secrets_file_may_live_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "keys.env").write_text("BOT_NAME=Elsewhere\n")
    path = write(tmp_path / "etc", "secrets_file: ../private/keys.env\nagent:\n  name: ${BOT_NAME}\n")
    assert load_config(path, environ={}).agent.name == "Elsewhere"


def test_a_missing_reference_names_the_variable(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "agent:\n  name: ${NOT_SET_ANYWHERE}\n"))
    assert str(err) == "agent.name: ${NOT_SET_ANYWHERE} is not set"
    assert "NOT_SET_ANYWHERE" in (err.fix or "")


def test_a_section_switched_off_needs_none_of_its_secrets(tmp_path: Path) -> None:
    """Telegram switched off with its token's secret removed: the config loads (every command refused it, a README
    walk found); switched on, the missing secret is named as before."""
    off = write(tmp_path / "off", "telegram:\n  enabled: false\n  token: ${TELEGRAM_BOT_TOKEN}\n")
    assert load_config(off, environ={}).telegram.token == ""
    on = write(tmp_path / "on", "telegram:\n  enabled: true\n  token: ${TELEGRAM_BOT_TOKEN}\n")
    assert str(refused(on)) == "telegram.token: ${TELEGRAM_BOT_TOKEN} is not set"


@pytest.mark.parametrize(
    "yaml_text",
    [
        "agent:\n  max_rounds: ${TOKEN}\n",
        "agent:\n  max_rounds: '4${TOKEN}'\n",
        "agent:\n  temperature: ${TOKEN}\n",
        "llm:\n  threads: ${TOKEN}\n",
        "llm:\n  stop: ${TOKEN}\n",
        "log_level: ${TOKEN}\n",
    ],
)
def test_a_secret_of_the_wrong_type_is_never_echoed(tmp_path: Path, yaml_text: str) -> None:
    err = refused(write(tmp_path, yaml_text, secrets=f"TOKEN={SECRET}\n"))
    assert "a value from a secret reference" in str(err)
    assert SECRET not in str(err)
    assert SECRET not in (err.fix or "")
    assert SECRET not in err.for_people()
    assert SECRET not in repr(err.args)


def test_an_environment_value_of_the_wrong_type_is_never_echoed(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "agent:\n  max_rounds: ${TOKEN}\n"), environ={"TOKEN": SECRET})
    assert str(err) == "agent.max_rounds: expected an integer, got a value from a secret reference"
    assert SECRET not in err.for_people()


@pytest.mark.parametrize(
    "yaml_text", ["agent:\n  temperature: ${T}\n", "agent:\n  max_rounds: ${T}\n", "llm:\n  threads: ${T}\n"]
)
def test_a_referenced_value_out_of_range_is_never_echoed(tmp_path: Path, yaml_text: str) -> None:
    err = refused(write(tmp_path, yaml_text), environ={"T": "987654"})
    assert "a value from a secret reference" in str(err)
    assert "987654" not in err.for_people()


def test_a_malformed_secrets_line_is_reported_by_number_without_echoing_it(tmp_path: Path) -> None:
    secrets = f"# tokens\nGOOD=1\n{SECRET}\n"
    err = refused(write(tmp_path, "agent:\n  name: Pico\n", secrets=secrets))
    assert str(err) == f"{tmp_path / 'secrets.env'}:3: expected KEY=value"
    assert SECRET not in str(err) and SECRET not in (err.fix or "")


def test_a_secrets_line_with_a_bad_name_is_not_echoed(tmp_path: Path) -> None:
    err = refused(write(tmp_path, "", secrets=f"MY TOKEN={SECRET}\n"))
    assert str(err).endswith("secrets.env:1: expected KEY=value")
    assert SECRET not in err.for_people()


def test_a_missing_secrets_file_is_fine_when_nothing_refers_to_it(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "agent:\n  name: Pico\n"), environ={}).agent.name == "Pico"


# --- the file itself -----------------------------------------------------------------------------


def test_invalid_yaml_is_reported_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "agent:\n  name: Pico\n  max_rounds: a: b\nllm: {}\n")
    err = refused(path)
    assert str(err).startswith(f"{path} (line 3, column ")
    assert "mapping values are not allowed here" in str(err)


@pytest.mark.parametrize(
    ("text", "line", "key", "first"),
    [
        ("tools:\n  shell: {enabled: false}\nagent: {}\ntools:\n  web_fetch: {enabled: false}\n", 4, "tools", 1),
        ("agent:\n  name: Pico\n  max_rounds: 3\n  name: Juniper\n", 4, "name", 2),
    ],
)
def test_a_key_given_twice_is_refused_with_both_lines(
    tmp_path: Path, text: str, line: int, key: str, first: int
) -> None:
    """A second `tools:` pasted below the first silently dropped the first's settings; now it is named."""
    path = write(tmp_path, text)
    err = refused(path)
    assert str(err).startswith(f"{path} (line {line}, column ")
    assert f"the key {key!r} is given twice (first on line {first})" in str(err)
    assert err.fix == "keep the key once and put all its settings under it"


@pytest.mark.parametrize("text", ["- a\n- b\n", "just words\n", "42\n"])
def test_the_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    assert str(refused(path)) == f"{path}: expected a mapping of keys at the top level"


def test_a_missing_config_file_says_how_to_fix_it(tmp_path: Path) -> None:
    err = refused(tmp_path / "nope.yaml")
    assert str(err) == f"config file {tmp_path / 'nope.yaml'} does not exist"
    assert "--config" in (err.fix or "") and "PICOAGENT_CONFIG" in (err.fix or "")
    assert isinstance(err, ValueError) and err.exit_code == 2


# --- which file, and paths -----------------------------------------------------------------------


def test_config_path_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit, from_env, system = tmp_path / "explicit.yaml", tmp_path / "env.yaml", tmp_path / "etc.yaml"
    monkeypatch.setattr(config_module, "SYSTEM_CONFIG", system)
    monkeypatch.delenv("PICOAGENT_CONFIG", raising=False)
    assert config_path() == CHECKOUT_CONFIG  # no /etc file: the checkout's
    system.write_text("")
    assert config_path() == system
    monkeypatch.setenv("PICOAGENT_CONFIG", str(from_env))
    assert config_path() == from_env
    assert config_path(explicit) == explicit
    assert config_path(str(explicit)) == explicit
    monkeypatch.setenv("PICOAGENT_CONFIG", "")  # set but empty: ignored
    assert config_path() == system


def test_load_config_without_a_path_uses_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "agent:\n  name: FromEnvFile\n")
    monkeypatch.setenv("PICOAGENT_CONFIG", str(path))
    config = load_config(environ={})
    assert config.source == path.resolve() and config.agent.name == "FromEnvFile"


def test_a_relative_data_dir_resolves_against_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    path = write(tmp_path / "etc" / "picoagent", "data_dir: ../../state\n")
    config = load_config(path, environ={})
    assert config.base_dir == (tmp_path / "etc" / "picoagent").resolve()
    assert config.resolve_path(config.data_dir) == (tmp_path / "state").resolve()
    assert config.resolve_path("/abs/x") == Path("/abs/x")


def test_the_data_dir_override_wins_and_resolves_against_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "conf", "data_dir: /somewhere/else\n")
    config = load_config(path, data_dir="mine", environ={})
    assert config.data_dir == str((tmp_path / "mine").resolve())
    assert config.resolve_path(config.data_dir) == (tmp_path / "mine").resolve()
    assert load_config(path, data_dir=tmp_path / "abs", environ={}).data_dir == str(tmp_path / "abs")
    assert load_config(path, environ={}).data_dir == "/somewhere/else"


def test_source_is_not_a_config_key(tmp_path: Path) -> None:
    assert "source" not in {name for name, _ in describe_keys()}
    err = refused(write(tmp_path, "source: /tmp/x\n"))
    assert str(err).startswith("source: unknown key")
    assert isinstance(Config().agent.max_rounds, int)


# --- cron jobs: the config's scheduler.jobs and workspace/cron.yaml, checked by the same code ----------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("- id: x\n  schedul: daily 09:00\n  prompt: hi\n", "schedul: unknown key (did you mean schedule?)"),
        ("- id: x\n  prompt: hi\n", "schedule: required, but missing"),
        ("- id: x\n  schedule: daily 09:00\n  prompt: [1, 2]\n", "prompt: expected a string, got a list"),
        (
            "- id: x\n  schedule: startup\n  prompt: hi\n  deliver: maybe\n",
            'deliver: expected true or false, got "maybe"',
        ),
        (
            "- id: x\n  schedule: startup\n  prompt: hi\n  missed: sometimes\n",
            'missed: expected one of "skip", "run_once", got "sometimes"',
        ),
        ("- id: Bad Id\n  schedule: startup\n  prompt: hi\n", "id: lower-case letters, digits and _ (at most 40)"),
        ("- id: x\n  schedule: daily 09:00\n", "a job has exactly one of prompt, device (with value), task or message"),
        ("- id: x\n  schedule: every 5x\n  prompt: hi\n", 'schedule "every 5x": expected a number and a unit'),
    ],
)
def test_the_same_job_mistake_reads_the_same_in_the_config_and_in_cron_yaml(
    tmp_path: Path, entry: str, message: str
) -> None:
    config_text = "scheduler:\n  jobs:\n" + "".join("    " + line for line in entry.splitlines(keepends=True))
    in_config = refused(write(tmp_path, config_text))
    workspace = tmp_path / "workspace"
    cron_yaml = write(workspace, entry, name="cron.yaml")
    with pytest.raises(ConfigError) as info:
        load_jobs([], workspace)
    in_cron_yaml = info.value
    # Each names where the job is (the config by its key path, cron.yaml by the file, entry and id), then
    # says the same words from the key on; a key joins the config's path with a dot, like every config key.
    job = f"{cron_yaml}, entry 1 ({'Bad Id' if 'Bad Id' in entry else 'x'})"
    assert in_cron_yaml.message.startswith(f"{job}: {message}")
    tail = in_cron_yaml.message.removeprefix(f"{job}: ")
    names_a_key = re.fullmatch(r"\w+", tail.split(":")[0]) is not None
    assert in_config.message == "scheduler.jobs[0]" + ("." if names_a_key else ": ") + tail
    assert in_config.fix == in_cron_yaml.fix


def test_cron_yaml_keeps_references_as_written(tmp_path: Path) -> None:
    write(tmp_path, "- id: x\n  schedule: startup\n  prompt: 'say ${TELEGRAM_BOT_TOKEN}'\n", name="cron.yaml")
    (job,) = load_jobs([], tmp_path)
    assert job.prompt == "say ${TELEGRAM_BOT_TOKEN}"


def test_a_job_id_is_used_once_across_the_config_and_cron_yaml(tmp_path: Path) -> None:
    text = "scheduler:\n  jobs:\n" + "    - {id: x, schedule: startup, prompt: a}\n" * 2
    assert (
        refused(write(tmp_path, text)).message
        == "scheduler.jobs[1].id: 'x' is already used in the config (scheduler.jobs[0])"
    )
    config = load_config(
        write(tmp_path, "scheduler:\n  jobs:\n    - {id: x, schedule: startup, prompt: a}\n"), environ={}
    )
    cron_yaml = write(tmp_path, "- {id: x, schedule: startup, prompt: b}\n", name="cron.yaml")
    with pytest.raises(ConfigError) as info:
        load_jobs(config.scheduler.jobs, tmp_path)
    assert info.value.message == f"{cron_yaml}, entry 1 (x): id: 'x' is already used in the config (scheduler.jobs[0])"


def test_a_bare_on_reads_as_on_in_either_file(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            "devices:\n  lamp: {driver: relay, pin: 17}\nscheduler:\n  jobs:\n"
            "    - {id: x, schedule: startup, device: lamp, value: on}\n",
        ),
        environ={},
    )
    write(tmp_path, "- {id: y, schedule: startup, device: lamp, value: off}\n", name="cron.yaml")
    assert [job.value for job in load_jobs(config.scheduler.jobs, tmp_path, config.devices)] == ["on", "off"]


def test_the_secrets_example_names_every_secret_the_readme_and_config_refer_to() -> None:
    """A newcomer copies config/secrets.env.example: each ${NAME} the README or the config uses is in it (a README
    walk found MQTT_PASSWORD, DISCORD_BOT_TOKEN and others only in the README's echo lines)."""
    root = Path(__file__).resolve().parent.parent
    used = set()
    for name in ("README.md", "config/picoagent.yaml"):
        used |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]+)\}", (root / name).read_text(encoding="utf-8")))
    used.discard("NAME")  # the README's own placeholder
    listed = set(re.findall(r"^# ([A-Z][A-Z0-9_]+)=", (root / "config/secrets.env.example").read_text(), re.M))
    assert used - listed == set(), sorted(used - listed)
