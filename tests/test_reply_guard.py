"""The reply guard on what SmolLM2-135M really writes, and on good answers that must pass untouched.

The bad replies are the packaged model's own failures (issue 32's table, and what the routing tests'
"Say hello." drew from it: its tool instructions recited). Each is checked on the whole reply and as a
stream fed a word at a time: what the stream shows is never the bad part, and it asks to stop at the trip.
"""

from __future__ import annotations

import pytest

from appliance.agent.context import TOOLS_HEADER
from appliance.agent.reply_guard import DECLINE, Guarded, ReplyGuard

SOUL = (
    "You are Pico, a private assistant running on a Raspberry Pi in your owner's home.\n"
    "Answer briefly and plainly. When you do not know something, say so."
)
TOOLS = "\n".join(
    [
        *TOOLS_HEADER,
        "- lights_set(name: string, value: string): Turn a light on or off.",
        "- memory_search(query: string): Search what you remember about the owner.",
    ]
)
GUARD = ReplyGuard([SOUL, TOOLS])


def pieces(text: str, how: str) -> list[str]:
    """The reply as a model streams it: word by word, or in token-sized bits of three characters."""
    if how == "words":
        return [word if i == 0 else " " + word for i, word in enumerate(text.split(" "))]
    return [text[i : i + 3] for i in range(0, len(text), 3)]


def streamed(text: str, how: str, finish_reason: str = "stop") -> tuple[str, Guarded, bool]:
    """Feed ``text`` as the model streams it: (what was shown, the verdict, whether it asked to stop)."""
    stream = GUARD.stream()
    shown = ""
    stopped = False
    for piece in pieces(text, how):
        shown += stream.feed(piece)
        stopped = stopped or stream.tripped
    rest, verdict, replaced = stream.finish(text, finish_reason)
    assert not replaced  # what was shown never has to be taken back: the holding back was enough
    return (shown + rest).rstrip(), verdict, stopped


BAD = [
    # (the reply, what may remain, the trip)
    (
        "It's 20:15 in the morning. It's 20:15 in the morning. It's 20:15 in the morning. It's 20:15 in the",
        "It's 20:15 in the morning.",
        "loop",
    ),
    (
        "Here are the things I can do:\n- lights_set(name: string, value: string)\n- memory_search(query: string)\n"
        "- lights_set(name: string, value: string)\n- memory_search(query: string)",
        "",
        "tool_syntax",
    ),
    ("I can do lots of things: function_name(arg: type), get_weather(city: str) and more.", "", "tool_syntax"),
    (
        'Sure. <tool_call>{"name": "reminders_list", "arguments": {}}</tool_call> Your reminders are above.',
        "Sure.",  # too little to stand after a trip: nothing is shown, and the reply is the honest sentence
        "tool_syntax",
    ),
    (
        "Hello, I'm a Pico. You can use tools. To use one, reply with only a tool call and nothing else: "
        '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>',
        "Hello, I'm a Pico.",
        "leak",
    ),
    (
        "Answer briefly and plainly. When you do not know something, say so. You are Pico, a private assistant.",
        "",
        "leak",
    ),
    ("The bins go out on Tuesday evenings.\n\nBest,\nPablo", "The bins go out on Tuesday evenings.", "sign_off"),
    ("The bins go out on Tuesday evenings. Best regards, Pablo", "The bins go out on Tuesday evenings.", "sign_off"),
    ("I'm a little guy named Max. [Your Name]", "I'm a little guy named Max.", "sign_off"),
    ("I can help I can help I can help I can help I can help I can help I can", "I can help", "loop"),
]


