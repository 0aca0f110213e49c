"""Model-written patterns are matched in linear time (docs/builtin_tools.md, "Regular
expressions and globs"): a pathological `grep` or `glob` finishes, and other calls of the same
process are answered meanwhile."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.core._result import ToolResult
from sagents.sandbox import Sandbox, SandboxParams, create_sandbox
from sagents.sandbox import _hostfs as hostfs_module
from sagents.sandbox import _memory as memory_module
from sagents.sandbox._patterns import compile_regex, glob_regex
from sagents.tool import SessionContext, ToolManager
from sagents.tool.impl import _files as files_module
from sagents.tool.impl import register_builtin_tools, single_sandbox

pytestmark = pytest.mark.anyio

BOUND_S = 60.0  # generous: both calls together take milliseconds with a linear-time engine
EVIL_REGEX = "(a+)+$"  # Python's re takes 2**n steps over n "a" and a "!"
EVIL_GLOB = "*a*a*a*a*a*a*a*a*b"  # fnmatch-style translation: about n**8 steps over n "a"


class Env:
    def __init__(self, manager: ToolManager, sandbox: Sandbox) -> None:
        self.manager = manager
        self.sandbox = sandbox

    async def call(self, name: str, session: str = "s1", **arguments: Any) -> ToolResult:
        return await self.manager.run_tool(name, arguments, SessionContext(session_id=session))


@pytest.fixture(params=["local", "memory"])
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    params = SandboxParams(workspace=str(tmp_path / "ws"))
    async with create_sandbox(request.param, params) as sandbox:
        manager = ToolManager()
        register_builtin_tools(manager, single_sandbox(sandbox))
        await sandbox.write_file("evil.txt", b"a" * 30 + b"!\n")
        await sandbox.write_file("a" * 60, b"x\n")
        await sandbox.write_file("notes.md", b"hello\n")
        yield Env(manager, sandbox)


async def _together(env: Env, name: str, **arguments: Any) -> tuple[ToolResult, ToolResult]:
    """The pathological call and another session's `file_read`, started together; both must
    finish within the bound."""
    results: dict[str, ToolResult] = {}

    async def evil() -> None:
        results["evil"] = await env.call(name, session="attacker", **arguments)

    async def other() -> None:
        results["other"] = await env.call("file_read", session="bystander", path="notes.md")

    with anyio.fail_after(BOUND_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(evil)
            tg.start_soon(other)
    return results["evil"], results["other"]


async def test_a_catastrophic_grep_pattern_finishes_and_other_calls_are_answered(
    env: Env,
) -> None:
    evil, other = await _together(env, "grep", pattern=EVIL_REGEX)
    assert not evil.is_error, evil.text
    assert evil.structured["matches"] == []
    assert "hello" in other.text


async def test_a_catastrophic_glob_finishes_and_other_calls_are_answered(env: Env) -> None:
    evil, other = await _together(env, "glob", pattern=EVIL_GLOB)
    assert not evil.is_error, evil.text
    assert evil.structured["paths"] == []
    assert "hello" in other.text
    matched = await env.call("glob", pattern="*a*a*a*a*a*a*a*a*")
    assert [p.rsplit("/", 1)[-1] for p in matched.structured["paths"]] == ["a" * 60]


async def test_a_catastrophic_grep_include_glob_finishes(env: Env) -> None:
    with anyio.fail_after(BOUND_S):
        result = await env.call("grep", pattern="x", include=EVIL_GLOB)
    assert not result.is_error, result.text
    assert result.structured["matches"] == []


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"(a)\1", "backreferences"),
        ("(?P<w>a)(?P=w)", "named backreference"),
        ("foo(?=bar)", "lookahead"),
        ("foo(?!bar)", "negative lookahead"),
        ("(?<=foo)bar", "lookbehind"),
        ("(?<!foo)bar", "negative lookbehind"),
    ],
)
async def test_grep_refuses_backreferences_and_lookaround_naming_them(
    env: Env, pattern: str, named: str
) -> None:
    result = await env.call("grep", pattern=pattern)
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert named in result.text
    assert "RE2" in result.text


async def test_grep_keeps_the_python_syntax_re2_shares(env: Env) -> None:
    await env.sandbox.write_file("code.py", b"def run(x):\n    return x\nclass Thing:\n")
    result = await env.call("grep", pattern=r"^(?:def|class)\s+(?P<name>\w+)", include="*.py")
    assert [m["line"] for m in result.structured["matches"]] == [1, 3]
    folded = await env.call("grep", pattern="THING", include="*.py", ignore_case=True)
    assert [m["line"] for m in folded.structured["matches"]] == [3]


async def test_an_invalid_glob_class_is_a_clear_error(env: Env) -> None:
    result = await env.call("glob", pattern="[z-a]*")
    assert result.is_error
    assert "invalid glob pattern" in result.text


# RE2 is linear in the text but not in the pattern: this one runs RE2 out of DFA memory, and its
# NFA fallback takes about 3,000 steps per character (seconds for 50,000 "a").
COSTLY_REGEX = "(?:a?){1000}a{1000}b"


ANSWER_S = 30.0  # how long a held match waits for the event loop; a loaded machine answers in ms


class _Watched:
    """Compiles patterns whose first match waits until the event loop answers it.

    A match that runs in a worker thread is answered at once; one that runs on the event loop's
    own thread holds the loop, so nothing answers it and it records that after ``ANSWER_S``.
    Holding the match (not sampling whether one is running) keeps the check exact on a loaded
    machine, where a short match may end before the loop gets to look."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.answered = threading.Event()
        self.answered_during_match = False
        self._first = threading.Lock()

    def compile(self, pattern: str, *, ignore_case: bool = False) -> _Watched:
        self._regex = compile_regex(pattern, ignore_case=ignore_case)
        return self

    def compile_glob(self, pattern: str) -> _Watched:
        self._regex = glob_regex(pattern)
        return self

    def _hold_the_first(self) -> None:
        if self._first.acquire(blocking=False):
            self.started.set()
            self.answered_during_match = self.answered.wait(ANSWER_S)

    def search(self, text: str) -> object | None:
        self._hold_the_first()
        return self._regex.search(text)

    def fullmatch(self, text: str) -> object | None:
        self._hold_the_first()
        return self._regex.fullmatch(text)


