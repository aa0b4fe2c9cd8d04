"""The tool registry (schemas from signatures, failures as results) and the built-in tools."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
from collections.abc import Iterator
from typing import Any, Literal, Optional

import pytest

from appliance.errors import ToolError, UnknownToolError
from appliance.tools import builtin
from appliance.tools.registry import MAX_OUTPUT_CHARS, ToolRegistry, tool_from_function
from appliance.tools.result import ToolResult


def run(registry: ToolRegistry, name: str, arguments: Any, timeout_s: float = 5.0) -> ToolResult:
    return asyncio.run(registry.execute(name, arguments, timeout_s=timeout_s))


# --- schemas -------------------------------------------------------------------------------------


def forecast(
    city: str,
    days: int,
    unit: Literal["c", "f"] = "c",
    hours: list[int] | None = None,
    note: Optional[str] = None,  # noqa: UP045 - typing.Optional must work as well as X | None
    ratio: float = 1.0,
    detailed: bool = False,
) -> str:
    """Forecast the weather for a city.

    Longer explanation that is not part of the description.

    Args:
        city: the city's name
        days (int): how many days ahead
        unit: temperature unit

    Returns:
        the forecast text
    """
    return f"{city} {days}"


def test_the_schema_comes_from_the_signature_and_docstring() -> None:
    tool = tool_from_function(forecast)
    assert tool.name == "forecast"
    assert tool.description == "Forecast the weather for a city."
    params = tool.parameters
    assert params["type"] == "object" and params["additionalProperties"] is False
    props = params["properties"]
    assert list(props) == ["city", "days", "unit", "hours", "note", "ratio", "detailed"]
    assert props["city"] == {"type": "string", "description": "the city's name"}
    assert props["days"] == {"type": "integer", "description": "how many days ahead"}
    assert props["unit"]["enum"] == ["c", "f"] and props["unit"]["description"] == "temperature unit"
    # Optional values may be null: a model that sends null for them is not refused.
    assert props["hours"]["anyOf"] == [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]
    assert props["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert props["ratio"]["type"] == "number" and props["ratio"]["default"] == 1.0
    assert props["detailed"]["type"] == "boolean"
    assert params["required"] == ["city", "days"]
    assert "Returns" not in props and "description" not in props["note"]
    assert tool.schema() == {"name": "forecast", "description": tool.description, "parameters": params}


def test_a_function_without_a_docstring_is_described_by_its_name() -> None:
    def look_up_price(item: str) -> str:
        return item

    assert tool_from_function(look_up_price).description == "look up price"
    tool = tool_from_function(look_up_price, name="price", read_only=True)
    assert tool.name == "price" and tool.description == "price" and tool.read_only


def test_an_untyped_parameter_is_refused() -> None:
    def untyped(x, y: int) -> int:  # type: ignore[no-untyped-def]
        return y

    with pytest.raises(TypeError, match="parameter x needs a type hint"):
        tool_from_function(untyped)


@pytest.mark.parametrize("signature", ["*args: int", "**kwargs: int"])
def test_star_args_are_refused(signature: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"def star(a: int, {signature}) -> int:\n    return a", namespace)
    with pytest.raises(TypeError, match=r"\*args/\*\*kwargs"):
        tool_from_function(namespace["star"])


def test_a_type_json_cannot_describe_is_refused() -> None:
    def takes_bytes(data: bytes) -> str:
        return ""

    with pytest.raises(TypeError, match="parameter data"):
        tool_from_function(takes_bytes)


def test_a_duplicate_name_is_refused() -> None:
    registry = ToolRegistry()

    @registry.register
    def ping() -> str:
        """Answer pong."""
        return "pong"

    def other() -> str:
        return "x"

    with pytest.raises(ValueError, match="ping is registered already"):
        registry.register(other, name="ping")
    assert len(registry) == 1 and registry.get("ping").function is ping


def test_register_as_a_decorator_with_options_returns_the_function() -> None:
    registry = ToolRegistry()

    @registry.register(name="renamed", read_only=True)
    def original(a: int) -> int:
        """Echo a."""
        return a

    assert original(3) == 3
    assert [t.name for t in registry] == ["renamed"] and registry.get("renamed").read_only


def test_get_of_an_unknown_tool_lists_the_known_ones() -> None:
    with pytest.raises(UnknownToolError) as info:
        builtin.default_registry().get("nope")
    assert str(info.value) == "no tool named 'nope'"
    assert info.value.fix == "known tools: calculator, current_time, system_health"


# --- execute: every failure is a result ----------------------------------------------------------


@pytest.fixture
def registry() -> Iterator[ToolRegistry]:
    """A registry with tools that behave and misbehave."""
    registry = ToolRegistry()

    @registry.register
    def add(a: int, b: int = 1) -> int:
        """Add two integers."""
        return a + b

    @registry.register
    def scale(x: float, how: Literal["up", "down"] = "up", tags: list[str] | None = None) -> dict[str, Any]:
        """Scale a number."""
        return {"x": x * 2 if how == "up" else x / 2, "tags": tags or []}

    @registry.register
    def explode() -> str:
        """Raise a bug."""
        raise ValueError("boom")

    @registry.register
    def refuse() -> str:
        """Fail on purpose."""
        raise ToolError("the door is locked", fix="use the key")

    @registry.register
    async def quick_async(text: str) -> str:
        """Answer at once."""
        return text.upper()

    @registry.register
    def chatty(n: int) -> str:
        """Say a lot."""
        return "x" * n

    yield registry


def test_a_good_call_is_ok(registry: ToolRegistry) -> None:
    result = run(registry, "add", {"a": 2, "b": 40})
    assert result.ok and result.output == "42" and result.error is None
    assert result.for_model() == "42"
    assert result.as_dict()["result"] == "42" and result.as_dict()["ok"] is True
    assert run(registry, "add", {"a": 2}).output == "3"
    assert run(registry, "quick_async", {"text": "hi"}).output == "HI"


def test_an_unknown_tool_is_a_result_listing_the_known_ones(registry: ToolRegistry) -> None:
    result = run(registry, "nope", {})
    assert not result.ok
    assert result.error is not None and result.error.startswith("no tool named 'nope'; known tools: add, chatty")
    assert result.for_model() == f"ERROR: {result.error}"
    assert result.as_dict()["result"] is None


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("add", {}, "missing required argument(s): a"),
        ("add", {"a": 1, "c": 2}, "unknown argument(s) c; add takes a, b"),
        ("add", {"a": "1"}, 'a must be integer, got "1"'),
        ("add", {"a": True}, "a must be integer, got true"),
        ("add", {"a": 1.5}, "a must be integer, got 1.5"),
        ("scale", {"x": False}, "x must be number, got false"),
        ("scale", {"x": 1, "how": "sideways"}, "how must be one of ['up', 'down'], got 'sideways'"),
        ("scale", {"x": 1, "tags": ["a", 2]}, "tags[1] must be string, got 2"),
        ("add", [1, 2], "arguments must be a JSON object"),
        ("add", None, "arguments must be a JSON object"),
    ],
)
def test_bad_arguments_are_a_readable_result(registry: ToolRegistry, name: str, arguments: Any, error: str) -> None:
    result = run(registry, name, arguments)
    assert not result.ok and result.output == ""
    assert result.error == error
    assert isinstance(result.arguments, dict)


def test_a_tool_that_raises_is_a_result(registry: ToolRegistry) -> None:
    result = run(registry, "explode", {})
    assert not result.ok and result.error == "ValueError: boom"
    result = run(registry, "refuse", {})
    assert not result.ok and result.error == "the door is locked"


def test_a_sync_tool_past_its_timeout_is_a_result(registry: ToolRegistry) -> None:
    release, returned = threading.Event(), threading.Event()

    @registry.register
    def blocked() -> str:
        """Block a thread until the test lets it go."""
        release.wait(60)
        returned.set()
        return "late"

    # asyncio.run returns while the tool still blocks: the abandoned thread does not hold up the loop's shutdown.
    result = asyncio.run(registry.execute("blocked", {}, timeout_s=0.2))
    try:
        assert not returned.is_set()
        assert not result.ok and result.error == "timed out after 0.2 s"
        assert result.duration_s >= 0.15  # it did wait for the tool, up to its timeout
    finally:
        release.set()
    assert returned.wait(10)  # the thread ends once let go


def test_an_async_tool_past_its_timeout_is_a_result(registry: ToolRegistry) -> None:
    cancelled = threading.Event()

    @registry.register
    async def sleepy() -> str:
        """Sleep on the loop far past any timeout."""
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    result = run(registry, "sleepy", {}, timeout_s=0.2)
    assert not result.ok and result.error == "timed out after 0.2 s"
    assert cancelled.is_set()  # cut at its timeout, not awaited to its end


def test_a_dict_result_is_json(registry: ToolRegistry) -> None:
    result = run(registry, "scale", {"x": 3, "tags": ["a"]})
    assert result.ok and json.loads(result.output) == {"x": 6, "tags": ["a"]}


def test_long_output_is_truncated_with_a_note(registry: ToolRegistry) -> None:
    result = run(registry, "chatty", {"n": MAX_OUTPUT_CHARS + 500})
    assert result.ok
    body, note = result.output.split("\n", 1)
    assert body == "x" * MAX_OUTPUT_CHARS
    assert note == f"[output truncated: {MAX_OUTPUT_CHARS + 500} characters in all]"
    assert run(registry, "chatty", {"n": MAX_OUTPUT_CHARS}).output == "x" * MAX_OUTPUT_CHARS


# --- built-in tools ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "answer"),
    [
        ("(17 + 4) * 3", "63"),
        ("2 ** 10", "1024"),
        ("2^10", "1024"),
        ("42", "42"),
        ("-7", "-7"),
        ("7 / 2", "3.5"),
        ("7 // 2", "3"),
        ("10 % 4", "2"),
        ("sqrt(16) + abs(-2)", "6"),
        ("round(2.567, 1)", "2.6"),
        ("max(1, 5, 3)", "5"),
        ("1 / 3", "0.3333333333"),
        # exact: fractions stay fractions, whole numbers keep every digit
        ("0.1 + 0.2", "0.3"),
        ("1/3 + 1/6", "0.5"),
        ("(1/3) * 3", "1"),
        ("123456789 * 987654321", "121932631112635269"),
        ("2 ** 100", "1267650600228229401496703205376"),
        ("sqrt(2)", "1.414213562"),
        ("sqrt(1/4)", "0.5"),
        ("2 ** -2", "0.25"),
    ],
)
def test_calculator_answers(expression: str, answer: str) -> None:
    result = run(builtin.default_registry(), "calculator", {"expression": expression})
    assert result.ok, result.error
    assert result.output == answer


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("1/0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("__import__('os')", "unsupported expression element"),
        ("open('/etc/passwd').read()", "unsupported expression element"),
        ("(1).__class__", "unsupported expression element"),
        ("'a' * 3", "unsupported expression element"),
        ("True + 1", "unsupported expression element"),
        ("2 ** 101", "exponent too large (at most 100)"),
        ("9 ** 9 ** 9", "exponent too large (at most 100)"),
        ("2 +", "not an arithmetic expression"),
        ("1" * 201, "expression too long"),
        ("sqrt(-1)", "math domain error"),
        ("(1e300) ** 2", "the result is too large"),
        ("((10 ** 100) ** 100) ** 100", "the result is too large"),  # refused at the first step past the range
        ("(-8) ** (1/3)", "the result is not a real number"),
        ("round(2.567, ndigits=1)", "round() takes positional arguments only"),
        ("max()", "cannot evaluate"),
    ],
)
def test_calculator_refuses(expression: str, error: str) -> None:
    result = run(builtin.default_registry(), "calculator", {"expression": expression})
    assert not result.ok
    assert result.error is not None and error in result.error
    # Refusals are the calculator's own ToolErrors, not a tool bug surfacing as "SomeError: ...".
    assert not result.error.split(":")[0].endswith("Error")


def test_calculator_raises_tool_errors_when_called_directly() -> None:
    with pytest.raises(ToolError, match="division by zero"):
        builtin.calculator("1/0")


def test_current_time_is_now() -> None:
    result = run(builtin.default_registry(), "current_time", {})
    assert result.ok
    now = dt.datetime.now().astimezone()
    assert str(now.year) in result.output and now.strftime("%B") in result.output
    stamp = dt.datetime.strptime(result.output.split(",")[1].strip()[:8], "%H:%M:%S")
    apart = abs(
        (stamp.hour * 3600 + stamp.minute * 60 + stamp.second) - (now.hour * 3600 + now.minute * 60 + now.second)
    )
    assert min(apart, 86400 - apart) < 60  # around midnight the clock wraps


def test_system_health_is_plausible() -> None:
    result = run(builtin.default_registry(), "system_health", {})
    assert result.ok
    health = json.loads(result.output)
    load = health["load"]
    assert len(load) == 3 and all(isinstance(x, int | float) and x >= 0 for x in load)
    assert 0 <= health["disk_free_gb"] <= health["disk_total_gb"]
    temp = health["cpu_temperature_c"]
    assert temp == "not available" or -40 < temp < 130
    assert 0 <= health["memory_available_mb"] <= health["memory_total_mb"]
    assert health["uptime_s"] > 0
    assert health["throttled"] is None or isinstance(health["throttled"], dict)


def test_the_builtins_are_registered_read_only() -> None:
    registry = builtin.default_registry()
    assert [t.name for t in registry] == ["calculator", "current_time", "system_health"]
    assert all(t.read_only for t in registry)
    assert registry.get("calculator").parameters["required"] == ["expression"]
    assert registry.get("calculator").parameters["properties"]["expression"]["description"]
