"""Changing the config file from the page: checked first, written whole, comments kept, secrets apart.

The YAML file stays the source of truth and a person who edits it by hand keeps their comments: a change
is made on ruamel.yaml's round-trip tree (comments, key order, quoting and blank lines kept), dumped, and
read back by the very code that reads the file at start (:func:`appliance.config.load.parse_config`, all of
its checks) before anything is written. Then, under a lock: a secret's value goes to the secrets file
(mode 0600; the config holds only its ``${NAME}`` reference), the file as it was is kept beside it
(``picoagent.yaml.previous``), and the new text replaces it by rename (``fileio.write_atomic``), so a kill -9
at any moment leaves the old file or the new one, never half of one.

Two browsers saving at once cannot lose a change silently: every read hands out a version (a hash of the
config text and of the secrets file's size and time, never of its contents), a save names the version it
was made from, and a save from an older version is refused with :class:`VersionConflict`, which says which
keys changed since (this process remembers the recent versions' trees to tell).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import io
import re
import threading
import typing
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance.config.load import parse_config, read_secrets
from appliance.config.schema import Config, changed_keys
from appliance.errors import ConfigError, Conflict
from appliance.fileio import write_atomic

PREVIOUS_SUFFIX = ".previous"
VERSIONS_KEPT = 16  # recent versions whose trees are remembered, to say what changed on a conflict
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KEY_IN_MESSAGE = re.compile(r"^([A-Za-z_][\w-]*(?:\.[\w-]+|\[\d+\])*): ")


class FieldError(ConfigError):
    """A change the config's checks refuse, with the key it is about (the page shows it beside that field)."""

    def __init__(self, key: str, message: str, *, fix: str | None = None) -> None:
        super().__init__(message, fix=fix)
        self.key = key


class VersionConflict(Conflict):
    """The file changed since the page read it: nothing was saved; ``changed`` names the keys that differ."""

    def __init__(self, changed: list[str], version: str) -> None:
        said = ", ".join(changed) if changed else "the file"
        super().__init__(
            f"the settings were changed elsewhere since this page read them ({said}); nothing was saved",
            fix="load the settings again, then make your change once more",
        )
        self.changed = changed
        self.version = version


@dataclass(frozen=True)
class Saved:
    """A save that was written: the new version, the keys it changed (secrets by name only), the new tree."""

    version: str
    keys: list[str]
    config: Config


def field_at(parts: Sequence[str]) -> tuple[dataclasses.Field[Any], Any]:
    """The schema field a dotted key names (``providers.openai.api_key``), and its type; unknown: FieldError."""
    cls: Any = Config
    found: tuple[dataclasses.Field[Any], Any] | None = None
    i = 0
    while i < len(parts):
        if not dataclasses.is_dataclass(cls):
            break
        fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
        f = fields.get(parts[i])
        if f is None:
            raise FieldError(".".join(parts), f"{'.'.join(parts)}: no such setting")
        hint = typing.get_type_hints(cls)[f.name]
        found, cls, i = (f, hint), hint, i + 1
        if typing.get_origin(hint) is dict and i < len(parts):
            cls, i = typing.get_args(hint)[1], i + 1  # the next part names an entry (devices.fan)
            found = None if i == len(parts) else found  # a whole entry: no single field
            if found is None:
                return dataclasses.field(metadata={"entry": True}), cls
    if found is None or i < len(parts):
        raise FieldError(".".join(parts), f"{'.'.join(parts)}: no such setting")
    return found


_WHOLE = object()  # in flat_changes: the key's mapping is replaced by the keys that follow


def flat_changes(changes: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Each change as dotted keys: a mapping given for an entry or a section (``{"devices.lamp": {"driver":
    "relay", "pin": 22}}``) becomes the entry replaced and then each of its keys, so a secret inside one
    (``providers.x: {api_key: ...}``) goes to the secrets file like any other. Unknown keys: FieldError."""
    flat: list[tuple[str, Any]] = []
    for key, value in changes.items():
        f, tp = field_at(key.split("."))
        if isinstance(value, dict) and (f.metadata.get("entry") or dataclasses.is_dataclass(tp)):
            flat.append((key, _WHOLE))
            flat += flat_changes({f"{key}.{sub}": item for sub, item in value.items()})
        else:
            flat.append((key, value))
    return flat


def secret_keys(changes: Mapping[str, Any]) -> list[str]:
    """The changes' keys whose values are secrets (a browser changing one gives the password again)."""
    return [key for key, _ in flat_changes(changes) if field_at(key.split("."))[0].metadata.get("secret")]


def secret_name(parts: Sequence[str]) -> str:
    """The secrets file's name for a secret setting: TELEGRAM_TOKEN, PROVIDERS_OPENAI_API_KEY."""
    return re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).strip("_").upper()