async def test_a_costly_glob_runs_off_the_event_loop(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same glob as `grep`'s include, given to the `glob` tool: each sandbox matches it
    in a worker thread (RE2 releases the interpreter), the memory one as the local one."""
    deep = "/".join(["ab" * 120] * 15)
    await env.sandbox.mkdir(deep)
    for i in range(2):
        await env.sandbox.write_file(f"{deep}/{i}", b"x\n")
    watched = _Watched()
    monkeypatch.setattr(memory_module, "glob_regex", watched.compile_glob)
    monkeypatch.setattr(hostfs_module, "glob_regex", watched.compile_glob)
    glob = "**" + "[ab/]" * 2000 + "c"
    result = await _call_while_watched(env, watched, "glob", pattern=glob)
    assert result.structured["paths"] == []


async def _grep_while_watched(env: Env, watched: _Watched, **arguments: Any) -> ToolResult:
    """Run a grep; assert another task ran while one of ``watched``'s matches was running."""
    return await _call_while_watched(env, watched, "grep", **arguments)


async def _call_while_watched(
    env: Env, watched: _Watched, name: str, **arguments: Any
) -> ToolResult:
    """Run a call; assert another task ran while one of ``watched``'s matches was running."""
    results: dict[str, ToolResult] = {}

    async def evil() -> None:
        results["evil"] = await env.call(name, session="attacker", **arguments)

    async def other() -> None:
        if await anyio.to_thread.run_sync(watched.started.wait, BOUND_S):
            watched.answered.set()

    with anyio.fail_after(BOUND_S * 4):
        async with anyio.create_task_group() as tg:
            tg.start_soon(evil)
            tg.start_soon(other)
    assert watched.started.is_set(), "no match ran"
    assert watched.answered_during_match, "the event loop did not run while a match was running"
    return results["evil"]


async def test_a_costly_grep_search_runs_off_the_event_loop(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search RE2 takes seconds over leaves every other session's task running meanwhile."""
    await env.sandbox.write_file("long.txt", b"a" * 50_000 + b"\n")
    watched = _Watched()
    monkeypatch.setattr(files_module, "compile_regex", watched.compile)
    result = await _grep_while_watched(env, watched, pattern=COSTLY_REGEX, path="long.txt")
    assert result.structured["matches"] == []


async def test_a_costly_grep_include_glob_runs_off_the_event_loop(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``**`` then 2,000 classes: RE2's NFA takes ~0.06 s per 1,000 characters of a path."""
    deep = "/".join(["ab" * 120] * 15)  # 3,614 characters
    await env.sandbox.mkdir(deep)
    for i in range(2):
        await env.sandbox.write_file(f"{deep}/{i}", b"x\n")
    watched = _Watched()
    monkeypatch.setattr(files_module, "glob_regex", watched.compile_glob)
    glob = "**" + "[ab/]" * 2000 + "c"  # a class may name "/"
    result = await _grep_while_watched(env, watched, pattern="x", path="ab" * 120, include=glob)
    assert result.structured["matches"] == []
