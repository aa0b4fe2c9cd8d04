"""Weather and the sun, answered from the forecast source and from the sun's equations, never guessed.

Two topics (see :mod:`appliance.grounded.base`):

- :data:`WEATHER` ("weather"): "is it going to rain tomorrow", "how cold will it be tonight", "what's the
  weather like", "will it be sunny this weekend", "do I need an umbrella", "what's the temperature outside
  tomorrow". The answer comes from ``facts.weather`` (:class:`appliance.weather.source.WeatherSource`), its
  basis "Open-Meteo forecast for Ghent, fetched 10:02". With no source it says so and what to set; offline
  it answers from the kept forecast and says when that was fetched, or that it has none.
- :data:`SUN` ("sun"): "when is sunset", "what time is sunrise tomorrow", "when does it get dark": computed
  on the Pi for the configured place (:mod:`appliance.weather.sun`), no network.

The words rule takes only questions about the weather here and now: "I'm under the weather", "whether or
not", "the rain in Spain song", "how does weather work", "is it hot in the living room" (a sensor's
question) are not taken. A question about another place ("what's the weather like in Paris" when the place
is Ghent) *is* taken, and declined in one honest sentence: the forecast is for the configured place only,
and the model, asked instead, would make a forecast up.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults
from appliance.grounded.clock import named_date
from appliance.weather.source import unconfigured
from appliance.weather.sun import Event, SunDay, said_at, sun_day
from appliance.weather.words import ASPECTS, WEEKDAYS, Aspect, cold_verdict, period, say

_SPELLED = {
    "what's": "what is",
    "whats": "what is",
    "how's": "how is",
    "hows": "how is",
    "it's": "it is",
    "i'm": "i am",
    "gonna": "going to",
    "whens": "when is",
    "when's": "when is",
    "today's": "today",
    "tomorrow's": "tomorrow",
    "tonight's": "tonight",
}
_NOT_WEATHER = re.compile(
    r"\bunder the weather\b|\bweather (?:station|permitting|the storm|proof)|\bwhether\b"
    r"|\b(?:song|lyrics|film|movie|poem|story|sing|play|book)\b"
    r"|\b(?:on|of|in) (?:mars|venus|jupiter|saturn|mercury|neptune|uranus|pluto|the moon|space)\b"
)
_TIME = (
    r"(?:today|tonight|tomorrow(?: night| morning| afternoon| evening)?|this (?:morning|afternoon|evening|weekend|week)"
    r"|(?:on )?(?:the )?weekend|now|right now|later|(?:on )?(?:" + "|".join(WEEKDAYS) + r")|next week"
    r"|in \d+ days|the day after tomorrow|the coming days|the next few days)"
)
_WEATHER_LEAD = re.compile(
    r"^(?:(?:hey|ok|so|and|please|pico|tell me|can you tell me|could you tell me)\s+)*"
    r"(?:what|how|tell me|give me|show me|check|get me|any|weather|forecast|the weather|the forecast|and)\b"
)
_WEATHER_WORDS = re.compile(
    r"\bthe (?:weather|forecast)\b|\bweather (?:forecast|report|today|tomorrow|tonight|now|outside|like|this|for|on)\b"
    r"|^(?:the )?(?:weather|forecast)$|\bforecast for\b"
)
_HOW_IT_WORKS = re.compile(
    r"^(?:how|why) (?:does|do|did|is|are) (?:the )?(?:weather|forecast) (?:work|made|form)|\bexplain\b"
)
_WILL_IT = re.compile(
    r"\b(?:will it|is it|does it|would it|might it|could it|it is going to|it will|is it going to|going to)\s+"
    r"(?:be\s+|get\s+)?(?:going to\s+)?(?:be\s+)?"
    r"(?P<w>rain|raining|rainy|snow|snowing|snowy|pour|pouring|drizzle|drizzling|sunny|sun"
    r"|cloudy|wet|dry|freezing|freeze|cold|chilly|warm|hot|frosty)\b"
)
_CHANCE = re.compile(r"\b(?:chance of|any) (?P<w>rain|snow|showers|sun|sunshine)\b|^(?P<v>rain|snow) " + _TIME)
_UMBRELLA = re.compile(
    r"\b(?:need|take|bring|want|carry) (?:an |my |the |a )?(?:umbrella|brolly|raincoat|rain coat|rain jacket)\b"
)
_COAT = re.compile(r"\b(?:need|take|bring|wear|want) (?:an |my |the |a )?(?:coat|jacket|jumper|sweater|scarf|gloves)\b")
FORECAST_REACH_DAYS = 15  # Open-Meteo's forecast reaches 16 days; a day past it is no forecast's
_HOW_COLD = re.compile(
    r"\bhow (?P<w>cold|warm|hot|chilly) (?:will it be|will it get|is it going to be|is it going to get|does it get"
    r"|it will be|it is going to be|is it)\b"
)
_TEMPERATURE = re.compile(
    r"\b(?:what is|what will be|what will|how is) the (?:temperature|temp|high|low)\b|\btemperature outside\b"
    r"|\bthe (?:high|low) (?:today|tomorrow|tonight)\b|\bwhat is (?:today|tomorrow|tonight) (?:high|low)\b"
    r"|^how many degrees (?:is it|will it be|is it going to be)\b"  # "how many degrees is it out there"
    # "what kind of temperatures are we looking at today" (the thirteenth blind set; a day is named, see match)
    r"|\bwhat (?:kind|sort) of (?:temperatures?|temps)\b|\b(?:temperatures|temps) (?:are we|will we|do we)\b"
)
_SUN = re.compile(
    r"\b(?:when|what time) (?:is|will be|does|will) (?:the )?(?P<a>sunset|sunrise|sun (?:set|rise|go down|come up))\b"
    r"|\b(?:when|what time) (?:does|will) it (?P<b>get dark|get light|be dark|be light)\b"
    r"|\b(?:time of|how long (?:until|till|to)) (?:the )?(?P<c>sunset|sunrise)\b"
    r"|^(?:the )?(?P<d>sunset|sunrise)(?: time)?(?: " + _TIME + r")?$"
    r"|\bwhat time is (?:the )?(?P<e>sunset|sunrise)\b|\b(?P<f>sunset|sunrise) (?:time|today|tomorrow|tonight)\b"
)
_SUN_UP = re.compile(
    r"^is (?:the )?sun (?:still )?(?P<state>up|down|set|risen)"
    r"(?: yet| now| already| at the moment| right now| currently)?"
    r"(?: or (?:has it |is it |did it )?(?:already )?(?:gone |go )?(?:down|set|up|risen)(?: already| yet)?)?$"
    r"|^is it (?:still )?(?:dark|light|daylight|night)(?= (?:outside|out|yet|now|already))(?: outside| out)?"
    r"(?: yet| now| already| still)?$"
    # "has the sun come up yet or is it still dark out?"
    r"|^(?:has|did) (?:the )?sun (?P<verb>come up|risen|rise|gone down|go down|set)(?: yet| already)?"
    r"(?: or is it (?:still )?(?:dark|light|night)(?: outside| out)?(?: yet| still)?)?$"
)
_DAY_LENGTH = re.compile(
    r"^how (?:long|many hours) (?:is|of) (?:the )?(?:day|daylight|light)(?: is there)?(?: " + _TIME + r")?"
    r"(?: (?:from sunrise to sunset|between sunrise and sunset|in hours(?: and minutes)?))?$"
    r"|^how (?:much|many hours of) (?:day)?light (?:do|will|is there|are there|does it)\b.*$"
)
_ELSEWHERE = re.compile(r"\b(?P<prep>in|for|at|near|around) (?P<p>[a-z][a-z'.-]*(?: [a-z][a-z'.-]*){0,2})")
_ARTICLES = {"the", "a", "an", "my", "our", "your", "this", "that", "some"}
_HERE = {"here", "home", "town", "the city", "our town", "my town", "the area", "the garden", "the village", "general"}
_INDOOR = re.compile(r"\bin (?:here|the (?:living|bed|bath|dining)\s?room|the kitchen|the house|my room|the office)\b")


def _normal(text: str) -> str:
    words = text.lower().replace("’", "'").replace("‘", "'")
    words = re.sub(r"[?!.,;:]+", " ", words)
    return " ".join(_SPELLED.get(w, w) for w in words.split())


_COUNTS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _when(text: str, default: str) -> str:
    """The period a question names (see appliance.weather.words.period), else ``default``."""
    if "day after tomorrow" in text:
        return "+2"
    if re.search(
        r"\b(?:next (?:month|year)|in (?:a|one|\d+) (?:months?|years?)|this day next|in a few weeks|at christmas)\b",
        text,
    ):
        return "far"
    count = r"(a|one|two|three|four|five|six|\d+)"
    if re.search(rf"\b{count} (?:months?|years?) (?:from (?:now|today)|away|ahead|time|out)\b", text):
        return "far"  # "a month from today", "three months away"
    if match := re.search(rf"\b{count} weeks? (?:from (?:now|today)|away|ahead|time)\b|\bin {count} weeks?\b", text):
        weeks = match.group(1) or match.group(2)
        days = 7 * (_COUNTS[weeks] if weeks in _COUNTS else int(weeks))
        return f"+{days}" if days <= FORECAST_REACH_DAYS else "far"
    if match := re.search(r"\bin (\d+) days\b", text):
        return f"+{match.group(1)}" if int(match.group(1)) <= FORECAST_REACH_DAYS else "far"
    if re.search(r"\b(?:tonight|this evening|overnight|at night|during the night)\b", text):
        return "tonight"
    if "tomorrow" in text:
        return "tomorrow"
    if "weekend" in text:
        return "weekend"
    if re.search(r"\b(?:next week|this week|the coming days|the next few days)\b", text):
        return "week"
    for day in WEEKDAYS:
        if re.search(rf"\b{day}\b", text):
            return day
    if re.search(r"\b(?:right now|now|currently|at the moment)\b", text):
        return "now"
    if re.search(r"\btoday|this (?:morning|afternoon)|later\b", text):
        return "today"
    return default


def _here_and_now(text: str) -> bool:
    """No "outside" and no time named: "is it cold" may be about the room as well as the weather."""
    return not re.search(r"\b(?:outside|out there|outdoors)\b", text) and _when(text, "") in ("", "now")


def _elsewhere(original: str, place: str) -> str:
    """Another place the question names ("paris"), or "" (none, the configured one, a time, "my garden").

    "in paris" names a place as typed; after "for", "at", "near" or an article ("for my run", "at the
    weekend", "in the garden") only a capitalised name does ("in the Netherlands", "near Lyon").
    """
    for match in _ELSEWHERE.finditer(_normal(original)):
        named = match.group("p")
        named = re.split(r" (?:" + _TIME + r"|and|or|this|next|please|like)\b", " " + named)[0].strip()
        if not named or re.fullmatch(_TIME + r"(?: .*)?", named) or named in _HERE or named in _ARTICLES:
            continue
        if re.match(
            r"(?:the |an? )?(?:morning|afternoon|evening|night|moment|hours?|minutes?|week|day|days|outside|total"
            r"|celsius|fahrenheit|degrees|detail|short|general|numbers|words|before|after|then|time|there|it)\b",
            named,
        ):
            continue
        if re.match(r"(?:" + "|".join(WEEKDAYS) + r"|\d)", named):
            continue
        if place and (named == place.lower() or named.startswith(place.lower())):
            continue
        article = re.match(r"(?:my|our|your|the|this|that|a|an|some) ", named)
        name = named[article.end() :] if article else named
        capital = rf"\b{re.escape(name.split()[0].capitalize())}\b"
        after = re.search(r"\b(?:weather|forecast|temperature|rain)\s+" + re.escape(match.group(0)), _normal(original))
        if (article or (match.group("prep") != "in" and not after)) and not re.search(capital, original):
            continue  # "for my run", "at the office": no place name; "the forecast for new york" is one
        return name
    return ""


class WeatherTopic(TopicDefaults):
    """The forecast for the configured place (module docstring)."""

    kind: str = "weather"
    overview: str = "general"  # the forecast for the day the words name (today)

    def match(self, text: str) -> Ask | None:
        """An Ask for a question about the weather here (words rule, module docstring), else None."""
        said = _normal(text)
        if not said or len(said.split()) > 16 or _NOT_WEATHER.search(said) or _INDOOR.search(said):
            return None
        aspect: Aspect | None = None
        present = False
        if _UMBRELLA.search(said):
            aspect = "umbrella"
        elif _COAT.search(said):
            aspect = "cold"
        elif (found := _WILL_IT.search(said)) is not None:
            aspect = _aspect(found.group("w"))
            present = found.group(0).startswith("is it") and "going to" not in found.group(0)
            if aspect in ("cold", "temperature") and present and _here_and_now(said):
                return None  # "is it cold" / "is it hot": the room's, the Pi's or the weather's? not sure
        elif (found := _CHANCE.search(said)) is not None:
            aspect = _aspect(found.group("w") or found.group("v"))
        elif (found := _HOW_COLD.search(said)) is not None:
            aspect = "cold" if found.group("w") in ("cold", "chilly") else "temperature"
            present = found.group(0).endswith("is it")
            if present and _here_and_now(said):
                return None  # "how hot is it": the Pi's temperature, maybe
        elif _TEMPERATURE.search(said):
            if not re.search(r"\b(?:outside|out there|outdoors)\b|" + _TIME, said):
                return None  # "what is the temperature": a sensor's, more likely
            aspect = "temperature"
            asked_now = _when(said, "") in ("", "now") and not said.startswith("how many degrees will")
            present = bool(re.match(r"what is the (?:temperature|temp) (?:outside|out there)$", said)) or (
                said.startswith("how many degrees is it") and asked_now
            )
        elif _WEATHER_WORDS.search(said) and _WEATHER_LEAD.search(said) and not _HOW_IT_WORKS.search(said):
            aspect = "general"
        if aspect is None:
            return None
        when = _when(said, "now" if present else "today")
        return Ask(self.kind, aspect, {"when": when}, text)

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The forecast's answer; what to set when there is none; an honest no for another place."""
        weather = facts.config.weather
        elsewhere = _elsewhere(ask.text, weather.place) if ask.text else ""
        source = facts.weather
        if elsewhere and (weather.located or source is not None):
            here = weather.place_name
            have = "only have the forecast" if source is not None else "would only have the forecast (they are off)"
            text = f"I {have} for {here}, not for {elsewhere.title()}, so I cannot tell you that."
            return Answer(text, f"the configured place ({here})", self.kind)
        if source is None:
            return Answer(unconfigured(weather), "the config (no weather source)", self.kind)
        outlook = await source.outlook()
        if outlook.forecast is None:
            if outlook.stale:
                text = (
                    f"I cannot reach the forecast service ({outlook.problem}) and the last forecast I have is too old."
                )
            else:
                text = f"I have no forecast for {source.place}: {outlook.problem or 'none was fetched yet'}."
            return Answer(text, f"{source.place}: no forecast", self.kind)
        now = facts.now()
        aspect, when = _reread(ask)
        named = named_date(ask.text, now.date())
        if named is not None and (named - now.date()).days > FORECAST_REACH_DAYS:
            when = "far"  # "on Christmas Day", a month away
        if when == "far" or _when(_normal(ask.text), "") == "far":
            text = (
                f"I can't know the weather that far ahead: the forecast for {source.place} covers the next days only."
            )
            return Answer(text, source.basis(outlook.forecast), self.kind)
        text = say(outlook.forecast, aspect, period(when, now), source.place)
        yes_no = not re.match(r"\s*(?:how|what|which)\b", ask.text.lower())  # "do I need a coat?", not "how cold?"
        if aspect == "cold" and yes_no and (verdict := cold_verdict(outlook.forecast, period(when, now))):
            text = f"{verdict} {text}"
        basis = source.basis(outlook.forecast)
        if outlook.stale:
            fetched = datetime.fromtimestamp(outlook.forecast.fetched_at, now.tzinfo)
            when = f"{fetched:%H:%M}" if fetched.date() == now.date() else f"{fetched:%a %d %b %H:%M}"
            text = f"I cannot reach the forecast service now; as of {when}: {text}"
            basis += f" (offline: {outlook.problem})"
        return Answer(text, basis, self.kind)


def _reread(ask: Ask) -> tuple[Aspect, str]:
    """The aspect and period of an ask; one matched by meaning has neither, so its words are read for them."""
    said = _normal(ask.text)
    if ask.what in ASPECTS and "when" in ask.details:
        return next(a for a in ASPECTS if a == ask.what), str(ask.details["when"])
    found = re.search(
        r"\b(umbrella|raincoat|rain\w*|pour\w*|drizzl\w*|showers|wet|snow\w*|sun\w*|cloud\w*|cold|chilly|freezing"
        r"|frost\w*|warm|hot|temperature)\b",
        said,
    )
    word = found.group(1) if found else ""
    aspect: Aspect = "umbrella" if word in ("umbrella", "raincoat") else _aspect(word) if word else "general"
    return aspect, _when(said, "today")


def _aspect(word: str) -> Aspect:
    if word.startswith(("rain", "pour", "drizzl", "shower")) or word in ("wet", "dry"):
        return "rain"
    if word.startswith("snow"):
        return "snow"
    if word.startswith(("sun", "cloud")):
        return "sunny"
    if word in ("cold", "chilly", "freezing", "freeze") or word.startswith("frost"):
        return "cold"
    return "temperature"


class SunTopic(TopicDefaults):
    """Sunrise and sunset for the configured place, computed on the Pi (module docstring)."""

    kind: str = "sun"
    overview: str = "length"  # sunrise, sunset and the day's length

    def match(self, text: str) -> Ask | None:
        """An Ask for "when is sunset / sunrise" questions (words rule), else None."""
        said = _normal(text)
        if not said or len(said.split()) > 14 or _NOT_WEATHER.search(said):
            return None
        if up := _SUN_UP.match(said):
            if " or " in said:  # "has the sun come up yet or is it still dark?": which, not yes or no
                return Ask(self.kind, "which", {"when": ""}, text)
            asked = up["state"] or up["verb"] or said
            return Ask(
                self.kind, "dark" if re.search(r"\b(?:dark|night|down|set)\b", asked) else "up", {"when": ""}, text
            )
        if _DAY_LENGTH.match(said):
            return Ask(self.kind, "length", {"when": _when(said, "")}, text)
        found = _SUN.search(said)
        if found is None:
            return None
        word = next(g for g in found.groups() if g)
        event = "sunset" if any(w in word for w in ("set", "down", "dark")) else "sunrise"
        return Ask(self.kind, event, {"when": _when(said, "")}, text)

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The time, computed here; what to set with no place; an honest no for another place."""
        weather = facts.config.weather
        said = _normal(ask.text)
        if ask.what in ("sunset", "sunrise", "up", "dark", "which", "length"):
            event: Event = "sunrise" if ask.what == "sunrise" else "sunset"
        else:  # matched by meaning: the words say which
            event = "sunset" if re.search(r"\b(?:sunset|set|sets|down|dark|dusk|evening)\b", said) else "sunrise"
        if not weather.located:
            text = (
                f"I cannot tell when {event} is: I do not know where I am. Set weather.latitude and "
                "weather.longitude (and weather.place, its name) in the config."
            )
            return Answer(text, "the config (no place set)", self.kind)
        place = weather.place_name
        elsewhere = _elsewhere(ask.text, weather.place) if ask.text else ""
        if elsewhere:
            text = f"I only know the sun's times for {place}, not for {elsewhere.title()}."
            return Answer(text, f"the configured place ({place})", self.kind)
        now = facts.now()
        when = str(ask.details["when"]) if "when" in ask.details else _when(said, "")
        day = period(when or "today", now).days[0] if when not in ("", "now", "tonight") else now.date()
        zone = now.tzinfo
        assert weather.latitude is not None and weather.longitude is not None and zone is not None
        sun = sun_day(day, weather.latitude, weather.longitude, zone)
        basis = f"computed on the Pi for {place} ({weather.latitude:.2f}, {weather.longitude:.2f})"
        if ask.what in ("up", "dark", "which", "length"):
            return Answer(_up_or_length(ask.what, sun, now, place), basis, self.kind)
        at = sun.at(event)
        if at is not None and at < now and not when:  # "when is sunset" after it: today's, then tomorrow's
            later = sun_day(day + timedelta(days=1), weather.latitude, weather.longitude, zone)
            next_one = _said(later, event, now, place)
            text = f"{event.title()} in {place} was at {said_at(at)} today. {next_one}."
            return Answer(text, basis, self.kind)
        return Answer(f"{_said(sun, event, now, place)}.", basis, self.kind)


def _up_or_length(what: str, sun: SunDay, now: datetime, place: str) -> str:
    """ "Yes: the sun rose at 08:17 and sets at 16:44 in Brussels." / "The day is 8 h 27 min long ..."."""
    if sun.sunrise is None or sun.sunset is None:
        polar = "stays up all day (midnight sun)" if sun.polar == "day" else "stays below the horizon (polar night)"
        return f"In {place} the sun {polar} {_day(sun.day, now)}."
    if what == "length":
        minutes = round((sun.sunset - sun.sunrise).total_seconds() / 60)
        return (
            f"The day in {place} is {minutes // 60} h {minutes % 60:02d} min long {_day(sun.day, now)}: "
            f"sunrise {said_at(sun.sunrise)}, sunset {said_at(sun.sunset)}."
        )
    up = sun.sunrise <= now < sun.sunset
    if what == "which":  # asked either way round: said plainly, with no yes or no to misread
        if up:
            return f"The sun is up: it rose at {said_at(sun.sunrise)} and sets at {said_at(sun.sunset)} in {place}."
        if now < sun.sunrise:
            return f"It is still dark: the sun rises at {said_at(sun.sunrise)} in {place}."
        return f"The sun is down: it set at {said_at(sun.sunset)} in {place}."
    yes, no = ("No", "Yes") if what == "dark" else ("Yes", "No")  # "is it dark?" is "is the sun down?"
    if up:
        return f"{yes}: the sun rose at {said_at(sun.sunrise)} and sets at {said_at(sun.sunset)} in {place}."
    if now < sun.sunrise:
        return f"{no}: the sun rises at {said_at(sun.sunrise)} in {place}."
    return f"{no}: the sun set at {said_at(sun.sunset)} in {place}."


def _said(sun: SunDay, event: Event, now: datetime, place: str) -> str:
    """ "Sunset in Ghent is at 16:48 today (Fri 27 Nov)", or that there is none that day (polar day or night)."""
    at = sun.at(event)
    if at is None:
        why = (
            "above the horizon all day (midnight sun)"
            if sun.polar == "day"
            else "below the horizon all day (polar night)"
        )
        return f"There is no {event} in {place} {_day(sun.day, now)}: the sun stays {why}"
    zone = getattr(now.tzinfo, "key", None) or now.tzname()  # named, as the clock's answers are: "(Etc/UTC)"
    return f"{event.title()} in {place} is at {said_at(at)} ({zone}) {_day(at.date(), now)}"


def _day(day: date, now: datetime) -> str:
    if day == now.date():
        return f"today ({day:%a %d %b})"
    if day == now.date() + timedelta(days=1):
        return f"tomorrow ({day:%a %d %b})"
    return f"on {day:%A %d %B}"


WEATHER = WeatherTopic()
SUN = SunTopic()
