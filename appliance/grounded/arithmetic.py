"""Plain arithmetic, exact, worked out on the Pi by the calculator's own evaluator (:mod:`appliance.arithmetic`).

Asked in words or symbols: "what is 17 times 23", "17*23", "how much is 15 percent of 80", "what's 2 to
the power of 10", "the square root of 144", "1/3 + 1/6", "multiply 17 by 23", "85 minus 20 percent" (85
less a fifth of it), "a third of 90", "split 120 euros between 7 people". The words
are read into an expression token by token (numbers in digits or words up to the billions, operators
said or written, brackets, "square root of", "percent of"); a message is taken only when every word of
it is part of the sum, after a "what is" or "calculate" before it, so "what is love", "what is 5G", "I
have 2 cats", "set the light to 50 percent" or "call me at 555 1234" are not. A bare "24/12" or
"2026-11-27" reads as a date, not a division: it is taken only after "what is" or "calculate". Unit
conversions are :mod:`appliance.grounded.units`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from fractions import Fraction

from appliance.arithmetic import Number, evaluate, format_number, is_exact
from appliance.errors import ToolError
from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults

BASIS = "calculated on the Pi"
_LONGEST = 40  # words: a longer message brought by meaning is not searched for a sum within it

_NUMBER = r"(?:\d+(?:\.\d+)?|\.\d+)"
# said or written operators, longest first; each with what it means in the expression
_WORDS: tuple[tuple[str, str], ...] = (
    (r"to the power of|to the power|raised to(?: the power of)?|\*\*|\^", "**"),
    (r"multiplied by|times|x|×|\*", "*"),
    (r"divided by|over|÷|/", "/"),
    (r"plus|\+", "+"),
    (r"minus|take away|less|−|–|-", "-"),
    (r"modulo|mod", "%"),
    (r"squared", "**2"),
    (r"cubed", "**3"),
    (r"(?:the )?(?:square root|sqrt) of|sqrt|√", "sqrt"),
    (r"(?:percent|per cent|%) of", "/100*"),
    (r"\(", "("),
    (r"\)", ")"),
)
_TOKEN = re.compile(
    rf"\s*(?:(?P<number>{_NUMBER})|" + "|".join(f"(?P<w{i}>{words})" for i, (words, _) in enumerate(_WORDS)) + r")"
)
_ASKING = re.compile(
    r"(?:(?:hey|hi|ok|okay|so)(?: \w+)? )?(?:please )?(?:(?:can|could) you (?:please )?)?"
    r"(?P<asking>what(?:'s| is| are| does)|whats|how much (?:is|are|does)|calculate|compute|work out|solve|"
    r"evaluate|tell me)? ?(?P<body>.+?)"
    r"(?: ?(?:=|equal|equals|make|makes|come to|comes to|give|please|exactly|for me|is what|is how much|what))*"
)
# "15% tip on $62, how much is that", "what's a 20 percent discount on 45 euros"
_TIP = re.compile(
    r"^(?:what(?:'s| is) )?(?:a |the )?(?P<pct>\d+(?:\.\d+)?) ?(?:%|percent|per cent)"
    r" (?:tip|discount|service|off|vat|tax)"
    r" (?:on|of|for) (?:a |the )?[$€£]?(?P<amount>\d+(?:\.\d+)?)(?: ?(?:euros?|dollars?|pounds?|bill))?"
    r"(?: how much (?:is|would be) (?:that|it))?$"
)
# "add up 23.50, 12.75 and 8.20", "what's the total of 3, 4 and 5": a list of numbers summed
_ADD_UP = re.compile(
    r"(?:(?:can|could) you (?:please )?)?(?:please )?(?:add up|add together|sum up|total up|add|what(?:'s| is) the"
    r" (?:total|sum) of|total) (?P<numbers>\d+(?:\.\d+)?(?: (?:\d+(?:\.\d+)?))*(?: (?:and|&|plus) \d+(?:\.\d+)?))"
    r"(?: together)?(?: for me| please)*"
)
_DATE_LIKE = re.compile(r"\d+(?:[/.-]\d+)+")
_GLUED_X = re.compile(r"\dx\d")  # a hex number or a size (0x76, 1280x900) when not asked for as a product
_AMOUNT = r"\d{1,15}(?:\.\d{1,6})?"  # a bill to split: up to a quadrillion
_MONEY = r"(?: ?(?P<currency>euros?|dollars?|pounds?|eur|usd|gbp|francs?|crowns?|€|\$|£))?"
_SPLIT_AMONG = re.compile(  # "if 4 people split 84 euros, how much does each pay"
    rf"(?:if )?(?P<people>\d+) (?:people|persons|friends|of us) (?:split|share|divide) (?:the bill of |a bill of |)?"
    rf"(?P<before>[€$£])?(?P<amount>{_AMOUNT}){_MONEY}"
    r"(?: how much (?:does|do|should|will|would) (?:each|everyone|each person|each of us|we each|each one)"
    r"(?: of (?:us|them))? (?:pay|get|owe|put in))?"
)
_SPLIT = re.compile(
    rf"(?:can you |please |if (?:we|you|i) |when (?:we|you) |we )*(?:split|divide|share)"
    rf" (?:the bill of |a bill of |the |a |an )?(?P<before>[€$£])?"
    rf"(?P<amount>{_AMOUNT}){_MONEY}(?: (?:bill|check|cheque|total|tab))?"
    rf"(?: (?:between|among|amongst) (?P<people>\d+)(?: (?:people|persons|friends|of us|ways))?"
    rf"| (?:by|across|over|for|into) (?P<ways>\d+) (?:people|persons|friends|of us|ways))"
    r"(?: how much (?:(?:does|do|should|will|would) )?(?:each|everyone|each person|each of us|we each|each one)"
    r"(?: of (?:us|them))?(?: (?:pay|get|owe|put in))?)?"
)


@dataclass
class _Arithmetic(TopicDefaults):
    """The arithmetic topic (see the module docstring)."""

    kind: str = "arithmetic"
    unsure: str = "I could not read a sum in that, and I won't guess: write it with numbers and signs, like 1250 - 478."
    near_exact: bool = True  # its answer reads the words again, strictly: trusted near it too

    def match(self, text: str) -> Ask | None:
        """An Ask when the whole message is a sum (after "what is" or "calculate"), or a bill to split."""
        said = _normalise(text)
        on_that = _ON_THAT.fullmatch(digits_for_words(said))  # "and add 6 to that": the last answer's number
        if on_that and (on_that["on"] or said.startswith(("and ", "now ", "then "))):
            operation = next(op for op, pattern in _ON_THAT_OPS if re.match(pattern, on_that["verb"]))
            return Ask(self.kind, "on_that", {"op": operation, "n": on_that["n"]}, text=text)
        if part := _PART_OF_THAT.fullmatch(said):  # "and half of that, please?": 48 then 24
            operation, n = _PART_OPS[part["part"]]
            return Ask(self.kind, "on_that", {"op": operation, "n": n}, text=text)
        # "if I take 387 away from 1000 what is left": the sum inside the question's frame
        said = _FRAME.sub(r"\g<body>", said)
        # "seven eighths as a decimal": a fraction in words
        if decimal := _AS_DECIMAL.fullmatch(digits_for_words(said)):
            said = _fraction(decimal)
        split = _SPLIT.fullmatch(said) or _SPLIT_AMONG.fullmatch(digits_for_words(said))
        if split:
            return Ask(self.kind, "split", {k: v for k, v in split.groupdict().items() if v}, text=text)
        if tip := _TIP.search(said):  # "15% tip on $62, how much is that"
            percent = f"{tip['pct']} / 100 * {tip['amount']}"
            return Ask(
                self.kind, "sum", {"expression": percent, "said": f"{tip['pct']}% of {tip['amount']}"}, text=text
            )
        if added := _ADD_UP.fullmatch(digits_for_words(said)):
            numbers = re.findall(r"\d+(?:\.\d+)?", added["numbers"])
            return Ask(self.kind, "sum", {"expression": " + ".join(numbers), "said": " + ".join(numbers)}, text=text)
        asked = _ASKING.fullmatch(said)
        if asked is None:
            return None
        body = asked["body"]
        written, shown = _verbs(digits_for_words(body))
        expression = expression_of(written)
        if expression is None:
            return None
        body = shown or body
        if not asked["asking"] and (_DATE_LIKE.fullmatch(body) or _GLUED_X.search(body)):
            return None  # "24/12", "555-1234", "0x76", "1280x900": a date, a number, a size, unless asked as a sum
        return Ask(self.kind, "sum", {"expression": expression, "said": body}, text=text)

    def _within(self, text: str) -> Ask | None:
        """By meaning: the longest run of three words or more in the message that is a sum ("what do I get if I
        multiply 17 by 23" -> 17*23); none in a message of more than _LONGEST words."""
        words = digits_for_words(_normalise(text)).split()
        if len(words) > _LONGEST:
            return None
        best: tuple[int, str, str] | None = None
        for start in range(len(words)):
            for end in range(len(words), start + 2, -1):
                written, shown = _verbs(" ".join(words[start:end]))
                expression = expression_of(written)
                said = shown or " ".join(words[start:end])
                if expression is not None and (best is None or end - start > best[0]):
                    best = (end - start, expression, said)
                    break
        if best is None or _DATE_LIKE.fullmatch(best[2]):
            return None
        return Ask(self.kind, "sum", {"expression": best[1], "said": best[2]}, text=text, by_meaning=True)

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The exact result; None when a message brought by meaning holds no sum after all."""
        if not ask.what:
            found = self.match(ask.text) or self._within(ask.text)
            if found is None:
                return None
            ask = found
        if ask.what == "split":
            return _split(ask.details, self.kind)
        if ask.what == "on_that":
            return await _on_that(ask.details, facts)
        try:
            value = evaluate(ask.details["expression"])
        except ToolError as exc:
            return Answer(f"I cannot work that out: {exc}.", basis=BASIS, kind=self.kind)
        shown = format_number(value)
        said = ask.details["said"]
        return Answer(f"{said[0].upper()}{said[1:]} is {_exactly(value, shown)}.", basis=BASIS, kind=self.kind)


ARITHMETIC = _Arithmetic()


def _normalise(text: str) -> str:
    text = text.lower().replace("’", "'").strip()
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,000 is a thousand
    text = re.sub(r"[?!,;]+|(?<!\d):|:(?!\d)|\.+$|\.(?=\s)", " ", text)  # 18:00 stays a time
    return " ".join(text.split())


_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9}
# which kind of number word may follow which: "twenty three" yes, "three twenty" or "one two" no
_FOLLOWS = {
    "unit": {"start", "tens", "hundred", "scale", "and"},
    "teen": {"start", "hundred", "scale", "and"},
    "tens": {"start", "hundred", "scale", "and"},
    "hundred": {"unit", "teen"},
    "scale": {"unit", "teen", "tens", "hundred"},
    "and": {"hundred", "scale"},
}


def _kind(word: str) -> str:
    if word in _UNITS:
        return "unit"
    if word in _TEENS:
        return "teen"
    if word in _TENS:
        return "tens"
    if word == "hundred":
        return "hundred"
    if word in _SCALES:
        return "scale"
    return "and" if word == "and" else ""


def digits_for_words(text: str) -> str:
    """Numbers said in words written in digits: "seventeen times twenty-three" -> "17 times 23"."""
    words = re.sub(rf"\b({'|'.join(_TENS)})-(?=(?:{'|'.join(_UNITS)})\b)", r"\1 ", text).split()
    out: list[str] = []
    at = 0
    while at < len(words):
        end, value = _number_at(words, at)
        if end == at:
            out.append(words[at])
            at += 1
        else:
            out.append(str(value))
            at = end
    # "3 and a half hours", "2 and a quarter": the fraction joined to its number
    joined = " ".join(out)
    for said, part in ((r"and a half", ".5"), (r"and a quarter", ".25"), (r"and three quarters", ".75")):
        joined = re.sub(rf"\b(\d+) {said}\b", rf"\g<1>{part}", joined)
    return joined


def _number_at(words: list[str], at: int) -> tuple[int, int]:
    """Where the number said from ``at`` ends, and its value (``at``, 0 when none starts there)."""
    total = current = 0
    last = "start"
    end = at
    i = at
    while i < len(words):
        word = words[i]
        if word == "a" and last == "start" and i + 1 < len(words) and _kind(words[i + 1]) in ("hundred", "scale"):
            current, last, i = 1, "unit", i + 1
            continue
        kind = _kind(word)
        if not kind or last not in _FOLLOWS[kind]:
            break
        if kind == "unit":
            current += _UNITS.index(word)
        elif kind == "teen":
            current += 10 + _TEENS.index(word)
        elif kind == "tens":
            current += 20 + 10 * _TENS.index(word)
        elif kind == "hundred":
            current *= 100
        elif kind == "scale":
            total, current = total + current * _SCALES[word], 0
        last = kind
        i += 1
        if kind != "and":
            end = i
    return end, total + current


def expression_of(words: str) -> str | None:
    """The expression ``words`` say ("17 times 23" -> "17*23"), or None when any word is not part of a sum."""
    out: list[str] = []
    at = 0
    operators = 0
    while at < len(words):
        found = _TOKEN.match(words, at)
        if found is None or found.end() == at:
            return None
        at = found.end()
        if found["number"]:
            out.append(found["number"])
            continue
        index = int(next(name for name, value in found.groupdict().items() if value and name != "number")[1:])
        meaning = _WORDS[index][1]
        if meaning == "sqrt":
            number = re.compile(rf"\s*({_NUMBER})").match(words, at)
            if number:  # "square root of 144": the call's brackets are not said
                out.append(f"sqrt({number[1]})")
                at = number.end()
            else:
                out.append("sqrt")
        else:
            out.append(meaning)
        operators += meaning not in ("(", ")")
    # spaced, so that two numbers side by side ("2026-11-24 18 00", "555 1234") are no sum rather than one
    expression = " ".join(out)
    if not operators or len(expression) > 200:
        return None
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:  # "what is 5 minus": words of a sum, but not one
        return None
    if not any(isinstance(node, ast.BinOp | ast.Call) for node in ast.walk(tree)):
        return None  # "-7", "+3": a number with its sign
    return expression


_VERBS = (  # "multiply 17 by 23": the operation said before its numbers, and how the answer writes it
    (re.compile(rf"(?:multiply|times) ({_NUMBER}) (?:by|and|with) ({_NUMBER})"), r"\1 × \2"),
    (re.compile(rf"divide ({_NUMBER}) by ({_NUMBER})"), r"\1 ÷ \2"),
    (re.compile(rf"(?:add|sum) ({_NUMBER}) (?:to|and) ({_NUMBER})"), r"\1 + \2"),
    (re.compile(rf"(?:subtract|take) ({_NUMBER}) (?:away )?from ({_NUMBER})"), r"\2 − \1"),
)


_PERCENT = r"(?: ?(?:percent|per cent|%))"
_CHANGES = (  # a percentage added or taken off: "85 minus 20 percent" is 85 less a fifth of it
    (re.compile(rf"({_NUMBER}) (?:minus|less|-|take away) ({_NUMBER}){_PERCENT}"), r"\1 × (1 − \2/100)"),
    (re.compile(rf"({_NUMBER}) (?:plus|\+|and|with) ({_NUMBER}){_PERCENT}"), r"\1 × (1 + \2/100)"),
    (re.compile(rf"({_NUMBER}){_PERCENT} off (?:of )?({_NUMBER})"), r"\2 × (1 − \1/100)"),
)
_PARTS = {"half": 2, "halves": 2, "third": 3, "quarter": 4, "fourth": 4, "fifth": 5, "sixth": 6}
_PARTS.update(seventh=7, eighth=8, ninth=9, tenth=10)


# "and add 6 to that", "times it by 3", "now divide that by 4": a sum on the number of the last answer
_ON_THAT = re.compile(
    r"(?:and |now |then |ok |okay )?(?P<verb>add|take away|take|subtract|minus|plus|times|multiply|divide)"
    rf"(?: (?:it|that))?(?: by| away)? (?P<n>{_NUMBER})(?P<on>(?: away)? (?:to|from|onto|off) (?:it|that))?"
)
# "and half of that, please?", "what's double that", "a quarter of it": a part or a multiple of the last answer
_PART_OF_THAT = re.compile(
    r"(?:and |now |then |ok |okay |so )?(?:what(?:'s| is) |how much is |whats )?"
    r"(?P<part>half|a half|a third|one third|a quarter|one quarter|double|twice|triple) (?:of )?(?:that|it)"
    r"(?: (?:please|pls|then))?"
)
_PART_OPS = {"half": ("/", "2"), "a half": ("/", "2"), "a third": ("/", "3"), "one third": ("/", "3")}
_PART_OPS.update({"a quarter": ("/", "4"), "one quarter": ("/", "4"), "double": ("*", "2"), "twice": ("*", "2")})
_PART_OPS["triple"] = ("*", "3")
_ON_THAT_OPS = (("+", "add|plus"), ("-", "take|subtract|minus"), ("*", "times|multiply"), ("/", "divide"))
_LAST_RESULT = re.compile(r"\bis (?:about |exactly )?(-?\d[\d,]*(?:\.\d+)?)")


async def _on_that(details: dict[str, str], facts: Facts) -> Answer:
    """The sum on the number my last answer gave ("12 times 12 is 144." then "and add 6 to that": 150), or that
    there is none to go on from."""
    last = None
    if facts.db is not None and facts.conversation is not None:
        stored = await facts.db.call(facts.db.recent_messages, facts.conversation, 6)
        last = next((m.content for m in reversed(stored) if m.role == "assistant"), None)
    results = _LAST_RESULT.findall(last or "")
    if not results:
        return Answer(
            "I don't know which number you mean: my last answer gave none. Ask me the whole sum (e.g. 144 + 6).",
            basis="this chat's stored messages: no number in my last answer",
            kind="arithmetic",
        )
    before = results[-1].replace(",", "")
    expression = f"{before} {details['op']} {details['n']}"
    value = evaluate(expression)
    shown = f"{before} {details['op'].replace('*', '×').replace('/', '÷').replace('-', '−')} {details['n']}"
    return Answer(f"{shown} is {_exactly(value, format_number(value))}.", basis=BASIS, kind="arithmetic")


def _fraction(found: re.Match[str]) -> str:
    """ "7 eighths" as "7 / 8", "a quarter" as "1 / 4"."""
    count = "1" if found["n"] in ("a", "an", "one") else found["n"]
    return f"{count} / {_PARTS[found['part']]}"


_FRAME = re.compile(
    r"^(?:if|when) (?:i|you|we) (?P<body>(?:take|subtract|add|multiply|divide|split) .+?)"
    r",? (?:what(?:'s| is| do (?:i|you|we) get)|how much (?:is|do (?:i|you|we) have)) (?:left|over|remaining)?$"
)
_AS_DECIMAL = re.compile(
    rf"^(?:what(?:'s| is) )?(?P<n>\d+|a|an|one) (?P<part>{'|'.join(sorted(_PARTS, key=len, reverse=True))})s?"
    r" (?:as|in|to) (?:a )?decimals?(?: please)?$"
)
_PART = re.compile(rf"\b(?:(a|an|one|\d+) )?({'|'.join(sorted(_PARTS, key=len, reverse=True))})s? of\b")


def _verbs(words: str) -> tuple[str, str]:
    """What :func:`expression_of` reads for ``words`` ("a third of 90": "1/3 × 90"), and how the answer says
    the sum when not as it was asked ("multiply 17 by 23": "17 × 23"; else "")."""
    for pattern, written in _VERBS:
        if pattern.fullmatch(words):
            said = pattern.sub(written, words)
            return said, said
    for pattern, written in _CHANGES:
        if pattern.fullmatch(words):
            return pattern.sub(written, words), ""
    return _PART.sub(_part, words), ""


def _part(found: re.Match[str]) -> str:
    count = found[1] if found[1] and found[1][0].isdigit() else "1"
    return f"{count}/{_PARTS[found[2]]} ×"


def _exactly(value: Number, shown: str) -> str:
    if is_exact(value, shown):
        return shown
    if isinstance(value, Fraction) and value.denominator <= 1000:
        return f"{value.numerator}/{value.denominator}, about {shown}"
    return f"about {shown}"


def _split(details: dict[str, str], kind: str) -> Answer:
    amount, people = Fraction(details["amount"]), int(details.get("people") or details["ways"])
    unit = _unit(details.get("currency") or details.get("before") or "")
    if people == 0:
        return Answer("Split between nobody, there is nothing to share.", basis=BASIS, kind=kind)
    each = amount / people
    if not unit:
        shown = format_number(each)
        return Answer(f"{_exactly(each, shown)} each.".capitalize(), basis=BASIS, kind=kind)
    cents = round(each * 100)
    money = f"{cents // 100}" if cents % 100 == 0 else f"{cents / 100:.2f}"
    if each * 100 == cents:
        return Answer(f"{money} {unit} each.", basis=BASIS, kind=kind)
    said = f"{format_number(amount)} / {people} = {float(each):.6g}…"
    return Answer(f"About {money} {unit} each ({said}).", basis=BASIS, kind=kind)


def _unit(currency: str) -> str:
    names = {"€": "euros", "$": "dollars", "£": "pounds", "eur": "euros", "usd": "dollars", "gbp": "pounds"}
    name = names.get(currency, currency)
    return name if not name or name.endswith("s") else name + "s"