@pytest.mark.parametrize("how", ["words", "bits"])
@pytest.mark.parametrize(("reply", "left", "kind"), BAD)
def test_a_bad_reply_is_cut_where_it_goes_wrong_and_the_stream_never_shows_the_rest(
    reply: str, left: str, kind: str, how: str
) -> None:
    verdict = GUARD.check(reply)
    assert verdict.text == left and [t.kind for t in verdict.trips] == [kind]
    shown, streamed_verdict, stopped = streamed(reply, how)
    if kind != "sign_off":  # (a sign-off ends the reply: there is nothing after it to stop)
        assert stopped  # the generation is asked to stop at the trip: the rest would be dropped anyway
    assert streamed_verdict == verdict
    assert shown == ("" if verdict.nothing_left else left)  # the person never sees a word of the bad part
    if len(left.split()) < 3:
        assert verdict.nothing_left and verdict.unsure is not None


def test_what_counts_as_unsure_for_routing() -> None:
    assert GUARD.check(BAD[0][0]).unsure == "repeated itself"  # lost its way, though a sentence stands
    assert GUARD.check(BAD[4][0]).unsure == "recited its own instructions"
    assert GUARD.check(BAD[6][0]).unsure is None  # a sign-off trimmed: the answer before it stands
    assert DECLINE == "I could not answer that well with the small model on this Pi."


GOOD = [
    "391",
    "Yes.",
    "The sky is a shade of blue.",
    "Sure, here are three fruits:\n- Apples\n- Pears\n- Plums",
    "1. Turn on the light in the kitchen at 7 pm.\n2. Turn on the light in the kitchen at 8 pm.\n"
    "3. Turn on the light in the kitchen at 9 pm.",
    "```python\ndef add(a: int, b: int) -> int:\n    return a + b\n\nprint(add(1, 2))\nprint(add(1, 2))\n```\n"
    "That adds them.",
    "Call `lights_set()` from the shell, or use `os.getcwd()` in Python.",
    "Very, very good. Go, go, go! Knock knock. Who's there?",
    "It is very, very, very cold outside.",
    "I am Pico, a private assistant running on a Raspberry Pi.",
    "Hello! I'm here to help with any project you have. What can I do for you?",
    "Love you too!",
    "Dr. Smith said the meeting is at 3.30 p.m. on Friday.",
]


@pytest.mark.parametrize("how", ["words", "bits"])
@pytest.mark.parametrize("reply", GOOD)
def test_a_good_answer_passes_untouched_whole_and_streamed(reply: str, how: str) -> None:
    verdict = GUARD.check(reply)
    assert verdict == Guarded(reply)
    shown, streamed_verdict, stopped = streamed(reply, how)
    assert shown == reply and streamed_verdict == verdict and not stopped


def test_a_reply_cut_by_the_token_limit_loses_its_unfinished_sentence() -> None:
    verdict = GUARD.check("Paris is the capital of France. It is known for its", "length")
    assert verdict.text == "Paris is the capital of France." and [t.kind for t in verdict.trips] == ["ramble"]
    assert verdict.unsure is None  # what is left is a whole answer
    finished = "Paris is the capital of France. It is known for its food."
    assert GUARD.check(finished, "length") == Guarded(finished)  # it ended at a full stop: nothing is cut
    assert GUARD.check("It is known for its", "length").nothing_left


def test_the_owners_own_words_may_be_quoted() -> None:
    user_md = "My name is Ana and I live in Lisbon with two cats called Tom and Jerry."
    guard = ReplyGuard([SOUL, TOOLS])  # USER.md is not among what a reply must not recite
    assert guard.check(f"You told me: {user_md}").trips == ()


def test_a_long_sentence_streams_before_its_full_stop() -> None:
    reply = "The Pi is a small computer that runs me, your assistant, entirely at home, with no cloud at all."
    stream = GUARD.stream()
    shown_before_the_end = "".join(stream.feed(piece) for piece in pieces(reply, "words")[:-1])
    assert shown_before_the_end and reply.startswith(shown_before_the_end)  # all but the last dozen words
    assert len(shown_before_the_end.split()) == len(reply.split()) - 1 - 12
    rest, verdict, replaced = stream.finish(reply, "stop")
    assert shown_before_the_end + rest == reply and verdict.trips == () and not replaced


