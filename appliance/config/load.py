"""Finding and reading the config: YAML, ``${ENV}`` references and the secrets file, into the typed tree.

Building walks the tree of :mod:`appliance.config.schema`: unknown keys and wrong types are refused
with the key's path (``agent.max_rounds: expected an integer, got "five"``). A value that came from
a secret or an ``${ENV}`` reference is never echoed in an error.

Which file: ``--config``, else ``$PICOAGENT_CONFIG``, else ``/etc/picoagent/picoagent.yaml`` when it
exists, else ``config/picoagent.yaml`` of the checkout.

``workspace/cron.yaml`` (:func:`load_jobs`) is a list of more ``scheduler.jobs`` entries, built by the
same code, so its mistakes read as they would in the config; its ``${NAME}`` references are kept as
written, never resolved.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from appliance.config.checks import _check, check_config_jobs, check_job, claim_job_id
from appliance.config.schema import Config, CronJob
from appliance.config.shown import _describe, _Secret
from appliance.errors import ConfigError

SYSTEM_CONFIG = Path("/etc/picoagent/picoagent.yaml")
CHECKOUT_CONFIG = Path(__file__).resolve().parent.parent.parent / "config" / "picoagent.yaml"

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Which config file a command uses (see the module docstring)."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("PICOAGENT_CONFIG")
    if env:
        return Path(env)
    if SYSTEM_CONFIG.exists():
        return SYSTEM_CONFIG
    return CHECKOUT_CONFIG


def read_secrets(path: Path) -> dict[str, str]:
    """Parse a ``KEY=value`` secrets file (comments, blank lines, ``export`` and quotes allowed)."""
    secrets: dict[str, str] = {}
    if not path.exists():
        return secrets
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            # Never echo the line: it may hold a secret.
            raise ConfigError(
                f"{path}:{number}: expected KEY=value",
                fix="each line of the secrets file is NAME=value (names: letters, digits, _)",
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        secrets[key] = value
    return secrets


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    environ: typing.Mapping[str, str] | None = None,
) -> Config:
    """Load, resolve and validate the config; ``data_dir`` overrides the file's ``data_dir``."""
    source = config_path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"config file {source} does not exist",
            fix="pass --config PATH, set PICOAGENT_CONFIG, or copy config/picoagent.yaml there",
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {source}: {exc.strerror}") from None
    return parse_config(text, source, data_dir=data_dir, environ=environ)


def parse_config(
    text: str,
    source: Path,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    environ: typing.Mapping[str, str] | None = None,
    secrets: dict[str, str] | None = None,
) -> Config:
    """A config file's text read as load_config reads the file at ``source``; ``secrets``: the secrets file's
    values as they would be (the settings editor checks a change before it writes anything), else read."""
    import yaml  # lazy: keeps `picoagent --help` fast

    try:
        raw = strict_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        fix = "keep the key once and put all its settings under it" if "given twice" in problem else ""
        raise ConfigError(f"{source}{where}: {problem}", fix=fix or "check the indentation and quoting") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of keys at the top level")

    env = dict(os.environ if environ is None else environ)
    secrets_value = raw.get("secrets_file", Config.secrets_file)
    secrets_path = Path(os.path.expanduser(str(secrets_value)))
    if not secrets_path.is_absolute():
        secrets_path = source.parent / secrets_path
    if secrets is None:
        secrets = read_secrets(secrets_path)
    lookup = _Lookup({**secrets, **env}, secrets_path)

    referenced: set[str] = set()
    config = _build(Config, raw, "", lookup, referenced)
    config.source = source.resolve()
    config.secret_values = frozenset(secrets.values())
    config.secrets_path = secrets_path
    if data_dir is not None:
        config.data_dir = str(Path(data_dir).resolve())
    _check(config, referenced)
    return config


def strict_yaml(text: str) -> Any:
    """YAML as yaml.safe_load reads it, but a key given twice in one mapping is an error (its lines named), not
    the last one silently winning: a second `tools:` pasted below the first would drop every setting of the first."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, str | int | float | bool) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"the key {key!r} is given twice (first on line {seen[key]}): the second would replace it",
                        key_node.start_mark,
                    )
                if isinstance(key, str | int | float | bool):
                    seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    return yaml.load(text, Loader=Loader)  # a SafeLoader subclass: safe_load's rules and this one


def load_jobs(config_jobs: Sequence[CronJob], workspace: Path, devices: Collection[str] | None = None) -> list[CronJob]:
    """The config's jobs and those of ``workspace/cron.yaml`` (a YAML list of the same fields), checked alike."""
    import yaml  # lazy, like load_config

    jobs = list(config_jobs)
    ids: dict[str, str] = {}
    check_config_jobs(jobs, devices, ids)
    path = workspace / "cron.yaml"
    try:
        raw = strict_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return jobs
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark else ""
        raise ConfigError(f"{path}{line}: {getattr(exc, 'problem', None) or 'invalid YAML'}") from None
    if raw is None:
        return jobs
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: expected a list of jobs (- id: ..., schedule: ...)")
    for n, entry in enumerate(raw, 1):
        name = entry.get("id") if isinstance(entry, dict) else None
        where = f"{path}, entry {n}" + (f" ({name})" if isinstance(name, str) else "")
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected {_expected(CronJob)}, got {_describe(entry)}")
        # Built by the config's own code, so unknown keys and types read as under scheduler.jobs. ${NAME}
        # references stay as written (lookup None): the model's workspace tools can write this file.
        job = _build(CronJob, entry, f"{where}: ", None, set())
        check_job(job, where, f"{where}: ", devices)
        claim_job_id(job.id, f"{where}: ", f"{path.name} entry {n}", ids)
        jobs.append(job)
    return jobs


