"""Unit conversions, exact, from the definitions of the units (worked out on the Pi, no model, no network).

Asked: "how many feet in 3 meters", "convert 70 F to celsius", "how many grams in a pound", "5 km in
miles", "how many tablespoons in a cup", "how many seconds are there in a day", "2 GB in MB". Length,
mass, volume (cooking measures are the US customary ones, and the answer says so), temperature, speed,
time and data sizes. Every unit is held as its exact definition in a base unit (1 ft = 0.3048 m, 1 lb =
0.45359237 kg, 1 US cup = 236.5882365 ml), so the arithmetic is exact and only the shown figure is
rounded, to four significant digits, with "about" when it was. The answer's basis is the definition used.

Not taken: a unit that has no fixed size (a month, a year: their days differ; "degrees" alone), a
conversion between two kinds of quantity ("how many grams in a cup": that depends on what is in the
cup, and the answer says so), and every message that is not all a conversion ("how many people live in
Paris", "turn the fan on for 5 minutes").
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

from appliance.grounded.arithmetic import digits_for_words
from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults


@dataclass(frozen=True)
class Unit:
    """One unit: its kind, its size in the kind's base unit (exact), how it is written and said."""

    kind: str  # "length", "mass", ...
    size: Fraction  # in the base unit of its kind (temperatures: see _to_kelvin)
    symbol: str  # "ft"
    one: str  # "foot"
    many: str  # "feet"
    said: tuple[str, ...] = ()  # the other ways people write it


def _u(kind: str, size: str, symbol: str, one: str, many: str, *said: str) -> Unit:
    return Unit(kind, Fraction(size), symbol, one, many, said)


