"""The Settings page's forms, made from the config schema itself: each field's doc, type, range and choices.

A new key in :mod:`appliance.config.schema` (or a section's module) appears in Settings with no new page code.
:data:`PAGES` puts the top-level sections on the page's tabs; :data:`NOT_IN_SETTINGS` says why the few that
are not there are not (a test fails on a section that is in neither). A secret's value never leaves the Pi:
a form says only whether it is set.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, Union

from appliance.config.schema import Config

# The Settings page's tabs, in order, and the top-level sections each shows.
PAGES: dict[str, tuple[str, ...]] = {
    "general": ("agent", "scheduler", "weather", "log_level"),
    "model and routing": ("llm", "routing", "providers"),
    "channels": ("telegram", "discord", "slack", "email", "whatsapp", "webhooks", "notify"),
    "devices": ("devices", "hardware", "mqtt", "homeassistant"),
    "memory": ("memory",),  # and what it remembers: browse, edit, forget, export (static/settings-extra.js)
    "tools and tasks": ("tools", "tasks"),
    "access": ("web",),  # and the password, API tokens and sessions (static/settings-extra.js)
    "updates": (),  # the release and the rollback button (static/settings-extra.js)
}

# Sections and fields a person is not expected to change from the page, and why.
NOT_IN_SETTINGS: dict[str, str] = {
    "data_dir": "where the database and models live is chosen when the card is made; moving it means copying them",
    "secrets_file": "the page writes secrets into this file; pointing it elsewhere from the page would lose them",
    "events": "conditions on readings are written in a small language (living_room.temperature > 28): "
    "edit them in the file or with `picoagent devices` until the page has an editor for them",
    "scheduler.jobs": "jobs are added and removed on the status page's Jobs card and with `picoagent cron`",
    "tools.mcp": "an MCP server is a program with arguments and an environment: edit it in the file",
    "tools.plugins": "a plugin is Python code this process imports: added by hand, on purpose",
}


# Besides what each driver's interface needs (drivers/base.py NEEDS): what every device may set, and what only
# some interfaces read. The devices form shows a new device only the fields of the driver chosen.
DEVICE_COMMON = ("room", "aliases", "allow", "approval", "writes_per_minute")
DEVICE_MORE = {
    "gpio": ("active_high",),
    "mqtt": (
        "state_topic",
        "command_topic",
        "payload_on",
        "payload_off",
        "value_template",
        "brightness_command_topic",
        "brightness_value_template",
        "brightness_scale",
        "quantity",
        "unit",
    ),
}


def device_fields() -> dict[str, list[str]]:
    """For each driver of the driver table, the device keys its form shows."""
    from appliance.hardware.drivers import DRIVERS

    return {
        name: ["driver", *spec.needs, *DEVICE_MORE.get(spec.interface, ()), *DEVICE_COMMON]
        for name, spec in DRIVERS.items()
    }


def _kind(tp: Any) -> dict[str, Any]:
    """How a form shows one value of type ``tp``."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        return {"type": "choice", "choices": list(typing.get_args(tp))}
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        literals = [v for a in options if typing.get_origin(a) is Literal for v in typing.get_args(a)]
        others = [a for a in options if typing.get_origin(a) is not Literal]
        kind: dict[str, Any] = _kind(others[0]) if others else {"type": "choice", "choices": []}
        if literals:
            kind["also"] = literals  # int | Literal["auto"]: a number, or the word
        if type(None) in typing.get_args(tp):
            kind["optional"] = True  # empty: null
        return kind
    if origin is list:
        return {"type": "list", "item": _kind(typing.get_args(tp)[0])["type"]}
    if origin is dict:
        return {"type": "mapping"}
    return {"type": {bool: "bool", int: "integer", float: "number", str: "text"}.get(tp, "text")}


def _value(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | list | type(None)) else str(value)


def fields_of(cls: Any, node: Any, prefix: str) -> list[dict[str, Any]]:
    """The form of one dataclass: a row per field, a nested dataclass as a group of rows, an entry map as a
    collection (its entries, and an empty form for a new one)."""
    rows: list[dict[str, Any]] = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = prefix + f.name
        if f.metadata.get("internal") or key in NOT_IN_SETTINGS:
            continue
        tp, value = hints[f.name], getattr(node, f.name) if node is not None else None
        row: dict[str, Any] = {"key": key, "label": f.name.replace("_", " "), "doc": f.metadata.get("doc", "")}
        if dataclasses.is_dataclass(tp):
            row.update(type="group", fields=fields_of(tp, value, key + "."))
        elif typing.get_origin(tp) is dict and dataclasses.is_dataclass(typing.get_args(tp)[1]):
            entry = typing.get_args(tp)[1]
            entries = value or {}
            row.update(
                type="collection",
                new=fields_of(entry, None, key + ".NAME."),
                entries={name: fields_of(entry, item, f"{key}.{name}.") for name, item in entries.items()},
            )
            if key == "devices":
                row["by_driver"] = device_fields()
        else:
            row.update(_kind(tp))
            if "low" in f.metadata:
                row.update(low=f.metadata["low"], high=f.metadata["high"], expected=f.metadata["expected"])
            if f.metadata.get("secret"):
                row.update(secret=True, set=bool(value))  # never the value itself
            elif node is not None:
                row["value"] = _value(value)
            if f.default is not dataclasses.MISSING:
                row["default"] = "" if f.metadata.get("secret") else _value(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                row["default"] = _value(f.default_factory())
            else:
                row["required"] = True
        rows.append(row)
    return rows


def settings_form(config: Config) -> list[dict[str, Any]]:
    """Every tab of the Settings page with its sections' forms, filled in from ``config``."""
    top = {row["key"]: row for row in fields_of(Config, config, "")}
    return [{"page": page, "sections": [top[name] for name in names]} for page, names in PAGES.items()]
