"""The tool registry: a tool is a plain typed function; its JSON schema comes from the signature.

``ToolRegistry.execute`` never raises for a tool's own failure: bad arguments, an exception, a
timeout or a spent turn budget all become a :class:`ToolResult` with ``ok=False`` that the model can read
and act on. Every result passes the plugin hooks, is cut to ``max_output_chars`` and has the secrets
file's values redacted before anyone sees it; read-only tools' results are reused for ``cache_s``.

Each result also says whether it brought outside text into the turn (a tool registered with
``outside=``, an answer returned as :class:`~appliance.tools.trust.OutsideText` or a failure raised as
:class:`~appliance.tools.trust.OutsideError`), and the turn's
:class:`~appliance.tools.trust.TurnTrust` records it, a cached answer and a failure alike. While a tool
runs, :func:`current_turn` gives it the turn it runs in (a context variable, so tools stay plain
functions): device_set and web_fetch read there whether outside content is already in the turn.

A tool named in ``tools.require_approval`` does not run when called: the registry's ``gate``
(:class:`appliance.tools.approvals.ToolApprovals`) stores the call for a person and answers with its
approval id; only a person's approval runs it, through ``execute(..., approved=True)``.

A persistent task's turn runs inside :func:`task_scope`: its turns carry the task's id and, when the task
has a tool subset, only those tools are listed (to the local model and the cloud alike) and a call of any
other is refused. A tool registered ``task_only`` (spawn) is listed only inside a task's turn. Its turns
take the task's trust (:class:`TaskScope`): outside text a step read stays in for the task's later steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import logging
import re
import threading
import time
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

from appliance.errors import PicoagentError, ToolError, UnknownToolError, known
from appliance.plugins import Hooks
from appliance.tools.result import ToolResult
from appliance.tools.trust import OutsideError, OutsideText, TurnTrust

log = logging.getLogger(__name__)

MAX_OUTPUT_CHARS = 4000
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4  # shorter values ("1", "on") would redact ordinary words

_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class Tool:
    """A callable the model may use, with the JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]
    read_only: bool = False
    cacheable: bool = False  # read-only and the same arguments give the same answer for a while
    examples: tuple[str, ...] = ()  # what people say when they need it: the local prompt's tools are ranked by them
    outside: str = ""  # every answer (and error) is outside text: what it is, e.g. "a web page"
    timeout_s: float | None = None  # its own time limit, over the turn's (spawn waits for a whole subtask)
    task_only: bool = False  # listed and callable only inside a task's turn

    def schema(self) -> dict[str, Any]:
        """The OpenAI-style function description of this tool."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def _type_schema(tp: Any, where: str) -> dict[str, Any]:
    origin = get_origin(tp)
    if tp in _JSON_TYPES:
        return {"type": _JSON_TYPES[tp]}
    if origin is Literal:
        values = list(get_args(tp))
        return {"enum": values}
    if origin in (list, tuple) or tp in (list, tuple):
        args = get_args(tp)
        return {"type": "array", "items": _type_schema(args[0], where)} if args else {"type": "array"}
    if origin is dict or tp is dict:
        return {"type": "object"}
    if tp is type(None):
        return {"type": "null"}
    if origin in (Union, types.UnionType):
        return {"anyOf": [_type_schema(a, where) for a in get_args(tp)]}
    raise TypeError(f"{where}: type {tp!r} cannot be described as JSON schema")


def _param_docs(docstring: str) -> dict[str, str]:
    """``name: description`` lines under an ``Args:`` heading."""
    docs: dict[str, str] = {}
    in_args = False
    for line in docstring.splitlines():
        stripped = line.strip()
        if stripped.lower() in ("args:", "arguments:", "parameters:"):
            in_args = True
            continue
        if in_args:
            match = re.match(r"(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)", stripped)
            if match:
                docs[match.group(1)] = match.group(2).strip()
            elif stripped and not line.startswith((" ", "\t")):
                in_args = False
    return docs


def tool_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    read_only: bool = False,
    cacheable: bool = False,
    outside: str = "",
    timeout_s: float | None = None,
    task_only: bool = False,
) -> Tool:
    """Describe a typed function as a tool (first docstring line = description)."""
    tool_name = name or fn.__name__
    docstring = inspect.getdoc(fn) or ""
    description = docstring.splitlines()[0] if docstring else tool_name.replace("_", " ")
    hints = typing.get_type_hints(fn)
    param_docs = _param_docs(docstring)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {tool_name}: *args/**kwargs cannot be described to a model")
        if param.name not in hints:
            raise TypeError(f"tool {tool_name}: parameter {param.name} needs a type hint")
        prop = _type_schema(hints[param.name], f"tool {tool_name}, parameter {param.name}")
        if param.name in param_docs:
            prop["description"] = param_docs[param.name]
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        else:
            prop["default"] = param.default
        properties[param.name] = prop
    parameters = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    examples = _examples(docstring)
    return Tool(
        tool_name,
        description,
        parameters,
        fn,
        read_only or cacheable,
        cacheable,
        examples,
        outside,
        timeout_s,
        task_only,
    )


def _examples(docstring: str) -> tuple[str, ...]:
    """The ``Examples: a; b; c`` paragraph of a docstring (it may go on over lines), as phrasings."""
    lines = docstring.splitlines()
    for at, line in enumerate(lines):
        if line.strip().lower().startswith("examples:"):
            text = [line.strip()[len("examples:") :]]
            for more in lines[at + 1 :]:
                if not more.strip() or more.strip().endswith(":"):
                    break
                text.append(more.strip())
            return tuple(e.strip() for e in " ".join(text).split(";") if e.strip())
    return ()


def _check_value(schema: dict[str, Any], value: Any, where: str) -> str | None:
    if "enum" in schema:
        return None if value in schema["enum"] else f"{where} must be one of {schema['enum']}, got {value!r}"
    if "anyOf" in schema:
        problems = [_check_value(s, value, where) for s in schema["anyOf"]]
        return None if any(p is None for p in problems) else problems[0]
    kind = schema.get("type")
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "array": isinstance(value, list),
        "object": isinstance(value, dict),
        "null": value is None,
    }.get(str(kind), True)
    if not ok:
        return f"{where} must be {kind}, got {json.dumps(value)}"
    if kind == "array" and "items" in schema:
        for i, item in enumerate(value):
            problem = _check_value(schema["items"], item, f"{where}[{i}]")
            if problem:
                return problem
    return None


def check_arguments(tool: Tool, arguments: Any) -> str | None:
    """Why ``arguments`` do not fit the tool's schema, or None when they do."""
    if not isinstance(arguments, dict):
        return "arguments must be a JSON object"
    props = tool.parameters["properties"]
    unknown = sorted(set(arguments) - set(props))
    if unknown:
        return f"unknown argument(s) {', '.join(unknown)}; {tool.name} takes {', '.join(props) or 'none'}"
    missing = [p for p in tool.parameters["required"] if p not in arguments]
    if missing:
        return f"missing required argument(s): {', '.join(missing)}"
    for key, value in arguments.items():
        problem = _check_value(props[key], value, key)
        if problem:
            return problem
    return None


