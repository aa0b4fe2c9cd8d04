"""What every chat channel shares (appliance/channels/core.py): the footer, written once for all of them."""

from __future__ import annotations

from appliance.agent.record import ReplyRecord, Timings
from appliance.channels.core import footer

TIMINGS = Timings(ttft_s=0.1234, decode_tps=12.345, total_s=1.25)


def test_the_chat_footer_names_route_model_and_seconds_and_says_why_only_when_it_matters() -> None:
    local = ReplyRecord(text="hi", route="local", reason="confident", model="scripted", timings=TIMINGS)
    assert footer(local) == "local · scripted · 1.2 s"
    cloud = ReplyRecord(text="hi", route="cloud", reason="the local answer was unsure", model="gpt", timings=TIMINGS)
    assert footer(cloud) == "cloud · gpt · 1.2 s\n(the local answer was unsure)"
    kept = ReplyRecord(text="hi", route="local", reason="routing.mode is local_only", why="user_cloud", model="m")
    assert footer(kept) == "local · m · 0.0 s\n(routing.mode is local_only)"  # asked for the cloud, stayed
    intent = ReplyRecord(text="Done", route="intent", reason="intent fast path", timings=TIMINGS)
    assert footer(intent) == "intent · 1.2 s"  # no model: no empty part


def test_the_terminal_footer_is_the_same_footer_in_detail() -> None:
    local = ReplyRecord(text="hi", route="local", reason="confident", model="scripted", timings=TIMINGS)
    assert footer(local, detailed=True) == "[local · scripted · 12.3 tok/s · first token 0.12 s · 1.25 s]"
    fallback = ReplyRecord(text="hi", route="local_fallback", reason="the cloud failed", model="s", timings=TIMINGS)
    assert footer(fallback, detailed=True) == (
        "[local_fallback · s · 12.3 tok/s · first token 0.12 s · 1.25 s]\n[the cloud failed]"
    )
