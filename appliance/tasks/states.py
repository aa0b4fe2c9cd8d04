"""A task's states and routes: a leaf, so the command line's parsers name them without the store."""

from __future__ import annotations

from typing import Literal, get_args

TaskState = Literal["pending", "running", "done", "error", "paused", "cancelled"]
STATES: tuple[str, ...] = get_args(TaskState)
ENDED: tuple[str, ...] = ("done", "error", "cancelled")
Route = Literal["auto", "local", "cloud"]
ROUTES: tuple[str, ...] = get_args(Route)