def _in_daemon_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> asyncio.Future[Any]:
    """Run a blocking tool on a daemon thread of its own.

    A thread cannot be killed: on timeout the turn goes on without it. A daemon thread, unlike the
    default executor's, does not hold up the end of the event loop or of the process.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()  # current_turn() answers on the thread too

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return  # timed out or cancelled meanwhile
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, error = fn(**kwargs), None
        except BaseException as exc:  # handed to the awaiting side, which decides
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed while the tool ran
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(
        target=context.run, args=(target,), name=f"tool-{getattr(fn, '__name__', 'call')}", daemon=True
    ).start()
    return future


@dataclass
class ToolTurn:
    """One turn's use of the tools: how many calls it may still make, and what outside text it let in."""

    limit: int
    used: int = 0
    trust: TurnTrust = field(default_factory=TurnTrust)
    channel: str = ""  # where the turn came from: "telegram", "web"... a person reading; "task", "cron": nobody
    origin: str = ""  # the chat it serves, "channel:chat_id": where an approved call's result goes
    task_id: int | None = None  # the persistent task whose step this turn is (None: a chat, a job)
    allowed: frozenset[str] | None = None  # the only tools it may call (None: every tool)
    person: bool = True  # False: the message came where senders are not people the Pi knows (MQTT, a bridge)


@dataclass(frozen=True)
class TaskScope:
    """The task a turn works for, its tool subset (None: every tool), and the trust its turns share.

    ``trust``: a task's turn takes this instead of a fresh one. Its message is the step's prompt, which
    quotes the earlier steps' tool results: it is not the owner's words, so only what the task was told
    (its goal) counts as said, and outside text the task read in earlier steps is in it from the start.
    """

    task_id: int
    allowed: frozenset[str] | None = None
    trust: TurnTrust = field(default_factory=TurnTrust, compare=False)


_TURN: contextvars.ContextVar[ToolTurn | None] = contextvars.ContextVar("picoagent_tool_turn", default=None)
_SCOPE: contextvars.ContextVar[TaskScope | None] = contextvars.ContextVar("picoagent_task_scope", default=None)


@contextlib.contextmanager
def task_scope(scope: TaskScope) -> typing.Iterator[TaskScope]:
    """Turns started inside the block are this task's: its tools only, its id on their ToolTurn."""
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def _listed(tool: Tool, scope: TaskScope | None) -> bool:
    if scope is None:
        return not tool.task_only
    return scope.allowed is None or tool.name in scope.allowed


