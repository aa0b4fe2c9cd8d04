"""/memory QUERY searches the long-term memories (the search `picoagent memory search` runs) on every
chat channel; /memory alone still says what the conversation holds. Telegram and Slack, each through its
real library against its fake API, with the real memory store (and embedding model): the best match first."""

from __future__ import annotations

from typing import Any

from appliance.config import Config
from tests import telegram_harness as telegram
from tests import test_channel_slack as slack

FACTS = ["The porch light is on a timer in winter.", "Ann's birthday is on 3 May.", "The router is in the attic."]


async def remember(runtime: Any) -> dict[str, int]:
    assert runtime.memory is not None
    return {text: (await runtime.db.call(runtime.memory.add, text, source="test")).id for text in FACTS}


def test_telegram_memory_searches_the_memories(config: Config) -> None:
    async def scenario(h: telegram.Harness) -> None:
        ids = await remember(h.runtime)

        async def command(text: str) -> str:
            before = len(h.fake.bot_messages(telegram.OWNER))
            h.fake.push_message(telegram.OWNER, telegram.OWNER, text)
            return str((await h.reply_to(telegram.OWNER, before + 1))[-1]["text"])

        found = (await command("/memory birthday")).splitlines()
        assert found[:2] == ["Memories matching 'birthday':", f"{ids[FACTS[1]]}: {FACTS[1]}"]
        assert "This conversation holds" in await command("/memory")
        # The same bar as `memory search`: the nearest memories are not shown when none is near.
        unrelated = await command("/memory a good pizza recipe")
        assert unrelated == "Nothing remembered matches 'a good pizza recipe' (3 left out: similarity below 0.20)."

    telegram.run(config, scenario)


def test_slack_memory_searches_the_memories(config: Config) -> None:
    async def scenario(h: slack.Harness) -> None:
        ids = await remember(h.runtime)
        h.fake.push_dm(slack.OWNER, "/memory attic router")
        [answer] = await h.replies(h.dm)
        assert answer["text"].splitlines()[1] == f"{ids[FACTS[2]]}: {FACTS[2]}"

    slack.run(config, scenario)
