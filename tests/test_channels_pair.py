"""`picoagent channels pair NAME`: the code, and how to send it, as a person reads it."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import picoagent, write


def test_the_pairing_code_is_said_to_be_mailed_not_sent_in_a_chat(tmp_path: Path) -> None:
    """`channels pair email` said "send this code ... in a private chat"; a code reaches e-mail as a mail's body."""
    config = write(tmp_path, f"data_dir: {tmp_path / 'data'}\n")
    said = picoagent("--config", config, "channels", "pair", "email", cwd=tmp_path).stdout
    assert said.startswith("send this code to the assistant on email, as the whole body of an e-mail to its address")
    assert "private chat" not in said
    discord = picoagent("--config", config, "channels", "pair", "discord", cwd=tmp_path).stdout
    assert discord.startswith("send this code to the assistant on discord, in a private chat, within 10 minutes: ")
