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
    assert footer(intent) == "intent · answered without the model · 1.2 s"  # no model: said, no empty part


def test_the_terminal_footer_is_the_same_footer_in_detail() -> None:
    local = ReplyRecord(text="hi", route="local", reason="confident", model="scripted", timings=TIMINGS)
    assert footer(local, detailed=True) == "[local · scripted · 12.3 tok/s · first token 0.12 s · 1.25 s]"
    fallback = ReplyRecord(text="hi", route="local_fallback", reason="the cloud failed", model="s", timings=TIMINGS)
    assert footer(fallback, detailed=True) == (
        "[local_fallback · s · 12.3 tok/s · first token 0.12 s · 1.25 s]\n[the cloud failed]"
    )


def test_a_reply_without_the_model_says_so_and_what_it_is_based_on() -> None:
    quick = Timings(ttft_s=0.004, total_s=0.006)
    clock = ReplyRecord(
        text="It is 12:41.", route="grounded", reason="grounded: the Pi's clock (Europe/Lisbon)", timings=quick
    )
    assert footer(clock, detailed=True) == "[answered without the model · the Pi's clock (Europe/Lisbon) · 0.01 s]"
    assert footer(clock) == "grounded · answered without the model · 0.0 s"
    # the grounded desk's answers come on the intent route, their basis named in the reason
    desk = ReplyRecord(text="It is 12:41.", route="intent", reason="grounded: the Pi's clock, no model", timings=quick)
    assert footer(desk, detailed=True) == "[answered without the model · the Pi's clock · 0.01 s]"
    fast = ReplyRecord(text="It is 12:41.", route="intent", reason="the Pi's clock (no model)", timings=quick)
    assert footer(fast, detailed=True) == "[answered without the model · the Pi's clock · 0.01 s]"
    device = ReplyRecord(
        text="Done", route="intent", reason="intent fast path: porch_light on (no model)", timings=quick
    )
    assert footer(device, detailed=True) == "[answered without the model · intent fast path: porch_light on · 0.01 s]"
    assert "tok/s" not in footer(device, detailed=True)  # no "0.0 tok/s · first token" for a reply no model wrote


def test_a_slow_local_first_token_says_why() -> None:
    cold = Timings(ttft_s=9.8, decode_tps=14.0, total_s=11.2, prompt_tokens=640, cached_tokens=12, rounds=1)
    record = ReplyRecord(text="hi", route="local", reason="confident", model="smollm2-135m", timings=cold)
    assert footer(record, detailed=True).splitlines() == [
        "[local · smollm2-135m · 14.0 tok/s · first token 9.80 s · 11.20 s]",
        "[first token 9.8 s: the prompt was read cold (12 of 640 tokens were cached)]",
    ]
    assert footer(record).endswith("\n(first token 9.8 s: the prompt was read cold (12 of 640 tokens were cached))")
    warm = Timings(ttft_s=4.1, total_s=5.0, prompt_tokens=640, cached_tokens=600, rounds=1)
    busy = ReplyRecord(text="hi", route="local", reason="confident", model="m", timings=warm)
    assert footer(busy, detailed=True).endswith(
        "[first token 4.1 s, though 600 of 640 prompt tokens were cached: the model was busy or loading]"
    )
    quick = Timings(ttft_s=0.4, total_s=1.0, prompt_tokens=640, cached_tokens=0, rounds=1)
    assert "\n" not in footer(ReplyRecord(text="hi", route="local", reason="", model="m", timings=quick), detailed=True)
