"""The one helper every config section uses: :func:`doc`, a dataclass field with its description and range."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any


def doc(
    text: str,
    default: Any = dataclasses.MISSING,
    *,
    secret: bool = False,
    low: float | None = None,
    high: float | None = None,
    expected: str = "",
    **kw: Any,
) -> Any:
    """A dataclass field with its one-line description, whether its value is secret, and its range.

    ``low`` and ``high`` bound a number (a value that is no number, like ``"auto"``, is not range-checked);
    ``expected`` is what people are told when it is outside: ``agent.max_rounds: expected {expected}, got 0``.
    """
    if (low is not None or high is not None) and not expected:
        raise TypeError(f"doc({text!r}): a range needs expected=, the words people read when it is broken")
    meta: dict[str, Any] = {"doc": text, "secret": secret}
    if low is not None or high is not None:
        meta.update(low=low, high=high, expected=expected)
    if default is dataclasses.MISSING:
        return field(metadata=meta, **kw)
    return field(default=default, metadata=meta, **kw)


# What people are told when a value is out of range, where several keys say the same.
SECONDS = "a positive number of seconds"
COUNT = "a positive whole number"
THREADS = "auto or a number of threads from 1 to 256"