# --- building the tree ----------------------------------------------------------------------


class _Lookup(dict[str, str]):
    """What ``${NAME}`` references read (the secrets file, then the environment over it), and that file's path."""

    def __init__(self, values: dict[str, str], secrets_path: Path) -> None:
        super().__init__(values)
        self.secrets_path = secrets_path


class _Unneeded(typing.Mapping[str, str]):
    """The references of a section that is switched off (``enabled: false``): one that is not set reads as empty
    rather than refusing the whole config, since nothing uses it until the section is switched on."""

    def __init__(self, lookup: typing.Mapping[str, str]) -> None:
        self.lookup = lookup
        self.secrets_path = getattr(lookup, "secrets_path", None)

    def __getitem__(self, name: str) -> str:
        return self.lookup.get(name, "")

    def __contains__(self, name: object) -> bool:
        return True

    def __iter__(self) -> typing.Iterator[str]:
        return iter(self.lookup)

    def __len__(self) -> int:
        return len(self.lookup)


def exposed_secrets(path: Path | None) -> str | None:
    """Why the secrets file is too open (every user of the machine can read it), or None.

    The README asks for 0600; the Pi image installs it 0640 root:picoagent (only the daemon's group reads
    it), so only a mode that lets *others* read it is refused. The fix is ``chmod 600 PATH``.
    """
    try:
        mode = path.stat().st_mode & 0o777 if path is not None else 0
    except OSError:
        return None
    if not mode & 0o004:
        return None
    return f"{path} can be read by every user of this machine (mode {mode:04o}); it holds your keys"


def _resolve_refs(value: str, path: str, lookup: typing.Mapping[str, str] | None) -> str:
    names = _REF.findall(value)
    if not names or lookup is None:  # None: references stay as written (workspace/cron.yaml)
        return value
    for name in names:
        if name not in lookup:
            secrets = getattr(lookup, "secrets_path", None)
            where = "the secrets file" if secrets is None else str(secrets)
            missing = (
                " (it does not exist yet: copy config/secrets.env.example there, mode 0600)"
                if secrets is not None and not secrets.exists()
                else ""
            )
            raise ConfigError(
                f"{path}: ${{{name}}} is not set",
                fix=f"put {name}=... in {where}{missing}, or set {name} in the environment",
            )
    return _Secret(_REF.sub(lambda m: lookup[m.group(1)], value))


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _expected(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(f'"{a}"' if isinstance(a, str) else repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_expected(a) for a in get_args(tp) if a is not type(None))
    if origin is list:
        return "a list"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return _TYPE_NAMES.get(tp, getattr(tp, "__name__", str(tp)))


def _convert(
    tp: Any, value: Any, path: str, lookup: typing.Mapping[str, str] | None, secret: bool, referenced: set[str]
) -> Any:
    if isinstance(value, str):
        value = _resolve_refs(value, path, lookup)
        if secret and not isinstance(value, _Secret):
            value = _Secret(value)
        if isinstance(value, _Secret):
            referenced.add(path)
    origin = get_origin(tp)
    wrong = ConfigError(f"{path}: expected {_expected(tp)}, got {_describe(value)}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise wrong
        return _build(typing.cast(type, tp), value, path + ".", lookup, referenced)
    if origin is Literal:
        if isinstance(value, bool) and ("on" if value else "off") in get_args(tp):
            return "on" if value else "off"  # YAML reads an unquoted on / off as true / false
        if value in get_args(tp):
            return str(value) if isinstance(value, _Secret) else value
        raise wrong
    if origin in (Union, types.UnionType):
        for option in get_args(tp):
            if option is type(None) and value is None:
                return None
            try:
                return _convert(option, value, path, lookup, secret, referenced)
            except ConfigError:
                continue
        raise wrong
    if origin is list:
        if not isinstance(value, list):
            raise wrong
        (item,) = get_args(tp)
        return [_convert(item, v, f"{path}[{i}]", lookup, secret, referenced) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise wrong
        _, item = get_args(tp)
        return {str(k): _convert(item, v, f"{path}.{k}", lookup, secret, referenced) for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise wrong
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, _Secret) and re.fullmatch(r"-?\d+", value):
            return int(value)
        raise wrong
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, _Secret):
            try:
                return float(value)
            except ValueError:
                raise wrong from None
        raise wrong
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)  # `model: 1234` reads as a name; no surprise
        raise wrong
    raise TypeError(f"config type {tp!r} is not supported")  # a programming error, not a user one


def _build(
    cls: type, raw: dict[str, Any], prefix: str, lookup: typing.Mapping[str, str] | None, referenced: set[str]
) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    for key in raw:
        if key not in fields:
            close = [name for name in fields if _similar(str(key), name)]
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(
                f"{prefix}{key}: unknown key{hint}",
                fix="known keys here: " + ", ".join(fields),
            )
    missing = [
        name
        for name, f in fields.items()
        if name not in raw and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{prefix}{missing[0]}: required, but missing")
    if "enabled" in fields and raw.get("enabled") is False and lookup is not None:
        lookup = _Unneeded(lookup)  # a section switched off needs none of its secrets (a walk removed one)
    values = {}
    for name, f in fields.items():
        if name in raw:
            secret = bool(f.metadata.get("secret"))
            values[name] = _convert(hints[name], raw[name], prefix + name, lookup, secret, referenced)
    return cls(**values)


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a.lower(), b.lower()).ratio() >= 0.75


def data_dir(config: Config) -> Path:
    """The state folder this config names (created when missing)."""
    path = config.resolve_path(config.data_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path