def _plain(value: Any) -> Any:
    """A value as the round-trip tree should hold it: a string PyYAML would read as something else is quoted."""
    import yaml
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    if isinstance(value, str):
        try:
            same = yaml.safe_load(value) == value
        except yaml.YAMLError:
            same = False
        return value if same and value.strip() == value and value else DoubleQuotedScalarString(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _quote_secret(value: str) -> str:
    """A secrets-file value as read_secrets reads it back unchanged."""
    if value != value.strip() or (len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""):
        return "'" + value + "'" if "'" not in value else '"' + value + '"'
    return value


def secrets_text(old: str, updates: Mapping[str, str | None]) -> str:
    """The secrets file with ``updates`` made in place (None: the line goes); other lines and comments kept."""
    out: list[str] = []
    done: set[str] = set()
    for raw in old.splitlines():
        line = raw.strip()
        name = line.removeprefix("export ").partition("=")[0].strip()
        if line and not line.startswith("#") and "=" in line and name in updates:
            done.add(name)
            if updates[name] is not None:
                out.append(f"{name}={_quote_secret(typing.cast(str, updates[name]))}")
            continue
        out.append(raw)
    out += [f"{k}={_quote_secret(v)}" for k, v in updates.items() if k not in done and v is not None]
    return "\n".join(out) + "\n" if out else ""


def _null(representer: Any, _: None) -> Any:
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def _kept_nulls(before: str, after: str) -> str:
    """``after`` with each ``key: null`` line the person wrote as a bare ``key:`` put back as they wrote it
    (ruamel reads both as None and writes one; the file must not change where nothing was changed)."""
    import difflib

    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "replace" and i2 - i1 == j2 - j1:
            out += [a if a.rstrip() + " null" == b.rstrip() else b for a, b in zip(old[i1:i2], new[j1:j2], strict=True)]
        else:
            out += new[j1:j2]
    return "".join(out)


def key_of(error: ConfigError) -> str:
    """The setting a config error is about (``web.port: expected ...``), or "" when it names none."""
    found = _KEY_IN_MESSAGE.match(error.message)
    if found is None or found.group(1).split(".")[0].split("[")[0] not in {f.name for f in dataclasses.fields(Config)}:
        return ""
    return found.group(1)


def _unset(node: Any, key: str, f: dataclasses.Field[Any]) -> None:
    """A key set back: a whole entry (devices.fan) goes, comments of what follows kept; a value that may be empty
    becomes null; any other gets its default written, so the key and the comments around it stay."""
    if f.metadata.get("entry") or (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING):
        _pop(node, key)
    elif f.default is dataclasses.MISSING:
        node[key] = _plain(f.default_factory())  # type: ignore[operator]  # one of the two is set (above)
    elif f.default is None:
        node[key] = None
    else:
        node[key] = _plain(f.default)


def _last_slot(node: Any, key: str) -> tuple[Any, str]:
    """Where ruamel keeps the comment lines written after ``key``'s value: its deepest last key's slot."""
    value = node[key]
    while hasattr(value, "ca") and isinstance(value, dict) and len(value):
        node, key = value, list(value)[-1]
        value = node[key]
    return node, key


def _pop(node: Any, key: str) -> None:
    """Remove ``key`` from a round-trip mapping; the comment lines after it (which ruamel keeps inside it: the
    next entry's heading, a commented-out example) move to the next key, or after the previous one."""
    keys = list(node)
    holder, last = _last_slot(node, key)
    slots = holder.ca.items.get(last) if hasattr(holder, "ca") else None
    trailing = slots[2] if slots and len(slots) > 2 else None
    at = keys.index(key)
    del node[key]
    if trailing is None:
        return
    if at + 1 < len(keys):  # before the next key, as its leading comment
        after = node.ca.items.setdefault(keys[at + 1], [None, None, None, None])
        after[1] = [trailing, *(after[1] or [])]
    elif at > 0:  # after the previous key's value
        before_node, before_key = _last_slot(node, keys[at - 1])
        before_node.ca.items.setdefault(before_key, [None, None, None, None])[2] = trailing


class ConfigFile:
    """One config file and its secrets file, read and changed as described in the module docstring."""

    def __init__(self, path: Path, *, data_dir: str | None = None) -> None:
        self.path = path
        self.data_dir = data_dir
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, Config] = OrderedDict()

    @staticmethod
    def _yaml() -> Any:
        from ruamel.yaml import YAML

        rt = YAML(typ="rt")
        rt.preserve_quotes = True
        rt.width = 1_000_000  # never fold a long line the person wrote
        rt.indent(mapping=2, sequence=4, offset=2)
        rt.representer.add_representer(type(None), _null)
        return rt

    def _secrets_path(self, config: Config) -> Path:
        return config.secrets_path or self.path.parent / "secrets.env"

    def _version(self, text: str, secrets_path: Path) -> str:
        digest = hashlib.sha256(text.encode())
        try:
            st = secrets_path.stat()
            digest.update(f"\0{st.st_mtime_ns}:{st.st_size}".encode())
        except OSError:
            digest.update(b"\0none")
        return digest.hexdigest()[:16]

    def _remember(self, version: str, config: Config) -> None:
        self._seen[version] = config
        self._seen.move_to_end(version)
        while len(self._seen) > VERSIONS_KEPT:
            self._seen.popitem(last=False)

    def read(self) -> tuple[str, Config]:
        """The file's version and its config as the daemon would load it now."""
        text = self.path.read_text(encoding="utf-8")
        config = parse_config(text, self.path, data_dir=self.data_dir)
        version = self._version(text, self._secrets_path(config))
        self._remember(version, config)
        return version, config

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One save at a time: in this process (threads) and across processes (a lock file beside the config)."""
        with self._lock, open(self.path.parent / f".{self.path.name}.lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def save(self, version: str, changes: Mapping[str, Any]) -> Saved:
        """Set each dotted key to its value (None: back to its default, a collection entry removed), checked
        whole before anything is written. Refused: FieldError (the key named), VersionConflict, ConfigError."""
        if not changes:
            raise ConfigError("nothing to save", fix='send {"version": ..., "set": {"key": value}}')
        with self._locked():
            text = self.path.read_text(encoding="utf-8")
            current = parse_config(text, self.path, data_dir=self.data_dir)
            secrets_path = self._secrets_path(current)
            now = self._version(text, secrets_path)
            if version != now:
                before = self._seen.get(version)
                changed = changed_keys(before, current) if before is not None else []
                self._remember(now, current)
                raise VersionConflict(changed, now)
            new_text, secret_updates = self._edited(text, changes)
            old_secrets = secrets_path.read_text(encoding="utf-8") if secrets_path.exists() else ""
            values = {**read_secrets(secrets_path), **{k: v for k, v in secret_updates.items() if v is not None}}
            for name, value in secret_updates.items():
                if value is None:
                    values.pop(name, None)
            try:
                config = parse_config(new_text, self.path, data_dir=self.data_dir, secrets=values)
            except FieldError:
                raise
            except ConfigError as exc:
                raise FieldError(key_of(exc), exc.message, fix=exc.fix) from None
            if secret_updates:
                write_atomic(secrets_path, secrets_text(old_secrets, secret_updates), mode=0o600)
            mode = self.path.stat().st_mode & 0o777
            write_atomic(self.path.with_name(self.path.name + PREVIOUS_SUFFIX), text, mode=mode)
            write_atomic(self.path, new_text, mode=mode)
            config = parse_config(new_text, self.path, data_dir=self.data_dir)  # the secrets as written, read back
            saved = Saved(self._version(new_text, secrets_path), changed_keys(current, config), config)
            self._remember(saved.version, config)
            return saved

    def _edited(self, text: str, changes: Mapping[str, Any]) -> tuple[str, dict[str, str | None]]:
        """The file's text with ``changes`` made on its round-trip tree, and the secrets to write (None: remove)."""
        from ruamel.yaml import YAMLError
        from ruamel.yaml.comments import CommentedMap

        rt = self._yaml()
        try:
            tree = rt.load(text)
        except YAMLError as exc:
            raise ConfigError(f"{self.path}: {exc}", fix="correct the file by hand first") from None
        if tree is None:
            tree = CommentedMap()
        secrets: dict[str, str | None] = {}
        for key, value in flat_changes(changes):
            parts = key.split(".")
            f, _ = field_at(parts)
            if f.metadata.get("secret"):
                value = self._secret(tree, parts, value, secrets)
            node = tree
            for part in parts[:-1]:
                child = node.get(part)
                if not isinstance(child, dict):
                    child = CommentedMap()
                    node[part] = child
                node = child
            if value is _WHOLE:
                node[parts[-1]] = CommentedMap()  # a mapping given whole replaces the entry; its keys follow
            elif value is not None:
                node[parts[-1]] = _plain(value)
            elif parts[-1] in node:
                _unset(node, parts[-1], f)
        out = io.StringIO()
        rt.dump(tree, out)
        new_text = _kept_nulls(text, out.getvalue())
        for name, value in list(secrets.items()):
            if value is None and f"${{{name}}}" in new_text:
                del secrets[name]  # still used elsewhere in the file
        return new_text, secrets

    @staticmethod
    def _secret(tree: Any, parts: list[str], value: Any, secrets: dict[str, str | None]) -> str | None:
        """A secret's value goes to the secrets file; the config gets (or keeps) its ``${NAME}`` reference."""
        key = ".".join(parts)
        if value is not None and not isinstance(value, str):
            raise FieldError(key, f"{key}: expected a string")
        node = tree
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        written = node.get(parts[-1]) if isinstance(node, dict) else None
        found = _REF.fullmatch(str(written)) if written is not None else None
        name = found.group(1) if found else secret_name(parts)
        if not value:
            secrets[name] = None
            return None
        if any(c in value for c in "\n\r\0"):
            raise FieldError(key, f"{key}: a secret is one line of text")
        secrets[name] = value
        return f"${{{name}}}"