_UNITS: tuple[Unit, ...] = (
    _u("length", "0.001", "mm", "millimetre", "millimetres", "millimeter", "millimeters"),
    _u("length", "0.01", "cm", "centimetre", "centimetres", "centimeter", "centimeters"),
    _u("length", "1", "m", "metre", "metres", "meter", "meters"),
    _u("length", "1000", "km", "kilometre", "kilometres", "kilometer", "kilometers", "kms"),
    _u("length", "0.0254", "in", "inch", "inches", '"'),
    _u("length", "0.3048", "ft", "foot", "feet", "'"),
    _u("length", "0.9144", "yd", "yard", "yards", "yds"),
    _u("length", "1609.344", "mi", "mile", "miles"),
    _u("length", "1852", "nmi", "nautical mile", "nautical miles"),
    _u("mass", "0.000001", "mg", "milligram", "milligrams", "milligramme", "milligrammes"),
    _u("mass", "0.001", "g", "gram", "grams", "gramme", "grammes"),
    _u("mass", "1", "kg", "kilogram", "kilograms", "kilo", "kilos", "kilogramme", "kilogrammes", "kgs"),
    _u("mass", "1000", "t", "tonne", "tonnes", "metric ton", "metric tons"),
    _u("mass", "0.028349523125", "oz", "ounce", "ounces"),
    _u("mass", "0.45359237", "lb", "pound", "pounds", "lbs"),
    _u("mass", "6.35029318", "st", "stone", "stone", "stones"),
    _u("volume", "0.001", "ml", "millilitre", "millilitres", "milliliter", "milliliters"),
    _u("volume", "0.01", "cl", "centilitre", "centilitres", "centiliter", "centiliters"),
    _u("volume", "0.1", "dl", "decilitre", "decilitres", "deciliter", "deciliters"),
    _u("volume", "1", "l", "litre", "litres", "liter", "liters"),
    _u("volume", "0.00492892159375", "US tsp", "US teaspoon", "US teaspoons", "teaspoon", "teaspoons", "tsp"),
    _u("volume", "0.01478676478125", "US tbsp", "US tablespoon", "US tablespoons", "tablespoon", "tablespoons", "tbsp"),
    _u(
        "volume",
        "0.0295735295625",
        "US fl oz",
        "US fluid ounce",
        "US fluid ounces",
        "fluid ounce",
        "fluid ounces",
        "fl oz",
    ),
    _u("volume", "0.2365882365", "US cup", "US cup", "US cups", "cup", "cups"),
    _u("volume", "0.473176473", "US pt", "US pint", "US pints", "pint", "pints", "pt"),
    _u("volume", "0.946352946", "US qt", "US quart", "US quarts", "quart", "quarts", "qt"),
    _u("volume", "3.785411784", "US gal", "US gallon", "US gallons", "gallon", "gallons", "gal"),
    _u("volume", "0.56826125", "imp pt", "imperial pint", "imperial pints", "uk pint", "uk pints"),
    _u("volume", "4.54609", "imp gal", "imperial gallon", "imperial gallons", "uk gallon", "uk gallons"),
    _u("temperature", "1", "°C", "degree Celsius", "degrees Celsius", "c", "celsius", "centigrade", "degrees c"),
    _u("temperature", "1", "°F", "degree Fahrenheit", "degrees Fahrenheit", "f", "fahrenheit", "degrees f"),
    _u("temperature", "1", "K", "kelvin", "kelvin", "k", "kelvins"),
    _u("speed", "1", "m/s", "metre per second", "metres per second", "meters per second", "meter per second"),
    _u("speed", "5/18", "km/h", "kilometre per hour", "kilometres per hour", "kph", "kmh", "kilometers per hour"),
    _u("speed", "0.44704", "mph", "mile per hour", "miles per hour"),
    _u("speed", "463/900", "kn", "knot", "knots"),
    _u("time", "0.001", "ms", "millisecond", "milliseconds"),
    _u("time", "1", "s", "second", "seconds", "sec", "secs"),
    _u("time", "60", "min", "minute", "minutes", "mins"),
    _u("time", "3600", "h", "hour", "hours", "hr", "hrs"),
    _u("time", "86400", "d", "day", "days"),
    _u("time", "604800", "wk", "week", "weeks"),
    _u("data", "0.125", "bit", "bit", "bits"),
    _u("data", "1", "B", "byte", "bytes"),
    _u("data", "1000", "kB", "kilobyte", "kilobytes", "kb"),
    _u("data", "1000000", "MB", "megabyte", "megabytes", "mb"),
    _u("data", "1000000000", "GB", "gigabyte", "gigabytes", "gb"),
    _u("data", "1000000000000", "TB", "terabyte", "terabytes", "tb"),
    _u("data", "1024", "KiB", "kibibyte", "kibibytes", "kib"),
    _u("data", "1048576", "MiB", "mebibyte", "mebibytes", "mib"),
    _u("data", "1073741824", "GiB", "gibibyte", "gibibytes", "gib"),
    _u("data", "1099511627776", "TiB", "tebibyte", "tebibytes", "tib"),
    _u("data", "125000", "Mbit", "megabit", "megabits", "mbit", "mbits"),
    _u("data", "125000000", "Gbit", "gigabit", "gigabits", "gbit", "gbits"),
)
_BASE = {"length": "m", "mass": "kg", "volume": "l", "speed": "m/s", "time": "s", "data": "B"}
_KINDS = {"length": "length", "mass": "weight", "volume": "volume", "temperature": "temperature"}
_KINDS.update(speed="speed", time="time", data="data size")

_BY_NAME: dict[str, Unit] = {}
for _unit in _UNITS:
    for _name in (_unit.symbol, _unit.one, _unit.many, *_unit.said):
        _BY_NAME.setdefault(_name.lower(), _unit)
_BY_NAME.update(
    {
        "fl oz": _BY_NAME["fluid ounce"],
        "°c": _BY_NAME["c"],
        "°f": _BY_NAME["f"],
        "ºc": _BY_NAME["c"],
        "ºf": _BY_NAME["f"],
    }
)