def current_turn() -> ToolTurn | None:
    """The turn the running tool was called in (None outside a turn: the CLI, the MCP server)."""
    return _TURN.get()


class Redactor:
    """Replaces the secrets file's values in text with [redacted]."""

    def __init__(self, secrets: typing.Iterable[str] = ()) -> None:
        self.update(secrets)

    def update(self, secrets: typing.Iterable[str]) -> None:
        """Redact these values from now on (a config reload read the secrets file again); in place, so every
        holder of this redactor (the registry, MCP servers, the message tool) redacts the new ones."""
        values = sorted({v for v in secrets if len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in values)) if values else None

    def __call__(self, text: str) -> str:
        return self._pattern.sub(REDACTED, text) if self._pattern is not None and text else text


@dataclass
class ToolRegistry:
    """The tools the model may call, by name, and what every call passes through."""

    tools: dict[str, Tool] = field(default_factory=dict)
    hooks: Hooks = field(default_factory=Hooks)
    redact: Redactor = field(default_factory=Redactor)
    max_output_chars: int = MAX_OUTPUT_CHARS
    cache_s: float = 0.0
    per_turn: int = 8
    clock: Callable[[], float] = time.monotonic
    # (tool, arguments, turn) -> the answer of a call that waits for a person, or None: it runs now
    gate: Callable[[Tool, dict[str, Any], ToolTurn | None], Awaitable[ToolResult | None]] | None = None
    _cache: dict[tuple[str, str], tuple[float, ToolResult]] = field(default_factory=dict, repr=False)

    def register(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        read_only: bool = False,
        cacheable: bool = False,
        outside: str = "",
    ) -> Any:
        """Register a typed function as a tool; usable as ``@registry.register`` or called directly.

        ``cacheable``: its result may be reused for ``cache_s`` (read_file, not current_time).
        ``outside``: every answer is text from outside the turn, and what it is ("a web page").
        """

        def add(func: Callable[..., Any]) -> Callable[..., Any]:
            self.add(tool_from_function(func, name=name, read_only=read_only, cacheable=cacheable, outside=outside))
            return func

        return add(fn) if fn is not None else add

    def add(self, tool: Tool) -> None:
        """Register a tool described already (MCP tools come with their own schema)."""
        if tool.name in self.tools:
            raise ValueError(f"a tool named {tool.name} is registered already")
        self.tools[tool.name] = tool

    def limit(self, *, per_turn: int, max_output_chars: int, cache_s: float) -> None:
        """The limits every call passes through, from a reloaded config's ``tools`` (SIGHUP)."""
        self.per_turn, self.max_output_chars, self.cache_s = per_turn, max_output_chars, cache_s

    def remove(self, name: str) -> None:
        """Forget a tool (an MCP server that went away)."""
        self.tools.pop(name, None)
        self._cache = {k: v for k, v in self._cache.items() if k[0] != name}

    def get(self, name: str) -> Tool:
        """The tool with this name, or UnknownToolError listing the known ones."""
        try:
            return self.tools[name]
        except KeyError:
            raise UnknownToolError(f"no tool named {name!r}", fix=f"known tools: {known(self.tools)}") from None

    def __iter__(self) -> typing.Iterator[Tool]:
        """The tools a turn started here may see: inside a task's scope, only its tools."""
        scope = _SCOPE.get()
        return iter(sorted((t for t in self.tools.values() if _listed(t, scope)), key=lambda t: t.name))

    def __len__(self) -> int:
        scope = _SCOPE.get()
        return sum(1 for t in self.tools.values() if _listed(t, scope))

    def turn(self, said: str = "", channel: str = "", origin: str = "", *, person: bool = True) -> ToolTurn:
        """A fresh budget for one turn; ``said``: the person's message (the hosts it names stay fetchable);
        ``channel``: where the turn came from; ``origin``: the chat, "channel:chat_id"; ``person``: False
        when the channel's senders are not people the Pi knows: the message is then outside text itself
        (device writes wait for a person, no memory or lasting file is written, no host it names is fetched).

        Inside :func:`task_scope` the turn is the task's: its id, its tool subset and its trust come with
        it (``said`` is then the step's prompt, which counts for nothing: see :class:`TaskScope`).
        """
        scope = _SCOPE.get()
        trust = scope.trust if scope is not None else TurnTrust(said if person else "")
        if not person:
            trust.saw(f"a message on {channel or 'a channel'} from a sender who is not a person the Pi knows")
        if scope is None:
            return ToolTurn(self.per_turn, trust=trust, channel=channel, origin=origin, person=person)
        return ToolTurn(
            self.per_turn,
            trust=trust,
            channel=channel,
            origin=origin,
            task_id=scope.task_id,
            allowed=scope.allowed,
            person=person,
        )

    async def execute(
        self,
        name: str,
        arguments: Any,
        *,
        timeout_s: float = 30.0,
        turn: ToolTurn | None = None,
        approved: bool = False,
    ) -> ToolResult:
        """Run a tool; every failure (unknown, bad arguments, exception, timeout, budget) is a result.

        ``approved``: a person approved this exact call (only :mod:`appliance.tools.approvals` says so);
        otherwise a tool that needs approval waits for one instead of running.
        """
        token = _TURN.set(turn)
        try:
            result = await self._execute(name, arguments, timeout_s, turn, approved)
        finally:
            _TURN.reset(token)
        result = await self.hooks.tool_result(result)
        result.output = self.redact(result.output)
        result.error = self.redact(result.error) if result.error else result.error
        if turn is not None:
            turn.trust.saw(result.outside, result.outside_file)
        return result

    async def _execute(
        self, name: str, arguments: Any, timeout_s: float, turn: ToolTurn | None, approved: bool = False
    ) -> ToolResult:
        args = arguments if isinstance(arguments, dict) else {}
        started = time.perf_counter()

        def failed(error: str) -> ToolResult:
            log.info("tool %s failed: %s", name, error)
            return ToolResult(name, args, False, "", time.perf_counter() - started, error)

        if turn is not None:
            if turn.used >= turn.limit:
                return failed(f"this turn's tool budget ({turn.limit} calls) is spent: answer with what you have")
            turn.used += 1
        if turn is not None and turn.allowed is not None and name not in turn.allowed:
            mine = ", ".join(sorted(turn.allowed)) or "none"
            return failed(f"{name!r} is not among the tools of task {turn.task_id} ({mine}); do it with those")
        tool = self.tools.get(name)
        if tool is None or (tool.task_only and (turn is None or turn.task_id is None)):
            return failed(f"no tool named {name!r}; known tools: {', '.join(t.name for t in self) or 'none'}")
        problem = check_arguments(tool, arguments)
        if problem:
            return failed(problem)
        if self.gate is not None and not approved:
            held = await self.gate(tool, args, turn)
            if held is not None:
                return held
        result = await self._call(tool, args, timeout_s, started, failed)
        result.outside = result.outside or tool.outside  # an error of a web page or MCP server is its text too
        return result

    async def _call(
        self, tool: Tool, args: dict[str, Any], timeout_s: float, started: float, failed: Callable[[str], ToolResult]
    ) -> ToolResult:
        """The tool's answer (or a reused one), with its exceptions and timeout as failed results."""
        name = tool.name
        timeout_s = tool.timeout_s or timeout_s
        key = (name, json.dumps(args, sort_keys=True, default=str))
        if not tool.read_only:
            self._cache.clear()  # a write (a file, a relay, a shell command) may change any answer
        elif tool.cacheable and self.cache_s > 0:
            hit = self._cache.get(key)
            if hit is not None and hit[0] > self.clock():
                cached = hit[1]
                return ToolResult(
                    name,
                    args,
                    True,
                    cached.output,
                    time.perf_counter() - started,
                    cached=True,
                    outside=cached.outside,  # a cached page is outside text as much as a fetched one
                    outside_file=cached.outside_file,
                )
        try:
            if inspect.iscoroutinefunction(tool.function):
                value = await asyncio.wait_for(tool.function(**args), timeout_s)
            else:
                value = await asyncio.wait_for(_in_daemon_thread(tool.function, args), timeout_s)
        except TimeoutError:
            return failed(f"timed out after {timeout_s:g} s")
        except ToolError as exc:
            result = failed(exc.message)
            result.outside = exc.source if isinstance(exc, OutsideError) else ""  # its message quotes outside text
            return result
        except PicoagentError as exc:  # refused by policy, unknown device, hardware error: the model reads why
            return failed(exc.message + (f" ({exc.fix})" if exc.fix else ""))
        except Exception as exc:  # a tool's bug must not end the turn
            log.warning("tool %s raised %s", name, exc, exc_info=True)
            return failed(f"{type(exc).__name__}: {exc}")
        output = str(value) if isinstance(value, str) else json.dumps(value, default=str)  # plain str: no marks
        if len(output) > self.max_output_chars:
            output = output[: self.max_output_chars] + f"\n[output truncated: {len(output)} characters in all]"
        result = ToolResult(name, args, True, output, time.perf_counter() - started)
        if isinstance(value, OutsideText):
            result.outside, result.outside_file = value.source, value.file
        if tool.cacheable and self.cache_s > 0:
            now = self.clock()
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}  # stays small: entries expire
            self._cache[key] = (now + self.cache_s, result)
        return result
