"""The weather and sun topics: which phrasings they take (tables), and the answers a person reads.

The forecast comes from the fake Open-Meteo on 127.0.0.1 (tests/fakes/open_meteo.py) through the real
source; the sun's times are computed. Replies are read as a person reads them: the numbers of the
forecast, the place, what it is based on, and with no source or no network a plain sentence saying so.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from appliance.config import Config, WeatherConfig
from appliance.grounded.base import Answer, Facts
from appliance.grounded.weather import SUN, WEATHER
from appliance.weather.source import CACHE_FILE, WeatherSource
from tests.fakes.clock import ManualClock
from tests.fakes.open_meteo import DayScript, FakeOpenMeteo, serve_open_meteo

BRUSSELS = ZoneInfo("Europe/Brussels")
NOW = datetime(2026, 11, 27, 10, 5, tzinfo=BRUSSELS)  # a Friday morning

# --- the words rule: (phrasing, aspect, when) ------------------------------------------------------

WEATHER_TAKES = [
    ("is it going to rain tomorrow", "rain", "tomorrow"),
    ("Is it going to rain tomorrow?", "rain", "tomorrow"),
    ("how cold will it be tonight", "cold", "tonight"),
    ("what's the weather like", "general", "today"),
    ("What’s the weather like today?", "general", "today"),
    ("will it be sunny this weekend", "sunny", "weekend"),
    ("do I need an umbrella", "umbrella", "today"),
    ("What's the temperature outside?", "temperature", "now"),
    ("what is the temperature outside tomorrow", "temperature", "tomorrow"),
    ("Do I need a coat today?", "cold", "today"),
    ("Will it freeze tonight?", "cold", "tonight"),
    ("What's tomorrow's low?", "temperature", "tomorrow"),
    ("should I take an umbrella tomorrow", "umbrella", "tomorrow"),
    ("what's the temperature outside tomorrow", "temperature", "tomorrow"),
    ("what's the forecast for tomorrow", "general", "tomorrow"),
    ("weather tomorrow", "general", "tomorrow"),
    ("is it raining", "rain", "now"),
    ("is it cold outside", "cold", "now"),
    ("how warm will it get on Saturday", "temperature", "saturday"),
    ("will it snow this week", "snow", "week"),
    ("any rain today?", "rain", "today"),
    ("chance of rain this afternoon", "rain", "today"),
    ("will it rain in 3 days", "rain", "+3"),
    ("how's the weather", "general", "today"),
    ("tell me the weather for Friday", "general", "friday"),
    ("what's the weather like in Paris", "general", "today"),  # taken, and declined honestly (below)
]
WEATHER_LEAVES = [
    "I'm under the weather",
    "I am feeling a bit under the weather today",
    "whether or not you like it",
    "I don't know whether to go",
    "the rain in Spain song",
    "play purple rain",
    "how does weather work",
    "what is weather",
    "explain the weather of the ice age",
    "is it hot in the living room",
    "is it cold in here",
    "is it cold",
    "how hot is it",
    "what is the temperature",
    "what's the temperature in the kitchen",
    "turn on the fan",
    "remind me to water the plants tomorrow at 9",
    "what time is it",
    "write a poem about rain",
]
SUN_TAKES = [
    ("when is sunset", "sunset", ""),
    ("what time is sunrise tomorrow", "sunrise", "tomorrow"),
    ("When does the sun go down?", "sunset", ""),
    ("when does it get dark", "sunset", ""),
    ("when does it get light tomorrow", "sunrise", "tomorrow"),
    ("what time does the sun rise on Saturday", "sunrise", "saturday"),
    ("how long until sunset", "sunset", ""),
    ("sunset time", "sunset", ""),
    ("what time is the sunset tonight", "sunset", "tonight"),
]
SUN_LEAVES = [
    "sunset boulevard is a good film",
    "tequila sunrise",
    "write a poem about the sunset",
    "turn the porch light on at sunset",
    "the sunset was beautiful yesterday",
    "what's the weather like",
]


@pytest.mark.parametrize(("text", "aspect", "when"), WEATHER_TAKES)
def test_the_weather_topic_takes(text: str, aspect: str, when: str) -> None:
    ask = WEATHER.match(text)
    assert ask is not None, text
    assert (ask.kind, ask.what, ask.details["when"]) == ("weather", aspect, when)


@pytest.mark.parametrize("text", WEATHER_LEAVES)
def test_the_weather_topic_leaves(text: str) -> None:
    assert WEATHER.match(text) is None


@pytest.mark.parametrize(("text", "event", "when"), SUN_TAKES)
def test_the_sun_topic_takes(text: str, event: str, when: str) -> None:
    ask = SUN.match(text)
    assert ask is not None, text
    assert (ask.kind, ask.what, ask.details["when"]) == ("sun", event, when)


@pytest.mark.parametrize("text", SUN_LEAVES + WEATHER_LEAVES)
def test_the_sun_topic_leaves(text: str) -> None:
    assert SUN.match(text) is None


# --- answers ---------------------------------------------------------------------------------------


def facts(weather: WeatherConfig, source: WeatherSource | None = None) -> Facts:
    return Facts(config=Config(weather=weather), now=lambda: NOW, weather=source)


def ghent(url: str = "http://127.0.0.1:9/v1/forecast") -> WeatherConfig:
    return WeatherConfig(place="Ghent", latitude=51.05, longitude=3.72, enabled=True, base_url=url)


def week() -> FakeOpenMeteo:
    days = [DayScript() for _ in range(16)]
    days[0] = DayScript(code=2, low=3.0, high=9.0, rain_chance=10)
    days[1] = DayScript(code=63, low=2.0, high=8.0, rain_chance=85, rain_mm=6.4)  # Saturday: rain
    days[2] = DayScript(code=0, low=-1.0, high=6.0, rain_chance=0)  # Sunday: clear and cold
    return FakeOpenMeteo(today=NOW.date(), days=days)


def ask_all(questions: list[str], tmp_path: Path) -> list[Answer]:
    async def main() -> list[Answer]:
        async with serve_open_meteo(week()) as fake:
            source = WeatherSource(ghent(fake.url), tmp_path / CACHE_FILE, zone=BRUSSELS, clock=ManualClock(NOW))
            answers = []
            for question in questions:
                topic = WEATHER if WEATHER.match(question) else SUN
                ask = topic.match(question)
                assert ask is not None, question
                answer = await topic.answer(ask, facts(ghent(fake.url), source))
                assert answer is not None
                answers.append(answer)
            assert len(fake.requests) == 1  # every question answered from one fetch
            return answers

    return asyncio.run(main())


def test_weather_questions_are_answered_from_the_forecast_with_its_basis(tmp_path: Path) -> None:
    questions = [
        "is it going to rain tomorrow",
        "do I need an umbrella",
        "how cold will it be tonight",
        "will it be sunny this weekend",
        "what's the temperature outside tomorrow",
        "what's the weather like",
    ]
    rain, umbrella, tonight, weekend, temperature, today = ask_all(questions, tmp_path)
    assert rain.text == "Rain is likely tomorrow in Ghent: up to 85 % chance, about 6.4 mm (rain)."
    assert umbrella.text == "You should not need one: no rain expected today in Ghent (up to 10 % chance)."
    assert tonight.text.startswith("Tonight in Ghent it gets down to ")  # "how cold": the figures, no yes or no
    assert weekend.text == (
        "Partly: this weekend in Ghent, Saturday rain (2 °C to 8 °C), 85 % chance of rain; "
        "Sunday clear sky (-1 °C to 6 °C)."
    )
    assert temperature.text == "Tomorrow in Ghent: from 2 °C to 8 °C, rain."
    assert today.text.startswith("It is ") and "Today in Ghent: partly cloudy, from" in today.text
    assert {a.basis for a in (rain, umbrella, tonight, weekend, temperature, today)} == {
        "Open-Meteo forecast for Ghent, fetched 10:05"
    }
    assert {a.kind for a in (rain, today)} == {"weather"}


def test_another_city_is_declined_honestly_not_answered_for_here() -> None:
    source = WeatherSource(ghent(), None, zone=BRUSSELS, clock=ManualClock(NOW))
    ask = WEATHER.match("what's the weather like in Paris")
    assert ask is not None
    answer = asyncio.run(WEATHER.answer(ask, facts(ghent(), source)))
    assert answer is not None
    assert answer.text == "I only have the forecast for Ghent, not for Paris, so I cannot tell you that."
    here = WEATHER.match("what's the weather like in Ghent")
    assert here is not None and here.details["when"] == "today"
    # forecasts off (weather.enabled: false, a place set): no forecast for Ghent either (README walk 7)
    off = asyncio.run(WEATHER.answer(ask, facts(ghent(), None)))
    assert off is not None
    assert off.text == (
        "I would only have the forecast (they are off) for Ghent, not for Paris, so I cannot tell you that."
    )


ELSEWHERE = [
    ("what's the weather like in Paris", "Paris"),
    ("what's the weather like in paris", "Paris"),
    ("weather for Lyon tomorrow", "Lyon"),
    ("will it rain in the Netherlands", "Netherlands"),
    ("what is the weather in new york today", "New York"),
    ("how's the weather in ghent", ""),  # the configured place
    ("what's the weather like for my run", ""),
    ("will it rain in the garden", ""),
    ("will it rain at the weekend", ""),
    ("what's the forecast for the next few days", ""),
]


@pytest.mark.parametrize(("text", "city"), ELSEWHERE)
def test_another_place_is_declined_and_here_is_answered(text: str, city: str) -> None:
    ask = WEATHER.match(text)
    assert ask is not None
    offline = WeatherSource(ghent(), None, zone=BRUSSELS, clock=ManualClock(NOW))  # port 9: refused at once
    answer = asyncio.run(WEATHER.answer(ask, facts(ghent(), offline)))
    assert answer is not None
    if city:
        assert answer.text == f"I only have the forecast for Ghent, not for {city}, so I cannot tell you that."
    else:
        assert answer.text.startswith("I have no forecast for Ghent: the forecast service cannot be reached")


def test_unconfigured_it_says_what_to_set_and_invents_nothing() -> None:
    ask = WEATHER.match("is it going to rain tomorrow")
    assert ask is not None
    nowhere = asyncio.run(WEATHER.answer(ask, facts(WeatherConfig())))
    assert nowhere is not None and nowhere.text == (
        "I have no weather source: set weather.latitude and weather.longitude (and weather.place, its name) "
        "in the config, and weather.enabled: true."
    )
    off = asyncio.run(WEATHER.answer(ask, facts(WeatherConfig(place="Ghent", latitude=51.05, longitude=3.72))))
    assert off is not None and off.text.startswith("I have no weather source: forecasts for Ghent are off;")
    for answer in (nowhere, off):
        assert "rain is" not in answer.text.lower() and "%" not in answer.text


def test_offline_it_says_so_with_the_kept_forecasts_age_or_that_it_has_none(tmp_path: Path) -> None:
    ask_all(["what's the weather like"], tmp_path)  # fetched at 10:05 and kept
    clock = ManualClock(NOW)
    clock.advance(2 * 3600)
    kept = WeatherSource(ghent(), tmp_path / CACHE_FILE, zone=BRUSSELS, clock=clock)  # restarted, service gone
    ask = WEATHER.match("is it going to rain tomorrow")
    assert ask is not None
    answer = asyncio.run(WEATHER.answer(ask, facts(ghent(), kept)))
    assert answer is not None
    assert answer.text == (
        "I cannot reach the forecast service now; as of 10:05: "
        "Rain is likely tomorrow in Ghent: up to 85 % chance, about 6.4 mm (rain)."
    )
    assert answer.basis.startswith("Open-Meteo forecast for Ghent, fetched 10:05 (offline: ")
    nothing = WeatherSource(ghent(), tmp_path / "none" / CACHE_FILE, zone=BRUSSELS, clock=clock)
    none = asyncio.run(WEATHER.answer(ask, facts(ghent(), nothing)))
    assert none is not None and none.text == (
        "I have no forecast for Ghent: the forecast service cannot be reached (no connection: is the Pi online?)."
    )


def test_sunset_and_sunrise_are_computed_for_the_place() -> None:
    weather = WeatherConfig(place="Ghent", latitude=51.05, longitude=3.72)
    sunset, sunrise = (SUN.match(q) for q in ("when is sunset", "what time is sunrise tomorrow"))
    assert sunset is not None and sunrise is not None
    today = asyncio.run(SUN.answer(sunset, facts(weather)))
    tomorrow = asyncio.run(SUN.answer(sunrise, facts(weather)))
    assert today is not None and tomorrow is not None
    # timeanddate.com, Ghent, 27-28 November 2026: sunset 16:42, sunrise 08:24 (within a minute or two)
    assert today.text.startswith("Sunset in Ghent is at 16:4") and today.text.endswith("today (Fri 27 Nov).")
    assert tomorrow.text.startswith("Sunrise in Ghent is at 08:2") and "tomorrow (Sat 28 Nov)" in tomorrow.text
    assert today.basis == "computed on the Pi for Ghent (51.05, 3.72)" and today.kind == "sun"
    assert "(Europe/Brussels)" in today.text  # the time zone named, as the clock's answers name it (a walk)


def test_after_sunset_the_next_one_is_said_too_and_a_polar_night_is_said_not_timed() -> None:
    evening = Facts(
        config=Config(weather=WeatherConfig(place="Ghent", latitude=51.05, longitude=3.72)),
        now=lambda: NOW.replace(hour=20),
    )
    ask = SUN.match("when is sunset")
    assert ask is not None
    passed = asyncio.run(SUN.answer(ask, evening))
    assert (
        passed is not None
        and " today. Sunset in Ghent is at 16:4" in passed.text
        and "tomorrow (Sat 28 Nov)." in passed.text
    )
    tromso = Facts(
        config=Config(weather=WeatherConfig(place="Tromsø", latitude=69.65, longitude=18.96)),
        now=lambda: datetime(2026, 12, 21, 12, 0, tzinfo=ZoneInfo("Europe/Oslo")),
    )
    dark = asyncio.run(SUN.answer(ask, tromso))
    assert dark is not None
    assert (
        dark.text
        == "There is no sunset in Tromsø today (Mon 21 Dec): the sun stays below the horizon all day (polar night)."
    )


def test_without_a_place_the_sun_says_what_to_set() -> None:
    ask = SUN.match("when is sunset")
    assert ask is not None
    answer = asyncio.run(SUN.answer(ask, facts(WeatherConfig())))
    assert answer is not None and "Set weather.latitude and weather.longitude" in answer.text


def test_sunset_for_another_city_is_declined_not_computed_for_here() -> None:
    ask = SUN.match("when is sunset in Tokyo")
    assert ask is not None
    answer = asyncio.run(SUN.answer(ask, facts(WeatherConfig(place="Ghent", latitude=51.05, longitude=3.72))))
    assert answer is not None and answer.text == "I only know the sun's times for Ghent, not for Tokyo."


def test_an_ask_matched_by_meaning_is_read_again_for_what_and_when(tmp_path: Path) -> None:
    """The meaning matcher hands over the text only: the answer still reads the period and the aspect."""
    from appliance.grounded.base import Ask

    async def main() -> tuple[Answer | None, Answer | None]:
        async with serve_open_meteo(week()) as fake:
            source = WeatherSource(ghent(fake.url), tmp_path / CACHE_FILE, zone=BRUSSELS, clock=ManualClock(NOW))
            pour = Ask("weather", text="is it gonna pour down tomorrow", by_meaning=True)
            dusk = Ask("sun", text="what time does dusk fall tomorrow", by_meaning=True)
            return (
                await WEATHER.answer(pour, facts(ghent(fake.url), source)),
                await SUN.answer(dusk, facts(ghent(fake.url), source)),
            )

    pour, dusk = asyncio.run(main())
    assert pour is not None and pour.text.startswith("Rain is likely tomorrow in Ghent: up to 85 % chance")
    assert (
        dusk is not None and dusk.text.startswith("Sunset in Ghent is at 16:4") and "tomorrow (Sat 28 Nov)" in dusk.text
    )


def test_through_the_real_turn_no_model_answers_and_the_tool_is_there(config: Config) -> None:
    """The runtime builds one forecast source for the tool and the grounded desk; a turn needs no model."""
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    config.scheduler.timezone = "Europe/Brussels"
    today = datetime.now(BRUSSELS).date()

    async def main() -> list[tuple[str, str, str]]:
        async with serve_open_meteo(week()) as fake:
            fake.today = today
            config.weather = WeatherConfig(
                place="Ghent", latitude=51.05, longitude=3.72, enabled=True, base_url=fake.url
            )
            model = ScriptedModel()
            runtime = Runtime.open(config, model=model)
            try:
                assert "weather" in runtime.tools.tools and runtime.agent.grounding.weather is runtime.weather
                said = []
                for question in ("is it going to rain tomorrow?", "when is sunset?"):
                    record = await runtime.agent.turn(question, channel="api", chat_id="weather")
                    said.append((record.route, record.why, record.text))
                assert model.history == [] and len(fake.requests) == 1
                return said
            finally:
                runtime.close()

    (rain, sunset) = asyncio.run(main())
    assert rain == ("intent", "grounded", "Rain is likely tomorrow in Ghent: up to 85 % chance, about 6.4 mm (rain).")
    assert sunset[:2] == ("intent", "grounded") and sunset[2].startswith(
        ("Sunset in Ghent is at", "Sunset in Ghent was")
    )


def test_through_the_real_turn_unconfigured_says_what_to_set(config: Config) -> None:
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    model = ScriptedModel()
    runtime = Runtime.open(config, model=model)
    try:
        assert runtime.weather is None and "weather" not in runtime.tools.tools
        record = asyncio.run(runtime.agent.turn("is it going to rain tomorrow?", channel="api", chat_id="weather"))
    finally:
        runtime.close()
    assert (record.route, record.why) == ("intent", "grounded") and model.history == []
    assert record.text.startswith("I have no weather source: set weather.latitude and weather.longitude")


@pytest.mark.parametrize(
    ("clock", "question", "answer"),
    [
        ("12:00", "Is the sun up?", "Yes: the sun rose at {rise} and sets at {set} in Ghent."),
        ("06:00", "is the sun up yet?", "No: the sun rises at {rise} in Ghent."),
        ("21:00", "Is it dark outside?", "Yes: the sun set at {set} in Ghent."),
        ("21:00", "is the sun down?", "Yes: the sun set at {set} in Ghent."),
        ("12:00", "is it dark outside?", "No: the sun rose at {rise} and sets at {set} in Ghent."),
        # sixteenth blind set: asked either way round, said plainly (it got tomorrow's sunset); "outside yet"
        (
            "12:00",
            "has the sun come up yet or is it still dark out?",
            "The sun is up: it rose at {rise} and sets at {set} in Ghent.",
        ),
        (
            "06:00",
            "has the sun come up yet or is it still dark out?",
            "It is still dark: the sun rises at {rise} in Ghent.",
        ),
        ("21:00", "is the sun up or has it set?", "The sun is down: it set at {set} in Ghent."),
        ("06:00", "has the sun come up yet?", "No: the sun rises at {rise} in Ghent."),
        ("21:00", "has the sun set?", "Yes: the sun set at {set} in Ghent."),
        ("12:00", "is it light outside yet?", "Yes: the sun rose at {rise} and sets at {set} in Ghent."),
        (
            "12:00",
            "How long is the day today?",
            "The day in Ghent is {length} long today (Fri 27 Nov): sunrise {rise}, sunset {set}.",
        ),
    ],
)
def test_whether_the_sun_is_up_and_how_long_the_day_is_are_computed(clock: str, question: str, answer: str) -> None:
    from appliance.weather.sun import said_at, sun_day

    zone = ZoneInfo("Europe/Brussels")
    hour, minute = map(int, clock.split(":"))
    now = datetime(2026, 11, 27, hour, minute, tzinfo=zone)
    sun = sun_day(now.date(), 51.05, 3.72, zone)
    assert sun.sunrise is not None and sun.sunset is not None
    minutes = round((sun.sunset - sun.sunrise).total_seconds() / 60)
    ask = SUN.match(question)
    assert ask is not None and ask.what in ("up", "dark", "which", "length")
    got = asyncio.run(SUN.answer(ask, Facts(config=Config(weather=ghent()), now=lambda: now)))
    assert got is not None
    length = f"{minutes // 60} h {minutes % 60:02d} min"
    expected = answer.format(rise=said_at(sun.sunrise), set=said_at(sun.sunset), length=length)
    assert got.text == expected


@pytest.mark.parametrize(
    "text",
    [
        "what will the weather be on this day next year",
        "will it rain next month",
        "will it snow in 40 days",
        "what will the weather be like a month from today?",
        "what will it be like three weeks from now?",
        "will it rain in 3 weeks",
    ],
)
def test_a_day_past_the_forecast_is_far_and_never_answered_with_todays_forecast(text: str) -> None:
    from appliance.grounded.weather import _normal, _when

    assert _when(_normal(text), "today") == "far"


@pytest.mark.parametrize(("text", "when"), [("rain a week from today?", "+7"), ("will it rain in two weeks", "+14")])
def test_weeks_ahead_within_the_forecast_are_its_days(text: str, when: str) -> None:
    from appliance.grounded.weather import _normal, _when

    assert _when(_normal(text), "today") == when


def test_a_named_date_past_the_forecast_is_far_and_late_in_a_wet_day_the_whole_day_is_said(tmp_path: Path) -> None:
    late = datetime(2026, 11, 27, 22, 30, tzinfo=BRUSSELS)  # the fake's wet hours end at 22:00
    days = [DayScript() for _ in range(16)]
    days[0] = DayScript(code=61, low=3.0, high=9.0, rain_chance=80, rain_mm=6.0)

    async def main() -> list[str]:
        async with serve_open_meteo(FakeOpenMeteo(today=late.date(), days=days, now_hour=22)) as fake:
            source = WeatherSource(ghent(fake.url), tmp_path / CACHE_FILE, zone=BRUSSELS, clock=ManualClock(late))
            facts = Facts(config=Config(weather=ghent(fake.url)), now=lambda: late, weather=source)
            replies = []
            for question in ("what will the weather be on Christmas Day?", "do I need an umbrella today?"):
                ask = WEATHER.match(question)
                assert ask is not None, question
                answer = await WEATHER.answer(ask, facts)
                assert answer is not None
                replies.append(answer.text)
            return replies

    christmas, umbrella = asyncio.run(main())
    assert christmas.startswith("I can't know the weather that far ahead"), christmas
    assert umbrella == (
        "Maybe: rain is possible today in Ghent: up to 40 % chance "
        "(that is the rest of the day; the whole day: up to 80 % chance, about 6.1 mm)."  # 16 wet hours' sum
    ), umbrella


def test_a_yes_or_no_about_the_cold_is_answered_yes_or_no_first(tmp_path: Path) -> None:
    """The twelfth blind set: "do i need a coat tonight?" got "Tonight it gets down to -2 °C", no answer to it."""
    coat, cold, how = ask_all(
        ["do I need a coat tonight?", "will it be cold on Sunday", "how cold will it be tonight"], tmp_path
    )
    assert coat.text.startswith("Yes: it will be cold. Tonight in Ghent it gets down to "), coat.text
    assert cold.text.startswith("Yes: it will be freezing. "), cold.text  # Sunday: -1 °C at night
    assert how.text.startswith("Tonight in Ghent")  # asked how cold: the figures