GUESSING = ReplyGuard([SOUL, TOOLS], claims=True)  # a model the catalog says guesses (appliance/agent/claims.py)


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        ("The time is 12 January.", "time"),  # the twelfth blind set's "wats the time rn"
        ("At 12:04 PM, I'm at the front desk.", "time"),  # the tenth's "when do you nag me about the bins"
        ("The living room fan was put on by the 12th of January.", "devices"),
        ("Tonight it will be around 4 degrees with light rain.", "weather"),
        ("It's half past three, plenty of time!", "time"),
        ("Your reminder to water the plants is on Saturday.", "schedules"),
        ("You told me your dentist is Dr Patel.", "memory"),
        ("I have 128GB of RAM and run cool.", "health"),
        ("The Pi was last rebooted in 2019.", "health"),
        ("Sure! I'll set a timer for that.", "schedules"),
        ("So, 5 feet 8 inches is equal to 0.7 meters (approximately).", "measures"),  # the fourteenth blind set
        ("That's about 3 kg of flour.", "measures"),
    ],
)
def test_a_model_that_guesses_may_not_state_what_it_cannot_know(reply: str, kind: str) -> None:
    """Each is replaced whole by the honest sentence, whole and streamed, and counts as unsure for routing."""
    from appliance.agent.claims import claim
    from appliance.agent.reply_guard import GUESSED

    found = claim(reply)  # the first claim in it, and its kind
    assert found is not None and found.lastgroup == kind, (reply, found)
    whole = GUESSING.check(f"Sure, happy to help. {reply}")
    assert whole.nothing_left and whole.decline == GUESSED and whole.unsure == "stated what it cannot know"
    for how in ("words", "bits"):
        stream = GUESSING.stream()
        shown = "".join(stream.feed(piece) for piece in pieces(f"Sure, happy to help. {reply}", how))
        rest, verdict, replace_shown = stream.finish(f"Sure, happy to help. {reply}", "stop")
        assert stream.tripped and verdict.nothing_left and rest == ""
        assert replace_shown == bool(shown)  # what showed before the claim (its first sentence) is taken back


@pytest.mark.parametrize(
    "reply",
    [
        "Hello! Nice to hear from you.",
        "I'm doing well, thank you. How can I help you today?",
        "Have a lovely evening!",
        "That sounds like a long day; I hope you get some rest.",
        "Why did the chicken cross the road? To get to the other side.",
        "Give me 5 minutes and I'll be ready, 2 of us can do it.",  # numbers that measure nothing it could know
    ],
)
def test_small_talk_without_a_claim_passes_a_guessing_guard(reply: str) -> None:
    assert GUESSING.check(reply) == Guarded(reply)
    stream = GUESSING.stream()
    shown = "".join(stream.feed(piece) for piece in pieces(reply, "words"))
    assert shown + stream.finish(reply, "stop")[0] == reply and not stream.tripped


def test_claims_are_read_only_where_asked() -> None:
    """The guard of a model that answers reads no claims, and neither does a reply written from a tool's result."""
    reply = "The porch light is on since 19:02."
    assert GUARD.check(reply) == Guarded(reply)
    assert GUESSING.check(reply, claims=False) == Guarded(reply)
    stream = GUESSING.stream(claims=False)
    assert "".join(stream.feed(piece) for piece in pieces(reply, "words")) + stream.finish(reply, "stop")[0] == reply


def test_a_word_still_being_written_is_no_claim_yet() -> None:
    """Streamed, "The lock" may become "The locker code": a claim is read in whole words only (the packaged model's
    "The locker code is 4512." was cut at "The lock" as a device)."""
    reply = "The locker code is 4512, noted."
    for how in ("words", "bits"):
        stream = GUESSING.stream()
        shown = "".join(stream.feed(piece) for piece in pieces(reply, how))
        assert not stream.tripped and shown + stream.finish(reply, "stop")[0] == reply
