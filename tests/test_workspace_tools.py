"""File tools on the workspace, and what every tool call passes through: budget, cache, cut, redaction."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from appliance.config import Config
from appliance.errors import ToolError
from appliance.runtime import base_registry
from appliance.tools import quota, workspace
from appliance.tools.registry import Redactor, ToolRegistry, ToolTurn
from appliance.tools.result import ToolResult

SECRET = "sk-live-0123456789abcdef"


@pytest.fixture
def scene(tmp_path: Path) -> tuple[ToolRegistry, Path, Path]:
    root = tmp_path / "workspace"
    root.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("CANARY\n")
    registry = ToolRegistry(redact=Redactor({SECRET, "on"}), cache_s=30.0, clock=lambda: clock[0])
    workspace.register(registry, root)
    return registry, root, outside


clock = [0.0]


def call(registry: ToolRegistry, name: str, turn: ToolTurn | None = None, **arguments: object) -> ToolResult:
    return asyncio.run(registry.execute(name, arguments, timeout_s=5, turn=turn))


def test_write_read_edit_and_list(scene: tuple[ToolRegistry, Path, Path]) -> None:
    registry, root, _ = scene
    assert call(registry, "write_file", path="notes/todo.md", content="buy milk\nbuy eggs\n").ok
    assert (root / "notes" / "todo.md").read_text() == "buy milk\nbuy eggs\n"
    assert call(registry, "read_file", path="notes/todo.md").output == "buy milk\nbuy eggs\n"
    assert call(registry, "read_file", path="/workspace/notes/todo.md").ok  # as the shell sees it
    edited = call(registry, "edit_file", path="notes/todo.md", old="milk", new="bread")
    assert edited.ok and (root / "notes" / "todo.md").read_text() == "buy bread\nbuy eggs\n"
    twice = call(registry, "edit_file", path="notes/todo.md", old="buy", new="get")
    assert not twice.ok and "occurs 2 times" in (twice.error or "")
    missing = call(registry, "edit_file", path="notes/todo.md", old="cheese", new="x")
    assert not missing.ok and "does not occur" in (missing.error or "")
    listing = call(registry, "list_dir", path=".").output
    assert "notes/" in listing.splitlines()
    assert call(registry, "list_dir", path="notes").output == "todo.md  19 bytes"
    assert not call(registry, "read_file", path="nope.txt").ok
    assert [p.name for p in (root / "notes").iterdir()] == ["todo.md"]  # no temporary file left


@pytest.mark.parametrize(
    "path",
    ["../outside.txt", "notes/../../outside.txt", "{outside}", "/etc/passwd", "/workspace/../outside.txt", "link"],
)
def test_paths_that_leave_the_workspace_are_refused(scene: tuple[ToolRegistry, Path, Path], path: str) -> None:
    registry, root, outside = scene
    (root / "link").symlink_to(outside)
    path = path.replace("{outside}", str(outside))
    for name, arguments in (
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "pwned"}),
        ("edit_file", {"path": path, "old": "CANARY", "new": "pwned"}),
        ("list_dir", {"path": path}),
    ):
        result = call(registry, name, **arguments)
        assert not result.ok and "outside the workspace" in (result.error or ""), (name, result)
    assert outside.read_text() == "CANARY\n"


def test_a_link_to_a_folder_outside_cannot_be_written_through(scene: tuple[ToolRegistry, Path, Path]) -> None:
    registry, root, outside = scene
    (root / "out").symlink_to(outside.parent)
    result = call(registry, "write_file", path="out/new.txt", content="x")
    assert not result.ok and "outside the workspace" in (result.error or "")
    assert not (outside.parent / "new.txt").exists()
    (root / "inside").symlink_to(root / "notes")  # a link that stays inside is fine
    assert call(registry, "write_file", path="inside/a.txt", content="x").ok


def test_binary_and_special_files(scene: tuple[ToolRegistry, Path, Path]) -> None:
    registry, root, _ = scene
    (root / "blob.bin").write_bytes(b"\x00\x01\x02")
    assert "binary" in (call(registry, "read_file", path="blob.bin").error or "")
    os.mkfifo(root / "pipe")
    assert "not a regular file" in (call(registry, "read_file", path="pipe").error or "")  # never blocks
    assert "is a folder" in (call(registry, "write_file", path=".", content="x").error or "")


def test_the_turn_budget_refuses_further_calls(scene: tuple[ToolRegistry, Path, Path]) -> None:
    registry, _, _ = scene
    turn = ToolTurn(limit=2)
    assert call(registry, "list_dir", turn, path=".").ok
    assert call(registry, "write_file", turn, path="a", content="1").ok
    third = call(registry, "list_dir", turn, path=".")
    assert not third.ok and "tool budget (2 calls) is spent" in (third.error or "")
    assert turn.used == 2


def test_read_only_results_are_cached_until_something_writes(scene: tuple[ToolRegistry, Path, Path]) -> None:
    registry, root, _ = scene
    clock[0] = 0.0
    (root / "a.txt").write_text("one")
    assert call(registry, "read_file", path="a.txt").output == "one"
    (root / "a.txt").write_text("two")  # changed behind the tools' back: the cache answers for 30 s
    again = call(registry, "read_file", path="a.txt")
    assert again.output == "one" and again.cached and again.as_dict()["cached"] is True
    clock[0] = 31.0
    assert call(registry, "read_file", path="a.txt").output == "two"
    assert call(registry, "write_file", path="a.txt", content="three").ok  # a write empties the cache
    assert call(registry, "read_file", path="a.txt").output == "three"


def test_output_is_cut_with_a_note_and_secrets_are_redacted(scene: tuple[ToolRegistry, Path, Path]) -> None:
    registry, root, _ = scene
    registry.max_output_chars = 100
    (root / "long.txt").write_text("x" * 500)
    long = call(registry, "read_file", path="long.txt").output
    assert long.startswith("x" * 100) and long.endswith("[output truncated: 500 characters in all]")
    (root / "env.txt").write_text(f"KEY={SECRET}\nlights are on\n")
    shown = call(registry, "read_file", path="env.txt").output
    assert SECRET not in shown and "KEY=[redacted]" in shown
    assert "lights are on" in shown  # secrets shorter than 4 characters are not redacted
    failing = call(registry, "edit_file", path="env.txt", old=f"{SECRET}!", new="x")
    assert SECRET not in (failing.error or "") and SECRET not in failing.output


@pytest.mark.parametrize("tool", ["read_file", "write_file"])
def test_a_parent_folder_swapped_for_a_link_mid_call_is_not_followed(
    scene: tuple[ToolRegistry, Path, Path], monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    """A shell command runs beside the file tools: it can swap a folder on the path for a link to outside
    after the path was checked. The swap is made just before the file itself is opened (the last moment
    any implementation can open it): the call must neither read nor write outside."""
    registry, root, outside = scene
    elsewhere = outside.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "data.txt").write_text("CANARY\n")
    (root / "notes").mkdir()
    (root / "notes" / "data.txt").write_text("inside\n")
    real_open = os.open
    swapped: list[str] = []

    def open_after_a_swap(path: object, flags: int, *args: object, **kwargs: object) -> int:
        name = os.path.basename(os.fsdecode(os.fspath(path)))  # type: ignore[arg-type]
        if not swapped and (name == "data.txt" or name.startswith(".tmp-")):
            (root / "notes").rename(root / "moved")
            (root / "notes").symlink_to(elsewhere)
            swapped.append(name)
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", open_after_a_swap)
    if tool == "read_file":
        result = call(registry, "read_file", path="notes/data.txt")
        assert "CANARY" not in result.output and "CANARY" not in (result.error or "")
        assert result.output == "inside\n"  # the folder that was there when the walk passed it
    else:
        result = call(registry, "write_file", path="notes/data.txt", content="pwned\n")
        assert result.ok, result
    monkeypatch.undo()
    assert swapped, "the swap never happened: the test did not reach the window"
    assert (elsewhere / "data.txt").read_text() == "CANARY\n"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["data.txt"]  # no temporary file left there either
    if tool == "write_file":
        assert (root / "moved" / "data.txt").read_text() == "pwned\n"


def test_links_are_walked_like_paths_and_refused_when_they_lead_out(scene: tuple[ToolRegistry, Path, Path]) -> None:
    registry, root, outside = scene
    (root / "notes" / "deep").mkdir(parents=True)
    (root / "notes" / "todo.md").write_text("milk\n")
    (root / "notes" / "deep" / "back").symlink_to("../todo.md")  # relative, stays inside
    (root / "as_shell").symlink_to("/workspace/notes")  # how a link made in the sandbox looks
    (root / "notes" / "up").symlink_to("../..")  # relative, out of the workspace
    assert call(registry, "read_file", path="notes/deep/back").output == "milk\n"
    assert call(registry, "read_file", path="as_shell/todo.md").output == "milk\n"
    assert call(registry, "write_file", path="as_shell/deep/new.txt", content="x").output == (
        "wrote 1 bytes to notes/deep/new.txt"
    )
    escaped = call(registry, "read_file", path=f"notes/up/{outside.name}")
    assert not escaped.ok and "outside the workspace" in (escaped.error or "")
    dotted = call(registry, "read_file", path="notes/../notes/todo.md")
    assert not dotted.ok and "'..'" in (dotted.error or "") and "e.g. notes/todo.md" in (dotted.error or "")


def test_a_write_over_the_workspace_quota_is_refused_and_loses_nothing(config: Config, tmp_path: Path) -> None:
    config.data_dir = str(tmp_path)
    config.tools.workspace_max_mb = 1
    config.tools.shell.enabled = False
    registry = base_registry(config)
    root = tmp_path / "workspace"
    assert call(registry, "write_file", path="a.txt", content="start\n" + "a" * 450_000).ok
    refused = call(registry, "write_file", path="notes/b.txt", content="b" * 700_000)
    error = refused.error or ""
    assert not refused.ok and error.startswith("the workspace is full:")
    assert "tools.workspace_max_mb" in error and "Nothing was written" in error and "rm " in error
    assert not (root / "notes" / "b.txt").exists()
    assert (root / "a.txt").read_text() == "start\n" + "a" * 450_000
    assert call(registry, "write_file", path="a.txt", content="start\n" + "c" * 500_000).ok  # counts the difference
    grown = call(registry, "edit_file", path="a.txt", old="start", new="x" * 600_000)
    assert not grown.ok and "the workspace is full" in (grown.error or "")
    assert (root / "a.txt").read_text() == "start\n" + "c" * 500_000
    assert sorted(p.name for p in root.iterdir()) == ["a.txt"]  # no folder made, no temporary file left


def test_edit_file_never_loses_what_read_file_would_cut_or_replace(scene: tuple[ToolRegistry, Path, Path]) -> None:
    """read_file shows the first 512 KiB, decoded leniently; edit_file must edit the whole file, bytes intact."""
    registry, root, _ = scene
    big = "milk\n" + "x" * (workspace.MAX_READ_BYTES + 1000) + "\nend\n"
    (root / "big.txt").write_text(big)
    assert call(registry, "edit_file", path="big.txt", old="milk", new="oat milk").ok
    assert (root / "big.txt").read_text() == "oat " + big
    latin = b"caf\xe9 milk\n"  # not UTF-8: a lenient decode would turn \xe9 into U+FFFD for good
    (root / "latin.txt").write_bytes(latin)
    refused = call(registry, "edit_file", path="latin.txt", old="milk", new="tea")
    assert not refused.ok and "not UTF-8" in (refused.error or "")
    assert (root / "latin.txt").read_bytes() == latin
    huge = root / "huge.txt"
    huge.write_text("milk\n" + "y" * workspace.MAX_WRITE_CHARS)
    too_big = call(registry, "edit_file", path="huge.txt", old="milk", new="tea")
    assert not too_big.ok and "too big for edit_file" in (too_big.error or "") and "sed" in (too_big.error or "")
    assert huge.read_text().startswith("milk\n") and huge.stat().st_size == 5 + workspace.MAX_WRITE_CHARS


def test_a_workspace_too_deep_to_measure_counts_as_over_its_quota(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    deep = root.joinpath(*["d"] * (quota.MAX_DEPTH + 1))
    deep.mkdir(parents=True)
    files = workspace.WorkspaceFiles(root, 1 << 30)
    with pytest.raises(ToolError, match=f"nested deeper than {quota.MAX_DEPTH} levels.*Nothing was written"):
        files.write_file("a.txt", "x")
    assert not (root / "a.txt").exists()
    shutil.rmtree(root / "d")
    assert files.write_file("a.txt", "x") == "wrote 1 bytes to a.txt"
