"""What a model that guesses may not state: facts the appliance knows, or nobody does.

The packaged SmolLM2-135M (catalog ``answers: false``) is asked no question of fact with the cloud off
(:mod:`appliance.agent.decline`); what still reaches it is small talk and messages that do not read as
questions ("wats the time rn"). Its replies to those then state things it cannot know: "The time is 12
January.", "The living room fan was put on by the 12th of January.", "At 12:04 PM, I'm at the front desk." —
the blind everyday sets' wrong replies that reached a model, each a phrasing no rule had.

So the reply guard (:mod:`appliance.agent.reply_guard`) reads such a model's reply for a *claim*: a clock time,
a date (a weekday, a day of a month, a year), the weather, the home's devices and their state, schedules and
reminders, what the person said or the assistant remembers, the Pi's own figures (memory, CPU, uptime), and an
amount in a unit (a conversion or a measurement it worked out).
One claim and the whole reply is replaced by an honest sentence: the model was answering something it could
not know, and what it said around it (a "Sure, I can help") is not an answer either. Where the appliance
knows such a thing it answered before the model ran (the grounded answers, the device stage); so a claim
here is a guess, whatever its words.

Not read: a model the catalog says answers, a reply to "/local" (asked of the small model on purpose), a
request to make something ("write a poem about the rain": fiction by request), and a reply written from a
tool's result in the same turn. The cost: a friendly reply that mentions the rain or a light ("not much, just
enjoying the sunny day") is declined too, on this model only.
"""

from __future__ import annotations

import re

_MONTHS = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)"
)
_KINDS: dict[str, str] = {
    "time": (
        r"\b(?:[01]?\d|2[0-3]):[0-5]\d\b|\b(?:1[0-2]|0?[1-9])(?:[:.][0-5]\d)? ?(?:am|pm|a\.m\.|p\.m\.)(?!\w)"
        r"|\bo'?clock\b|\b(?:half|quarter) (?:past|to) \w+|\bthe time is\b|\bit(?:'s| is) (?:now )?(?:noon|midnight)\b"
    ),
    "date": (
        r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b"
        rf"|\b\d{{1,2}}(?:st|nd|rd|th)?(?: of)? {_MONTHS}\b|\b{_MONTHS} \d{{1,2}}(?:st|nd|rd|th)?\b"
        r"|\b(?:1[89]|20)\d\d\b|\b(?:today|tomorrow|yesterday) (?:is|was|will be)\b"
    ),
    "weather": (
        r"\b(?:rain(?:s|ing|y|fall)?|showers?|drizzle|snow(?:s|ing|y)?|sleet|hail|sunny|sunshine|cloudy|overcast|fog(?:gy)?"
        r"|thunder(?:storms?)?|storm(?:s|y)?|windy|breezy|humid(?:ity)?|forecast|weather|celsius|fahrenheit|degrees?"
        r"|frost(?:y)?|freezing|sunrise|sunset)\b|°"
    ),
    "devices": (
        r"\b(?:lights?|lamps?|bulbs?|fans?|heaters?|heating|boiler|thermostat|relays?|plugs?|sockets?|sensors?"
        r"|door ?bell|doorbell|locks?|locked|unlocked|cameras?|blinds|curtains|radiators?|kettle|dishwasher"
        r"|washing machine|garage door|switched (?:on|off)|turned (?:on|off))\b"
    ),
    "schedules": r"\b(?:remind(?:ers?|ed|ing)?|schedul(?:e|es|ed|ing)|appointments?|calendar|timers?|alarms?|bins?)\b",
    "memory": (
        r"\byou (?:told|said|asked|mentioned|wrote|stored|saved)\b"
        r"|\bI (?:remember|recall|noted|saved|stored|wrote down)\b"
        r"|\byour (?:wife|husband|partner|mum|mom|mother|dad|father|son|daughter|dog|cat|dentist|doctor"
        r"|password|wifi)\b"
    ),
    "health": (
        r"\b\d+(?:[.,]\d+)? ?(?:gb|mb|kb|tb|ghz|mhz|gigabytes?|megabytes?)\b|\b(?:ram|cpu|processor|uptime|rebooted"
        r"|restarted|disk space|storage|temperature)\b"
    ),
    # an amount in a unit: a conversion or a measurement it worked out ("5 feet 8 inches is 0.7 meters", a blind set)
    "measures": (
        r"\b\d+(?:[.,]\d+)? ?(?:mm|cm|m|km|millimet(?:er|re)s?|centimet(?:er|re)s?|met(?:er|re)s?|kilomet(?:er|re)s?"
        r"|miles?|feet|foot|ft|inch(?:es)?|yards?|kg|g|mg|kilos?|kilograms?|grams?|pounds?|lbs?|ounces?|oz|stones?"
        r"|ml|l|litres?|liters?|millilit(?:er|re)s?|pints?|gallons?|cups?|tablespoons?|teaspoons?|mph|km/h|kph)\b"
    ),
}
CLAIM = re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in _KINDS.items()), re.IGNORECASE)


def claim(text: str) -> re.Match[str] | None:
    """The first thing in ``text`` a model that guesses may not state (``match.lastgroup``: its kind), or None."""
    return CLAIM.search(text)