_UNIT = "|".join(re.escape(name) for name in sorted(_BY_NAME, key=len, reverse=True))
_FIGURE = r"\d{1,15}(?:\.\d{1,12})?"  # past a quadrillion, a conversion is not what is asked
_AMOUNT = rf"(?P<n>-?{_FIGURE}|-?\.\d{{1,12}}|an?|one|minus {_FIGURE})"
_FROM = rf"(?P<src>{_UNIT})"
_TO = rf"(?P<dst>{_UNIT})"
_ASKING = (
    r"(?:(?:can you |could you |please )*(?:convert|change|turn) |what(?:'s| is| are) |how much is |how much are )?"
)
_PATTERNS = (
    rf"how (?:many|much) {_TO} (?:are |is )?(?:there )?in {_AMOUNT} ?{_FROM}",
    rf"how (?:many|much) {_TO} (?:are |is )?(?:there )?in {_FROM}",
    rf"how (?:many|much) {_TO} (?:is|are|make|makes|equals?) {_AMOUNT} ?{_FROM}",
    rf"{_ASKING}{_AMOUNT} ?{_FROM} (?:in|to|into|as|in terms of|equals how many|is how many) {_TO}",
)


@functools.cache
def _compiled() -> tuple[re.Pattern[str], ...]:
    """The patterns, compiled at the first message read, not at import: every unit name in them twice makes them
    about 1.2 MiB, which a daemon that has answered nothing yet need not hold (serve_idle_rss_mib, make bench)."""
    return tuple(re.compile(p) for p in _PATTERNS)


