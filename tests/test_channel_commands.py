"""The shared command set: every command has an answer the contract expects, and the terminal's own few.

Each command of :meth:`ChatCommands.handlers` typed by the owner on every chat channel is the contract's
(tests/test_channel_contract.py, ``EXPECTED`` there): a command that failed on one platform only
(Discord's ``say_or_keep`` called itself, so every typed command there ended in RecursionError, issue 31)
passed every channel's own few tries. A new command needs its line in ``EXPECTED``, or
:func:`test_every_command_has_an_expected_answer` fails.
"""

from __future__ import annotations

import io

from appliance.channels.commands import ChatCommands
from appliance.channels.terminal import TerminalChat
from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests.test_channel_contract import EXPECTED


def test_every_command_has_an_expected_answer(config: Config) -> None:
    runtime = Runtime.open(config, model=ScriptedModel())
    try:
        names = set(ChatCommands("memory", runtime, Outbox(runtime.db)).handlers())
    finally:
        runtime.close()
    assert names == set(EXPECTED), f"commands without an expected answer here: {sorted(names - set(EXPECTED))}"


def test_every_terminal_command_is_answered(config: Config) -> None:
    """The terminal has its own few commands (the owner at the Pi): each of them answers too."""
    runtime = Runtime.open(config, model=ScriptedModel())
    out = io.StringIO()
    lines = iter(["/help", "/private on", "/private off", "/reset", "/cloud what is up", "/status", "/quit"])
    try:
        assert TerminalChat(runtime, out=out).interactive(read=lambda _prompt: next(lines)) == 0
    finally:
        runtime.close()
    shown = out.getvalue()
    assert "/private on|off" in shown  # /help
    assert (
        "(this chat stays on the Pi)" in shown
        and ("(this chat is routed as configured: routing.mode is local_only, so every message stays on the Pi anyway)")
        in shown
    )
    assert "(conversation reset)" in shown
    assert "echo: what is up" in shown and "routing.mode is local_only" in shown  # /cloud TEXT: a turn
    # a chat channel's command: the shell command that does it here (walk 9: /memory said only "unknown command")
    assert "/status is a chat channel's command; in a shell here: picoagent status (/help lists this chat's)" in shown
    assert next(lines, None) is None  # /quit ended it
