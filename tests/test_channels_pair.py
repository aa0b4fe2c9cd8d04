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


def test_telegram_pair_is_another_name_for_channels_pair_telegram(tmp_path: Path) -> None:
    """Issue 34: one pairing command; `telegram pair` prints what `channels pair telegram` prints, and its code
    pairs through the shared tables (migration 16 moved Telegram's there)."""
    from appliance.channels.pairing import redeem
    from appliance.memory.db import Database

    config = write(tmp_path, f"data_dir: {tmp_path / 'data'}\n")
    said = [
        picoagent("--config", config, *words, cwd=tmp_path).stdout
        for words in (
            ("channels", "pair", "telegram"),
            ("telegram", "pair"),
        )
    ]
    codes = [text.splitlines()[0].rsplit(" ", 1)[1] for text in said]
    assert [text.replace(code, "CODE") for text, code in zip(said, codes, strict=True)] == [
        "send this code to the assistant on telegram, in a private chat, within 10 minutes: CODE\n"
        "it works once; whoever sends it can talk to the assistant\n"
        "note: telegram.enabled is false; the channel must be running for the code to work\n"
    ] * 2
    db = Database(tmp_path / "data" / "picoagent.db")
    try:
        assert all(redeem("telegram", db, code, 42 + i, "Owner") for i, code in enumerate(codes))
    finally:
        db.close()
