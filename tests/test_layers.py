"""The layers of ``appliance/``, as DESIGN.md draws them: lower layers never import higher ones.

:data:`LAYERS` is the one table of them, lowest first: each entry names the packages and modules of one
layer. A module takes the layer of the longest name in the table that it is, or lies under, so a module
can sit below its package (the driver table and the schedule grammar, which the config reads, are leaves
that import nothing above the bottom). Every ``import`` in ``appliance/`` is read with :mod:`ast` (at the
top of a module, inside a function, under ``TYPE_CHECKING``): an import of a module of a higher layer
fails, naming the file, the line and both layers. Importing within a layer, or downwards, is free.

An allowed exception would be in :data:`ALLOWED`, with its reason; there is none.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "appliance"

# Lowest first. A module not named here (nor under a name here) fails test_every_module_has_a_layer.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "bottom: errors, config and the leaves it reads",
        (
            "appliance",  # the package itself: __version__
            "appliance.errors",
            "appliance.config",
            "appliance.fileio",
            "appliance.ratelimit",
            "appliance.logs",
            "appliance.metrics",
            # The driver table: the config checks a device against its driver's spec (what it needs, where
            # it lives); the drivers import only errors and their buses, and reach a link by a protocol.
            "appliance.hardware.buses",
            "appliance.hardware.drivers",
            # The text of a schedule and when it runs: the config checks each job's schedule with it (a leaf
            # in schedule/, which holds scheduling; the package's __init__ imports none of its modules).
            "appliance.schedule.parse",
            "appliance.schedule.said",  # a schedule said in words: the schedule desk and the grounded agenda
            "appliance.weather.sun",  # pure arithmetic: the sun's times, for sunset jobs and the forecast
        ),
    ),
    (
        "services: llm, memory, hardware and its links, outbox",
        (
            "appliance.llm",
            "appliance.memory",
            "appliance.hardware",  # with hardware/remote/: the Home Assistant and MQTT links its devices use
            "appliance.tasks.store",  # the tasks' table, which the task tools and the grounded answers read
            "appliance.tasks.states",
            "appliance.health",
            "appliance.outbox",
            "appliance.notify",
            "appliance.model_fetch",
            "appliance.ota",  # OTA, all of it (its command too: the boot-time updater runs it)
            # Where OTA was: kept for the boot-time updaters older releases build (ota/boot_updater.py).
            "appliance.update",
            "appliance.update_cli",
            "appliance.bundle",
            "appliance.boot_updater",
        ),
    ),
    (
        "tools, and the reply record",
        (
            "appliance.tools",
            "appliance.mcp",
            "appliance.plugins",
            "appliance.weather",
            "appliance.arithmetic",
            # The reply record, which grounded answers and the schedule desk give and plugins are handed.
            "appliance.agent.record",
        ),
    ),
    (
        "understanding: what a message means before any model (rules, meaning, schedule words, difficulty)",
        ("appliance.understanding",),
    ),
    (
        "grounded answers: what the appliance knows, said from the facts",
        ("appliance.grounded",),
    ),
    (
        "agent, schedule and tasks",
        (
            "appliance.agent",
            "appliance.schedule",
            "appliance.tasks",
            "appliance.runtime",  # builds the agent, the tools and the services for every command
        ),
    ),
    (
        "channels and mqtt",
        (
            "appliance.channels",
            "appliance.mqtt",
        ),
    ),
    (
        "daemon: the composition root",
        (
            "appliance.daemon",
            "appliance.daemon_lock",
            "appliance.lifecycle",
            "appliance.reload",
            "appliance.reload_devices",
            "appliance.reload_channels",
            "appliance.selftest",  # run by the OTA updater in a new release, and by `picoagent selftest`
        ),
    ),
    (
        "cli: the picoagent command",
        (
            "appliance.cli",  # with cli/doctor.py, the checks of `picoagent doctor`
            "appliance.__main__",
        ),
    ),
)

# (importer, imported): why this upward import stays. None is left: the update <-> update_cli cycle went
# with appliance/ota/ (issue 34), whose command sits in the package, below the CLI that includes it.
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    """One import statement's target, where it is written."""

    path: Path
    line: int
    importer: str
    imported: str


