"""Arithmetic, safely and exactly: the evaluator the calculator tool and the grounded answers share.

An expression is parsed by :mod:`ast` and only numbers, + - * / // % ** (``^`` too), brackets and
sqrt, abs, round, min, max, log are evaluated: no names, attributes or calls beyond those, so no
input can reach Python itself. Numbers are kept as fractions while they can be (``0.1 + 0.2`` is 3/10,
``123456789 * 987654321`` every digit of it); a square root that is not whole, a logarithm or a
fractional power gives a float. A result past what a float could hold is refused ("the result is too
large"), which also bounds the work a nested ``**`` can ask for.
"""

from __future__ import annotations

import ast
import math
import operator
from fractions import Fraction
from typing import Any

from appliance.errors import ToolError

Number = Fraction | float

MAX_EXPRESSION = 200  # characters
MAX_EXPONENT = 100
_LIMIT = 10**308  # about a float's largest value: the old calculator's range, and a bound on the work
_MAX_DIGITS = 40  # a whole result with more digits is shown as 1.234567890e+45

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


def _sqrt(x: Number) -> Number:
    if isinstance(x, Fraction) and x >= 0:
        top, bottom = math.isqrt(x.numerator), math.isqrt(x.denominator)
        if top * top == x.numerator and bottom * bottom == x.denominator:
            return Fraction(top, bottom)
    return math.sqrt(x)  # ValueError "math domain error" below zero


def _log(x: Number, *base: Number) -> float:
    return math.log(x, *base)


_FUNCS: dict[str, Any] = {"sqrt": _sqrt, "abs": abs, "round": round, "min": min, "max": max, "log": _log}


def _checked(value: Any) -> Number:
    if isinstance(value, complex):  # (-8) ** (1/3): float() would fail with a confusing TypeError
        raise ToolError("the result is not a real number")
    if isinstance(value, int):
        value = Fraction(value)
    if isinstance(value, Fraction):
        if abs(value.numerator) > _LIMIT * value.denominator:
            raise OverflowError
        if value.denominator > _LIMIT:  # a tiny fraction: exactness is not worth its size
            return float(value)
        return value
    if math.isinf(value):
        raise OverflowError
    return float(value)


def _power(left: Number, right: Number) -> Any:
    if abs(float(right)) > MAX_EXPONENT:
        raise ToolError(f"exponent too large (at most {MAX_EXPONENT})")
    if isinstance(left, Fraction) and isinstance(right, Fraction) and right.denominator == 1:
        return left ** int(right)
    return float(left) ** float(right)


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        # the decimal as written (2.567 is 2567/1000), not the binary float nearest to it
        return _checked(Fraction(repr(node.value)) if isinstance(node.value, float) else node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            return _checked(_power(left, right))
        return _checked(_OPS[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _checked(_OPS[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        if node.keywords:  # ignoring them would give a wrong answer: round(2.567, ndigits=1) -> 3
            raise ToolError(f"{node.func.id}() takes positional arguments only")
        return _checked(_FUNCS[node.func.id](*[_eval(a) for a in node.args]))
    raise ToolError(f"unsupported expression element: {ast.dump(node)[:60]}")


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression; a ToolError says why when it has none."""
    if len(expression) > MAX_EXPRESSION:
        raise ToolError(f"expression too long (at most {MAX_EXPRESSION} characters)")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError:
        raise ToolError(f"not an arithmetic expression: {expression!r}") from None
    try:
        return _eval(tree)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except OverflowError:
        raise ToolError("the result is too large") from None
    except (ValueError, TypeError) as exc:  # sqrt(-1), log(0), max() or round(1, 2, 3)
        raise ToolError(f"cannot evaluate {expression!r}: {exc}") from None


def is_exact(value: Number, shown: str) -> bool:
    """Whether ``shown`` (from :func:`format_number`) is the value itself, not a rounding of it."""
    if isinstance(value, float):
        return value.is_integer() and "e" not in shown
    try:
        return Fraction(shown) == value
    except ValueError:
        return False


def format_number(value: Number) -> str:
    """A whole number with every digit (up to 40 of them), else ten significant digits."""
    if isinstance(value, Fraction) and value.denominator == 1 and len(str(abs(value.numerator))) <= _MAX_DIGITS:
        return str(value.numerator)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{float(value):.10g}"
