"""How a config value is shown in an error message: briefly, and never when it came from a reference.

A leaf of the config package, so the loader (:mod:`appliance.config.load`), which marks every value read
through a ``${NAME}`` reference as :class:`_Secret`, and the checks (:mod:`appliance.config.checks`), which
name the values they refuse, share it without importing each other.
"""

from __future__ import annotations

from typing import Any


class _Secret(str):
    """A string that came from a reference: error messages must not show it."""


def _describe(value: Any) -> str:
    """The value as an error message names it: a string quoted and cut short, a reference's value never."""
    if isinstance(value, _Secret):
        return "a value from a secret reference"
    if isinstance(value, str):
        return f'"{value}"' if len(value) <= 40 else f'"{value[:37]}..."'
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)
