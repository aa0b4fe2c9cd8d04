"""A small, safe subset of Home Assistant's value templates, for MQTT states: ``{{ value_json.state }}``.

MQTT devices often report JSON (Zigbee2MQTT: ``{"state": "ON", "brightness": 128}``; Tasmota:
``{"ENERGY": {"Power": 12}}``), and Home Assistant's MQTT integration picks a value out of it with a Jinja
template. People copy those templates, so picoagent reads the common form of them, and nothing else:

    {{ value }}                          the payload as text
    {{ value_json.a.b }}                 a key of the JSON payload, nested keys with dots
    {{ value_json['a b'] }}              a key in brackets (quoted), or a list index: value_json.list[0]
    {{ value_json.a | float }}           then filters: float, int, round(N), lower, upper, trim

No Jinja and no eval: the text is parsed once (at config load) into a path and filters, and a template
outside the subset is a :class:`TemplateError` naming what is not understood. Rendering a payload that
lacks the key is a :class:`TemplateError` too, which the driver turns into a reading error.

A payload is anyone's on the broker, so rendering one fails only with a :class:`TemplateError` of one
short line: a number filter takes finite numbers only (``1e999``, ``NaN`` and an integer too big for a
float are refused, never passed on as ``inf`` or raised as OverflowError), JSON nested past Python's
recursion limit is refused, and a payload is quoted cut short.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
from dataclasses import dataclass
from typing import Any

SUBSET = (
    "{{ value }} or {{ value_json.KEY }} (nested .KEY, ['KEY'] or [N]), optionally followed by the filters "
    "| float, | int, | round(N), | lower, | upper, | trim"
)
_WHOLE = re.compile(r"\s*\{\{(.*)\}\}\s*", re.DOTALL)
_ROOT = re.compile(r"\s*(value_json|value)\b")
_STEP = re.compile(r"""\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*(?:(\d+)|'([^'\\]*)'|"([^"\\]*)")\s*\]""")
_FILTER = re.compile(r"\s*\|\s*([a-z_]+)\s*(?:\(\s*(\d+)\s*\))?")
FILTERS = ("float", "int", "round", "lower", "upper", "trim")


class TemplateError(ValueError):
    """A template outside the subset, or a payload it cannot be applied to; the message says which."""


@dataclass(frozen=True)
class ValueTemplate:
    """A parsed template: where the value is in the payload, and what is done to it."""

    source: str
    json: bool  # value_json (else value: the payload as text)
    path: tuple[str | int, ...]
    filters: tuple[tuple[str, int | None], ...]

    def render(self, payload: bytes) -> Any:
        """The value this template picks out of ``payload`` (text, a number, or what the JSON holds)."""
        text = payload.decode("utf-8", errors="replace")
        value: Any = text
        if self.json:
            try:
                value = json.loads(text)
            except ValueError:
                raise TemplateError(f"{self.source} needs JSON, and the state was {_short(text)}") from None
            except RecursionError:  # [[[[... deeper than the parser goes
                raise TemplateError(f"{self.source}: the state's JSON is nested too deeply: {_short(text)}") from None
            for step in self.path:
                try:
                    value = value[step]
                except (KeyError, IndexError, TypeError):
                    raise TemplateError(f"{self.source}: the state has no {step!r}: {_short(text)}") from None
        for name, argument in self.filters:
            value = _apply(name, argument, value, self.source)
        return value


def parse_template(source: str) -> ValueTemplate:
    """Parse ``source`` or raise a TemplateError saying what is outside the subset."""
    whole = _WHOLE.fullmatch(source)
    if not whole:
        raise TemplateError(f"expected one {{{{ ... }}}} expression, got {source!r}")
    inner = whole.group(1)
    root = _ROOT.match(inner)
    if not root:
        raise TemplateError(f"a template starts with value or value_json, got {source!r}")
    at = root.end()
    path: list[str | int] = []
    while step := _STEP.match(inner, at):
        if root.group(1) != "value_json":
            raise TemplateError(f"only value_json has keys, got {source!r}")
        index, single, double = step.group(2), step.group(3), step.group(4)
        path.append(int(index) if index is not None else step.group(1) or single or double or "")
        at = step.end()
    filters: list[tuple[str, int | None]] = []
    while found := _FILTER.match(inner, at):
        name, argument = found.group(1), found.group(2)
        if name not in FILTERS:
            raise TemplateError(f"the filter {name!r} is not supported in {source!r}")
        if argument is not None and name != "round":
            raise TemplateError(f"the filter {name!r} takes no argument in {source!r}")
        filters.append((name, int(argument) if argument is not None else None))
        at = found.end()
    if inner[at:].strip():
        raise TemplateError(f"{inner[at:].strip()!r} is not understood in {source!r}")
    return ValueTemplate(source.strip(), root.group(1) == "value_json", tuple(path), tuple(filters))


def finite_number(value: Any) -> float:
    """``value`` as a finite float, or a TemplateError: text that is no number, NaN, an infinity, too big."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TemplateError(f"{shown(value)} is not a number") from None
    except OverflowError:  # an integer beyond any float
        raise TemplateError(f"{shown(value)} is too large a number") from None
    if not math.isfinite(number):
        raise TemplateError(f"{shown(value)} is not a finite number")
    return number


def shown(value: Any) -> str:
    """``value`` for a message: its repr, cut short (long text, huge integers, deep or long JSON)."""
    return _REPR.repr(value)


def _apply(name: str, argument: int | None, value: Any, source: str) -> Any:
    if name in ("float", "int", "round"):
        try:
            number = finite_number(value)
        except TemplateError as exc:
            raise TemplateError(f"{source}: {exc}") from None
        if name == "int":
            return int(number)
        return round(number, argument or 0) if name == "round" else number
    if isinstance(value, (dict, list)):  # str() of deep JSON recurses, and is no state anyway
        raise TemplateError(f"{source}: {shown(value)} is not text")
    text = str(value)
    return text.lower() if name == "lower" else text.upper() if name == "upper" else text.strip()


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _repr() -> reprlib.Repr:
    shortened = reprlib.Repr()
    shortened.maxstring = shortened.maxother = shortened.maxlong = 80
    shortened.maxlevel, shortened.maxlist, shortened.maxdict = 2, 4, 4
    return shortened


_REPR = _repr()
