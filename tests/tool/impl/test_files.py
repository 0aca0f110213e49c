"""The built-in file tools, on the memory sandbox (its files are not on the host)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from sagents.core._result import ToolResult
from sagents.sandbox import Sandbox, create_sandbox
from sagents.tool import SessionContext, ToolManager
from sagents.tool.impl import BuiltinSettings, register_builtin_tools, single_sandbox

pytestmark = pytest.mark.anyio


class Env:
    def __init__(self, manager: ToolManager, sandbox: Sandbox) -> None:
        self.manager = manager
        self.sandbox = sandbox

    async def call(self, name: str, **arguments: Any) -> ToolResult:
        return await self.manager.run_tool(name, arguments, SessionContext(session_id="s1"))


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    settings = BuiltinSettings(
        file_max_bytes=4096, grep_max_matches=3, list_max_entries=3, glob_max_results=3
    )
    async with create_sandbox("memory", workspace="/nowhere") as sandbox:
        manager = ToolManager()
        register_builtin_tools(manager, single_sandbox(sandbox), settings=settings)
        yield Env(manager, sandbox)


def _code(result: ToolResult) -> str | None:
    assert result.is_error, result.text
    assert result.error is not None
    return result.error.code


async def test_file_write_then_file_read_round_trips_with_line_numbers(env: Env) -> None:
    written = await env.call("file_write", path="src/app.py", content="a = 1\nb = 2\nc = 3\n")
    assert not written.is_error, written.text
    assert await env.sandbox.read_file("src/app.py") == b"a = 1\nb = 2\nc = 3\n"
    result = await env.call("file_read", path="src/app.py")
    assert "     1\ta = 1\n     2\tb = 2\n     3\tc = 3" in result.text
    assert result.structured["total_lines"] == 3


async def test_file_read_returns_a_line_range_and_says_where_more_is(env: Env) -> None:
    await env.sandbox.write_file("n.txt", "".join(f"line {i}\n" for i in range(1, 11)).encode())
    result = await env.call("file_read", path="n.txt", start_line=3, end_line=4)
    assert "     3\tline 3\n     4\tline 4" in result.text
    assert "line 5" not in result.text
    assert "start_line=5" in result.text


async def test_file_read_cuts_long_lines_and_says_so(env: Env) -> None:
    await env.sandbox.write_file("long.txt", b"x" * 3000 + b"\n")
    result = await env.call("file_read", path="long.txt")
    assert "[... 1,000 more characters]" in result.text


async def test_file_read_of_a_missing_file_is_file_not_found(env: Env) -> None:
    result = await env.call("file_read", path="nope.txt")
    assert _code(result) == "file_not_found"
    assert "nope.txt" in result.text


async def test_file_read_of_a_binary_file_is_refused(env: Env) -> None:
    await env.sandbox.write_file("img.bin", b"\x89PNG\x00\x01\x02")
    assert _code(await env.call("file_read", path="img.bin")) == "binary_file"


async def test_file_read_of_a_file_over_the_cap_is_refused(env: Env) -> None:
    await env.sandbox.write_file("big.txt", b"a\n" * 4000)
    result = await env.call("file_read", path="big.txt")
    assert _code(result) == "file_too_large"
    assert "8,000 bytes" in result.text


async def test_file_read_of_a_directory_is_a_clear_error(env: Env) -> None:
    await env.sandbox.mkdir("d")
    result = await env.call("file_read", path="d")
    assert _code(result) == "file_error"
    assert "directory" in result.text


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"path": "n.txt", "start_line": 3, "end_line": 2}, "end_line"),
        ({"path": "n.txt", "start_line": 50}, "past the end"),
        ({"path": "n.txt", "start_line": 0}, "start_line"),
        ({"path": ""}, "path"),
        ({}, "path"),
    ],
)
async def test_file_read_bad_ranges_are_invalid_arguments(
    env: Env, arguments: dict[str, Any], needle: str
) -> None:
    await env.sandbox.write_file("n.txt", b"one\ntwo\n")
    result = await env.call("file_read", **arguments)
    assert _code(result) == "invalid_arguments"
    assert needle in result.text


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "a/../../x"])
async def test_paths_outside_the_workspace_are_refused(env: Env, path: str) -> None:
    assert _code(await env.call("file_write", path=path, content="x")) == "path_not_allowed"
    assert _code(await env.call("file_read", path=path)) == "path_not_allowed"


async def test_file_write_into_the_read_only_agent_directory_is_refused(env: Env) -> None:
    result = await env.call("file_write", path=".agent/x", content="x")
    assert _code(result) == "path_not_allowed"


async def test_file_write_without_create_dirs_needs_the_parent(env: Env) -> None:
    result = await env.call("file_write", path="new/dir/f.txt", content="x", create_dirs=False)
    assert _code(result) == "file_not_found"


async def test_file_update_replaces_one_exact_match(env: Env) -> None:
    await env.sandbox.write_file("c.py", b"x = 1\ny = 2\n")
    result = await env.call(
        "file_update", path="c.py", edits=[{"old_text": "y = 2", "new_text": "y = 3"}]
    )
    assert not result.is_error, result.text
    assert await env.sandbox.read_file("c.py") == b"x = 1\ny = 3\n"


async def test_file_update_with_ambiguous_text_lists_the_matches_and_writes_nothing(
    env: Env,
) -> None:
    await env.sandbox.write_file("c.py", b"v = 0\nv = 0\nv = 0\n")
    result = await env.call(
        "file_update", path="c.py", edits=[{"old_text": "v = 0", "new_text": "v = 1"}]
    )
    assert _code(result) == "edit_ambiguous"
    assert "3 times" in result.text
    assert result.error is not None
    assert result.error.details["matches"] == 3
    assert await env.sandbox.read_file("c.py") == b"v = 0\nv = 0\nv = 0\n"


async def test_file_update_replace_all_replaces_every_match(env: Env) -> None:
    await env.sandbox.write_file("c.py", b"v = 0\nv = 0\n")
    edits = [{"old_text": "v = 0", "new_text": "v = 1", "replace_all": True}]
    result = await env.call("file_update", path="c.py", edits=edits)
    assert result.structured["replacements"] == 2
    assert await env.sandbox.read_file("c.py") == b"v = 1\nv = 1\n"


async def test_file_update_with_missing_text_names_the_edit_and_writes_nothing(env: Env) -> None:
    await env.sandbox.write_file("c.py", b"a\nb\n")
    edits = [{"old_text": "a", "new_text": "A"}, {"old_text": "zzz", "new_text": "y"}]
    result = await env.call("file_update", path="c.py", edits=edits)
    assert _code(result) == "edit_not_found"
    assert "edit 1" in result.text
    assert await env.sandbox.read_file("c.py") == b"a\nb\n"


@pytest.mark.parametrize(
    "edits",
    [[], [{"old_text": "", "new_text": "x"}], [{"old_text": "a", "new_text": "a"}], [{"x": 1}]],
)
async def test_file_update_bad_edits_are_invalid_arguments(env: Env, edits: list[Any]) -> None:
    await env.sandbox.write_file("c.py", b"a\n")
    assert _code(await env.call("file_update", path="c.py", edits=edits)) == "invalid_arguments"


async def test_file_update_of_a_binary_file_is_refused(env: Env) -> None:
    await env.sandbox.write_file("b.bin", b"\x00\x01a")
    edits = [{"old_text": "a", "new_text": "b"}]
    assert _code(await env.call("file_update", path="b.bin", edits=edits)) == "binary_file"


async def test_list_dir_marks_directories_and_caps_entries(env: Env) -> None:
    await env.sandbox.mkdir("sub")
    for name in ("a", "b", "c"):
        await env.sandbox.write_file(name, b"12")
    result = await env.call("list_dir", path=".")
    assert result.text.splitlines()[:3] == ["a\t2 bytes", "b\t2 bytes", "c\t2 bytes"]
    assert "1 more entries" in result.text
    assert result.structured["total"] == 4


async def test_list_dir_of_a_missing_directory_is_file_not_found(env: Env) -> None:
    assert _code(await env.call("list_dir", path="ghost")) == "file_not_found"


async def test_glob_matches_across_directories_and_caps(env: Env) -> None:
    await env.sandbox.mkdir("src/pkg")
    for name in ("src/a.py", "src/pkg/b.py", "src/pkg/c.txt"):
        await env.sandbox.write_file(name, b"")
    result = await env.call("glob", pattern="src/**/*.py")
    assert [p.rsplit("/", 1)[-1] for p in result.structured["paths"]] == ["a.py", "b.py"]
    assert (await env.call("glob", pattern="*.none")).text == "no path matches '*.none'"


async def test_glob_refuses_patterns_leaving_the_workspace(env: Env) -> None:
    assert _code(await env.call("glob", pattern="../*")) == "path_not_allowed"


async def test_grep_finds_lines_skips_binary_files_and_caps_matches(env: Env) -> None:
    await env.sandbox.mkdir("src")
    await env.sandbox.write_file("src/a.py", b"import os\nTODO one\nTODO two\n")
    await env.sandbox.write_file("src/b.py", b"TODO three\nTODO four\n")
    await env.sandbox.write_file("src/c.bin", b"\x00TODO binary")
    result = await env.call("grep", pattern=r"TODO \w+", path="src")
    lines = result.text.splitlines()
    assert lines[0].endswith("a.py:2:TODO one")
    assert len(result.structured["matches"]) == 3
    assert "stopped at 3 matches" in lines[-1]
    assert "binary" not in result.text


async def test_grep_filters_by_include_and_ignores_case(env: Env) -> None:
    await env.sandbox.write_file("a.md", b"Hello\n")
    await env.sandbox.write_file("b.txt", b"hello\n")
    result = await env.call("grep", pattern="HELLO", include="*.md", ignore_case=True)
    assert [m["path"].rsplit("/", 1)[-1] for m in result.structured["matches"]] == ["a.md"]


async def test_grep_with_an_invalid_regex_says_why(env: Env) -> None:
    result = await env.call("grep", pattern="(unclosed")
    assert _code(result) == "invalid_arguments"
    assert "invalid regular expression" in result.text


async def test_grep_in_a_missing_path_is_file_not_found(env: Env) -> None:
    assert _code(await env.call("grep", pattern="x", path="ghost")) == "file_not_found"


async def test_file_update_of_a_file_with_invalid_utf8_is_refused_to_keep_its_bytes(
    env: Env,
) -> None:
    await env.sandbox.write_file("latin1.txt", "café au lait\n".encode("latin-1"))
    edits = [{"old_text": "au", "new_text": "with"}]
    result = await env.call("file_update", path="latin1.txt", edits=edits)
    assert _code(result) == "binary_file"
    assert "not valid UTF-8" in result.text
    assert await env.sandbox.read_file("latin1.txt") == "café au lait\n".encode("latin-1")


async def test_file_read_of_an_empty_file_says_it_is_empty(env: Env) -> None:
    await env.sandbox.write_file("empty.txt", b"")
    result = await env.call("file_read", path="empty.txt")
    assert not result.is_error
    assert "empty file" in result.text
