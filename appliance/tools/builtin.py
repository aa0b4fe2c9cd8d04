"""Built-in tools, registered the same way any other tool is."""

from __future__ import annotations

import ast
import datetime as dt
import math
import operator
from typing import Any

from appliance.errors import ToolError
from appliance.health import read_health
from appliance.tools.registry import ToolRegistry

_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_FUNCS: dict[str, Any] = {"sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max, "log": math.log}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ToolError("exponent too large (at most 100)")
        result = _OPS[type(node.op)](left, right)
        if isinstance(result, complex):  # (-8) ** (1/3): float() would fail with a confusing TypeError
            raise ToolError("the result is not a real number")
        return float(result)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        if node.keywords:  # ignoring them would give a wrong answer: round(2.567, ndigits=1) -> 3
            raise ToolError(f"{node.func.id}() takes positional arguments only")
        return float(_FUNCS[node.func.id](*[_eval(a) for a in node.args]))
    raise ToolError(f"unsupported expression element: {ast.dump(node)[:60]}")


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly (+ - * / // % ** and sqrt, abs, round, min, max, log).

    Examples: what is 17 times 23; how much is 15 percent of 80; split 120 euros between 7 people

    Args:
        expression: the arithmetic to evaluate, for example "(17 + 4) * 3"
    """
    if len(expression) > 200:
        raise ToolError("expression too long (at most 200 characters)")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError:
        raise ToolError(f"not an arithmetic expression: {expression!r}") from None
    try:
        value = float(_eval(tree))  # a bare constant is an int, which has no is_integer() before 3.12
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except OverflowError:
        raise ToolError("the result is too large") from None
    except (ValueError, TypeError) as exc:  # sqrt(-1), log(0), max() or round(1, 2, 3)
        raise ToolError(f"cannot evaluate {expression!r}: {exc}") from None
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.10g}"


def current_time() -> str:
    """The current local date, time and time zone of the Pi.

    Examples: what time is it; what's the date today; which day of the week is it
    """
    now = dt.datetime.now().astimezone()
    return now.strftime("%A %d %B %Y, %H:%M:%S %Z (UTC%z)")


def system_health() -> dict[str, Any]:
    """The Pi's health: CPU temperature and throttling, load, memory, disk and uptime.

    Examples: how is the Pi doing; is the processor overheating; how much disk space is left
    """
    health = read_health().as_dict()
    if health["cpu_temperature_c"] is None:
        health["cpu_temperature_c"] = "not available"
    return health


def register(registry: ToolRegistry) -> None:
    """Register the built-in tools."""
    registry.register(calculator, read_only=True)
    registry.register(current_time, read_only=True)
    registry.register(system_health, read_only=True)


def default_registry() -> ToolRegistry:
    """A registry holding the built-in tools."""
    registry = ToolRegistry()
    register(registry)
    return registry