@dataclass
class _Units(TopicDefaults):
    """The unit conversion topic (see the module docstring)."""

    kind: str = "units"
    unsure: str = "I could not read a conversion in that, and I won't guess: say it like “68 fahrenheit in celsius”."
    near_exact: bool = True  # its answer reads the words again, strictly: trusted near it too

    def match(self, text: str) -> Ask | None:
        """An Ask when the whole message asks for one amount in another unit (or, "oven's at 200C, what is that
        in fahrenheit", for an amount said before it)."""
        said = _normalise(text)
        said = _that(said) or said
        said, as_said = _compound(said)
        uk = re.search(r"\b(?:uk|imperial|british)\b", said) is not None
        said = re.sub(r" (?:uk|us|imperial|british|american) (?:pints?|gallons?)$", "", said)  # "... pints? uk pints"
        # "60 mph is what in km/h": the amount, then the question
        asked = rf"(?P<a>{_FIGURE} ?(?:{_UNIT})) (?:is|are|equals|makes) (?:what|how many|how much) (?:in|to|as)"
        if found := re.fullmatch(asked + rf" (?P<b>(?:{_UNIT}))", said):
            said = f"{found['a']} in {found['b']}"
        for pattern in _compiled():
            found = pattern.fullmatch(said)
            if found:
                details = {k: v for k, v in found.groupdict().items() if v}
                details.setdefault("n", "1")
                if as_said:
                    details["said"] = as_said
                if uk and details.get("dst") in ("pint", "pints", "pt"):
                    details["dst"] = "uk pints"  # "1.5 litres is how many pints? uk pints"
                return Ask(self.kind, "convert", details, text=text)
        return None

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The converted amount with the definition it used; None when the message is no conversion."""
        if not ask.what:
            found = self.match(ask.text)
            if found is None:
                return None
            ask = found
        source, target = _BY_NAME[ask.details["src"]], _BY_NAME[ask.details["dst"]]
        amount = _amount(ask.details["n"])
        if source.kind != target.kind:
            return Answer(
                f"{source.many[0].upper() + source.many[1:]} measure {_KINDS[source.kind]} and {target.many} "
                f"measure {_KINDS[target.kind]}: one cannot be turned into the other without knowing what is "
                "measured.",
                basis="no conversion: they measure different things",
                kind=self.kind,
            )
        if source.kind == "temperature":
            value = _from_kelvin(_to_kelvin(amount, source), target)
            basis = _temperature_basis(source, target)
            if value < _from_kelvin(Fraction(0), target):
                zero = _say(_from_kelvin(Fraction(0), source), source, places=2)
                below = f"{_say(amount, source)} is below absolute zero ({zero}): no temperature is."
                return Answer(below, basis=basis, kind=self.kind)
            return Answer(f"{_say(amount, source)} is {_say(value, target, places=1)}.", basis=basis, kind=self.kind)
        value = amount * source.size / target.size
        text = f"{ask.details.get('said') or _say(amount, source)} is {_say(value, target)}."
        if target.many == "feet" and re.search(r"\b(?:feet|foot|ft) and (?:inches|in)\b", ask.text.lower()):
            feet, inches = divmod(value * 12, 12)  # "whats that in feet and inches": 5 feet 10.9 inches
            text = f"{_say(amount, source)} is {int(feet)} feet {float(inches):.1f} inches ({_say(value, target)})."
        elif target.many == "feet" and source.many != "inches" and 3 <= value < 8:  # a height: 1.80 m
            whole_feet, whole_inches = divmod(round(value * 12), 12)
            text = f"{_say(amount, source)} is about {whole_feet} feet {whole_inches} inches ({_say(value, target)})."
        return Answer(text, basis=_basis(source, target), kind=self.kind)


UNITS = _Units()


_THAT = re.compile(
    r"(?:what(?:'s| is)|whats|how (?:far|much|long|heavy|hot|cold|big|tall|warm|many \w+) is)"
    r" (?:that|it|this) (?:in|to) (?:the )?"
)


def _that(said: str) -> str | None:
    """ "ran 10k this morning how far is that in miles" as "10 km in miles": the amount said before "that";
    "6 foot 2" is 74 inches, "10k" a distance when miles or km are asked for. None: no such question."""
    asked = _THAT.search(said)
    target = re.match(rf"(?P<dst>{_UNIT})\b", said[asked.end() :]) if asked else None
    if asked is None or target is None:
        return None
    before = said[: asked.start()]
    if feet := re.search(r"(\d+) ?(?:foot|feet|ft|') ?(\d+)(?: ?(?:inches|inch|in|\"))?\b", before):
        return f"{int(feet[1]) * 12 + int(feet[2])} inches in {target['dst']}"
    distance = target["dst"] in ("miles", "mile", "mi", "km", "kilometres", "kilometers")
    if distance and (k := re.search(r"(\d+)k\b", before)):
        return f"{k[1]} km in {target['dst']}"
    amounts = list(re.finditer(rf"(?<![\w.])(?P<n>{_FIGURE}) ?(?P<src>{_UNIT})(?![\w])", before))
    return f"{amounts[-1]['n']} {amounts[-1]['src']} in {target['dst']}" if amounts else None  # the last one said


# two units in one amount: "5 feet 8 inches", "11 stone 4", "3 lb 2 oz" (said as one, converted as the smaller)
_COMPOUNDS = (
    ("foot|feet|ft|'", 'inches|inch|"', 12, "feet", "inches"),
    ("stone|stones|st", "pounds|pound|lbs|lb", 14, "stone", "pounds"),
    ("pounds|pound|lbs|lb", "ounces|ounce|oz", 16, "pounds", "ounces"),
)


def _compound(said: str) -> tuple[str, str]:
    """``said`` with an amount in two units as one amount of the smaller ("5 feet 8 inches in cm" as "68 inches in
    cm"), and the amount as it was said ("" when there is none): a blind set's "convert 5 feet 8 inches to cm"
    reached the model."""
    for big, small, per, big_name, small_name in _COMPOUNDS:
        found = re.search(
            rf"(?<![\w.])(?P<a>\d{{1,6}}) ?(?:{big}) ?(?:and )?(?P<b>\d{{1,4}}(?:\.\d{{1,3}})?)"
            rf"(?: ?(?:{small})(?![\w])|(?= (?:in|to|into|as) )|$)",
            said,
        )
        if found:
            whole = Fraction(found["a"]) * per + Fraction(found["b"])
            amount = str(whole.numerator) if whole.denominator == 1 else f"{float(whole):g}"
            shown = f"{found['a']} {big_name} {found['b']} {small_name}"
            return f"{said[: found.start()]}{amount} {small_name}{said[found.end() :]}", shown
    return said, ""


def _normalise(text: str) -> str:
    text = text.lower().replace("’", "'").strip()
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    text = re.sub(r"[?!,;:]+|\.+$|\.(?=\s)", " ", text)
    text = re.sub(r"\b(?:degrees?|deg) (?=°|º)", "", text)
    return digits_for_words(text)


def _amount(said: str) -> Fraction:
    if said in ("a", "an", "one"):
        return Fraction(1)
    return Fraction(said.replace("minus ", "-"))


def _to_kelvin(value: Fraction, unit: Unit) -> Fraction:
    if unit.symbol == "°C":
        return value + Fraction("273.15")
    if unit.symbol == "°F":
        return (value - 32) * Fraction(5, 9) + Fraction("273.15")
    return value


def _from_kelvin(value: Fraction, unit: Unit) -> Fraction:
    if unit.symbol == "°C":
        return value - Fraction("273.15")
    if unit.symbol == "°F":
        return (value - Fraction("273.15")) * Fraction(9, 5) + 32
    return value


def shown(value: Fraction, digits: int = 4) -> tuple[str, bool]:
    """The figure as a person reads it, and whether it is exact (else rounded to ``digits`` significant)."""
    with localcontext() as context:
        context.prec = 60
        exact = Decimal(value.numerator) / Decimal(value.denominator)
        terminates = _terminates(value)
        if terminates and len(exact.normalize().as_tuple().digits) <= 10:
            return _plain(exact), True
        if value == 0:
            return "0", True
        exponent = math.floor(math.log10(abs(value)))
        places = max(0, digits - 1 - exponent)
        rounded = round(exact, places)
        return _plain(rounded), rounded == exact


def _terminates(value: Fraction) -> bool:
    bottom = value.denominator
    for prime in (2, 5):
        while bottom % prime == 0:
            bottom //= prime
    return bottom == 1


def _plain(number: Decimal) -> str:
    text = f"{number:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _say(value: Fraction, unit: Unit, places: int | None = None) -> str:
    """ "about 9.843 feet": four significant digits, or ``places`` decimals (temperatures: one)."""
    figure, exact = shown(value) if places is None else _rounded(value, places)
    name = unit.one if value == 1 else unit.many
    if unit.kind == "temperature" and unit.symbol != "K":
        name = unit.symbol
    return f"{'' if exact else 'about '}{figure} {name}"


def _rounded(value: Fraction, places: int) -> tuple[str, bool]:
    rounded = round(value, places)
    return _plain(Decimal(rounded.numerator) / Decimal(rounded.denominator)), rounded == value


def _basis(source: Unit, target: Unit) -> str:
    """The definition the conversion used: "conversion factor 1 ft = 0.3048 m" (one factor when it is neat)."""
    for big, small in ((source, target), (target, source)):
        ratio = big.size / small.size
        if ratio >= 1 and _terminates(ratio) and len(_decimal(ratio).replace(".", "").strip("0")) <= 10:
            return f"conversion factor 1 {big.symbol} = {_decimal(ratio)} {small.symbol}"
    base = _BASE[source.kind]
    factors = [f"1 {unit.symbol} = {_decimal(unit.size)} {base}" for unit in (source, target) if unit.symbol != base]
    return f"conversion factor{'s' if len(factors) > 1 else ''} {', '.join(factors)}"


def _decimal(value: Fraction) -> str:
    """A fraction as its exact decimal when it has one, else as a fraction ("5/18")."""
    if not _terminates(value):
        return str(value)
    with localcontext() as context:
        context.prec = 60
        return _plain(Decimal(value.numerator) / Decimal(value.denominator))


def _temperature_basis(source: Unit, target: Unit) -> str:
    formulas = {"°F": "°F = °C × 9/5 + 32", "K": "K = °C + 273.15"}
    used = [formulas[s] for s in sorted({source.symbol, target.symbol}) if s in formulas]
    return f"conversion {', '.join(used)}"
