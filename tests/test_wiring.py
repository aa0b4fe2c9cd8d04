"""Built in order, never patched afterwards: the composition root assigns no attribute of another object.

The daemon (``appliance/daemon.py``), the runtime it opens (``appliance/runtime.py``), what a SIGHUP applies
(``appliance/reload.py``, its channels ``reload_channels.py``), the channel registry and the web site's
assembly build each part with what it needs (constructor arguments; a late-bound callable where a cycle is
real) and change a running part only through a method of its owner (``runtime.use_model``, ``registry.limit``,
``heartbeat.reschedule``). Each of their modules is read with :mod:`ast`: an assignment (``=``, ``+=``, an
annotated one, a ``setattr``) to an attribute of anything but ``self`` itself, outside ``__init__``, fails,
naming the file, the line and the target.

:data:`ALLOWED` is the one exception, with its reason: the config tree, which a reload applies in place.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED = (
    "appliance/daemon.py",
    "appliance/runtime.py",
    "appliance/reload.py",
    "appliance/reload_channels.py",
    "appliance/channels/registry.py",
    "appliance/channels/web/app.py",
    "appliance/channels/web/server.py",
    "appliance/channels/web/state.py",
)

# The config tree is data, not a service: every part holds the one running Config and reads it on use, so a
# reload applies a new file by writing into it, section by section (appliance/reload.py, the module docstring;
# the daemon's llm section, which it switches models for). These are the names that hold it or its sections.
ALLOWED: dict[str, set[str]] = {
    "appliance/reload.py": {
        "old.secret_values",
        "old.hardware.approval_timeout_s",
        "old.tools",
        "old.memory",
        "old.scheduler",
        "old.weather",
        "setattr(old, ...)",  # the sections applied as they are (APPLIED)
        "setattr(raw, ...)",  # hardware.raw_access, read by the raw bus tools' policy
    },
    "appliance/reload_channels.py": {
        # a running channel's config section: its doorkeeper reads allow_from at every message
        "section(old, name).allow_from",
        "setattr(old, ...)",  # a changed channel's section, which the channel started on it is made from
    },
    "appliance/daemon.py": {"new.llm.weight_repack", "old.llm", "new.llm"},
}


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        found = [node.target]
    else:
        return []
    flat: list[ast.expr] = []
    while found:
        target = found.pop()
        if isinstance(target, ast.Tuple | ast.List):
            found += target.elts
        else:
            flat.append(target)
    return flat


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def patches(source: str) -> list[tuple[int, str]]:
    """The (line, target) of every assignment to another object's attribute in ``source``, outside ``__init__``."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_init: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            in_init = node.name in ("__init__", "__post_init__")
        for target in _targets(node):
            if isinstance(target, ast.Attribute) and not _is_self(target.value) and not in_init:
                found.append((target.lineno, ast.unparse(target)))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and node.args
            and not _is_self(node.args[0])
            and not in_init
        ):
            found.append((node.lineno, f"setattr({ast.unparse(node.args[0])}, ...)"))
        for child in ast.iter_child_nodes(node):
            visit(child, in_init)

    visit(ast.parse(source), False)
    return found


def test_the_composition_root_assigns_no_attribute_of_another_object() -> None:
    wrong = []
    for name in CHECKED:
        allowed = ALLOWED.get(name, set())
        for line, target in patches((ROOT / name).read_text()):
            if target not in allowed:
                wrong.append(f"{name}:{line}: {target} (pass it in when building, or give its owner a method)")
    assert not wrong, "\n".join(wrong)


def test_every_allowed_exception_is_still_there() -> None:
    """An exception that is no longer needed leaves the list, so the list stays the truth."""
    for name, allowed in ALLOWED.items():
        present = {target for _, target in patches((ROOT / name).read_text())}
        assert allowed <= present, f"{name}: no longer assigned, remove from ALLOWED: {sorted(allowed - present)}"


def test_the_check_finds_a_patch_and_leaves_self_alone() -> None:
    source = (
        "class A:\n"
        "    def __init__(self, b):\n"
        "        self.b = b\n"
        "        b.owner = self\n"  # inside __init__: still building
        "    def later(self, runtime):\n"
        "        self.x = 1\n"
        "        runtime.scheduler.model = 2\n"
        "        self.state.cron, y = 3, 4\n"
        "        setattr(runtime, 'cloud', 5)\n"
    )
    assert patches(source) == [(7, "runtime.scheduler.model"), (8, "self.state.cron"), (9, "setattr(runtime, ...)")]