def module_name(path: Path) -> str:
    """appliance/tools/result.py -> appliance.tools.result; a package's __init__.py is the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _exists(name: str) -> bool:
    where = ROOT.joinpath(*name.split("."))
    return where.is_dir() or where.with_suffix(".py").is_file()


def imports_in(path: Path, text: str | None = None) -> list[Import]:
    """Every import of an appliance module in one file (its text, else read), wherever it stands."""
    importer = module_name(path)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    found: list[Import] = []
    tree = ast.parse(path.read_text() if text is None else text, filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from appliance.agent import record` imports the module appliance.agent.record.
            targets = [f"{source}.{a.name}" if _exists(f"{source}.{a.name}") else source for a in node.names]
        else:
            continue
        for target in dict.fromkeys(targets):
            if target == "appliance" or target.startswith("appliance."):
                found.append(Import(path, node.lineno, importer, target))
    return sorted(found, key=lambda i: i.line)


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the longest entry that is ``module`` or a package holding it."""
    best: tuple[int, int] | None = None
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > best[0]):
                best = (len(name), index)
    return None if best is None else best[1]


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def upward_imports() -> list[str]:
    """Each import of a higher layer, as "file:line: importer (layer) imports imported (layer)"."""
    found = []
    for path in _sources():
        for imp in imports_in(path):
            low, high = layer_of(imp.importer), layer_of(imp.imported)
            if low is None or high is None or high <= low or (imp.importer, imp.imported) in ALLOWED:
                continue
            found.append(
                f"{imp.path.relative_to(ROOT)}:{imp.line}: {imp.importer} ({LAYERS[low][0]}) imports "
                f"{imp.imported} ({LAYERS[high][0]})"
            )
    return found


def test_no_layer_imports_a_higher_one() -> None:
    upward = upward_imports()
    assert not upward, "lower layers never import higher ones (tests/test_layers.py LAYERS):\n" + "\n".join(upward)


def test_every_module_has_a_layer() -> None:
    missing = [module_name(p) for p in _sources() if layer_of(module_name(p)) is None]
    assert not missing, "give these a layer in tests/test_layers.py LAYERS: " + ", ".join(missing)


def test_every_name_in_the_table_exists_and_appears_once() -> None:
    names = [name for _, layer in LAYERS for name in layer]
    assert [n for n in names if not _exists(n)] == []
    assert len(names) == len(set(names))


def test_each_allowed_exception_is_still_an_upward_import() -> None:
    """An exception that no longer happens is taken out of ALLOWED, not kept as a licence."""
    seen = {(i.importer, i.imported) for p in _sources() for i in imports_in(p)}
    for importer, imported in ALLOWED:
        assert (importer, imported) in seen
        assert (layer_of(imported) or 0) > (layer_of(importer) or 0)


def test_the_check_sees_lazy_and_type_checking_imports() -> None:
    """The reader finds an import at the top, inside a function, under TYPE_CHECKING and relative ones,
    and the check names the file, the line and both layers."""
    text = (
        "from typing import TYPE_CHECKING\n"
        "import appliance.daemon\n"
        "if TYPE_CHECKING:\n"
        "    from appliance.channels.base import ChatChannel\n"
        "def f():\n"
        "    from ..cli import common\n"
        "    from . import registry\n"
    )
    # Read as if it were appliance/tools/result.py: the module name comes from the path.
    found = imports_in(PACKAGE / "tools" / "result.py", text)
    assert [(i.line, i.imported) for i in found] == [
        (2, "appliance.daemon"),
        (4, "appliance.channels.base"),
        (6, "appliance.cli.common"),
        (7, "appliance.tools.registry"),
    ]


# A newcomer's one-hop test (issue 34): each concern is held by one package. A concern is named by what
# defines it; each of those names is defined (a class or function at the top of a module) once in
# appliance/, inside its package. Deliberately elsewhere, and so not listed: the MQTT broker link
# (hardware/remote/mqtt.py, below the devices that use it), the schedule tool (tools/scheduling.py: the
# model's way to the scheduler) and a schedule said in words (schedule/said.py is in schedule/ anyway).
CONCERNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "channels": ("appliance.channels", ("ChatChannel", "ChatCommands", "Doorkeeper", "EditedReply", "ChannelSet")),
    "understanding": (
        "appliance.understanding",
        (
            "Intent",
            "IntentMatcher",
            "SemanticDevices",
            "read_message",
            "understand_schedule",
            "find_when",
            "timing",
            "sun_timing",
            "DifficultyModel",
            "ToolRanker",
            "Understanding",
            "Kept",
            "AskedBack",
        ),
    ),
    "scheduling": (
        "appliance.schedule",
        ("Scheduler", "parse_schedule", "once_after", "JobStore", "Heartbeat", "make_job_runner", "every_words"),
    ),
    "MQTT": ("appliance.mqtt", ("MqttBridge", "MqttChat", "Topics", "device_entities", "assistant_entities")),
    "OTA": ("appliance.ota", ("Updater", "Layout", "HealthCheck", "write_bundle", "extract_verified", "verify_tree")),
}


def _definitions() -> dict[str, list[str]]:
    """Each class or function name defined at the top of a module in appliance/ -> the modules defining it."""
    found: dict[str, list[str]] = {}
    for path in _sources():
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                found.setdefault(node.name, []).append(module_name(path))
    return found


def test_each_concern_is_one_package() -> None:
    """Channels, understanding, scheduling, MQTT and OTA: what defines each is in its package, once."""
    defined = _definitions()
    astray = {
        f"{concern}: {name}": defined.get(name, [])
        for concern, (package, names) in CONCERNS.items()
        for name in names
        if len(defined.get(name, [])) != 1 or not defined[name][0].startswith(package + ".")
    }
    assert not astray, "defined outside its concern's package, twice, or nowhere: " + repr(astray)
