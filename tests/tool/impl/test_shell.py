"""The built-in shell tools on the local (bubblewrap) sandbox."""

from __future__ import annotations

import dataclasses
import os
import random
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.core._result import ToolResult
from sagents.core.events import ToolProgressEvent
from sagents.progress import ProgressHub
from sagents.sandbox import Sandbox, SandboxLimits, SandboxParams, create_sandbox
from sagents.tool import SessionContext, ToolManager
from sagents.tool.impl import BuiltinSettings, register_builtin_tools, single_sandbox

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(
    memory_bytes=512 * 1024**2,
    processes=64,
    tmp_size_bytes=16 * 1024**2,
    write_budget_bytes=8 * 1024**2,
    file_size_bytes=128 * 1024**2,
    wall_timeout_seconds=120.0,
)


class Env:
    def __init__(self, sandbox: Sandbox, settings: BuiltinSettings | None = None) -> None:
        self.sandbox = sandbox
        self.hub = ProgressHub()
        self.manager = ToolManager(progress_hub=self.hub)
        register_builtin_tools(self.manager, single_sandbox(sandbox), settings=settings)

    async def call(self, name: str, session: str = "s1", **arguments: Any) -> ToolResult:
        return await self.manager.run_tool(
            name, arguments, SessionContext(session_id=session), tool_call_id="call_1"
        )

    async def call_collecting(self, name: str, **arguments: Any) -> tuple[ToolResult, str]:
        """Run a call while a consumer of session s1 collects its progress text."""
        texts: list[str] = []
        results: list[ToolResult] = []
        async with self.hub.subscribe("s1") as queue:

            async def run() -> None:
                results.append(await self.call(name, **arguments))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                with anyio.fail_after(60):
                    while True:
                        event = await queue.receive()
                        assert isinstance(event, ToolProgressEvent)
                        if event.closed:
                            break
                        texts.append(event.text)
        return results[0], "".join(texts)


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[Sandbox]:
    params = SandboxParams(workspace=str(tmp_path / "ws"), limits=LIMITS)
    async with create_sandbox("local", params) as box:
        yield box


@pytest.fixture
def env(sandbox: Sandbox) -> Env:
    return Env(sandbox, BuiltinSettings(shell_tail_bytes=64, shell_poll_seconds=0.05))


def _code(result: ToolResult) -> str | None:
    assert result.is_error, result.text
    assert result.error is not None
    return result.error.code


def _processes_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
            except OSError:
                continue
    return found


async def test_a_command_that_ends_reports_exit_code_output_and_log(env: Env) -> None:
    result = await env.call("execute_shell_command", command="echo hello; echo oops >&2; exit 3")
    assert not result.is_error, result.text
    s = result.structured
    assert (s["state"], s["exit_code"], s["output"]) == ("exited", 3, "hello\noops\n")
    assert s["output_bytes"] == 11
    assert not s["output_truncated"]
    assert "exited with code 3" in result.text
    assert s["log_path"]


async def test_a_long_output_keeps_its_tail_with_a_marker_and_the_total_size(env: Env) -> None:
    result = await env.call("execute_shell_command", command="seq 1 1000")
    s = result.structured
    assert s["output_truncated"]
    assert s["output_bytes"] == 3893
    assert s["output"].endswith("999\n1000\n")
    assert len(s["output"].encode()) <= 64
    assert "earlier bytes not shown" in result.text
    assert s["log_path"] in result.text


async def test_await_with_a_timeout_returns_while_the_task_runs_then_kill_ends_it(
    env: Env,
) -> None:
    with anyio.fail_after(30):
        started = await env.call("execute_shell_command", command="sleep 600", wait_seconds=0)
        task_id = started.structured["task_id"]
        assert started.structured["state"] == "running"
        waited = await env.call("await_shell", task_id=task_id, wait_seconds=0.2)
        assert waited.structured["state"] == "running"
        assert "still running" in waited.text
        killed = await env.call("kill_shell", task_id=task_id)
    assert killed.structured["state"] == "killed"


async def test_await_returns_the_result_of_a_task_that_finished_meanwhile(env: Env) -> None:
    with anyio.fail_after(30):
        started = await env.call(
            "execute_shell_command", command="sleep 0.2; echo done", wait_seconds=0
        )
        done = await env.call("await_shell", task_id=started.structured["task_id"])
    assert (done.structured["state"], done.structured["output"]) == ("exited", "done\n")


async def test_kill_ends_the_whole_tree_including_a_grandchild_in_its_own_session(
    env: Env,
) -> None:
    marker = f"{random.randint(100_000, 999_999)}.5"
    command = f"setsid sleep {marker} & sleep {marker}1 & echo go; wait"
    with anyio.fail_after(30):
        started = await env.call("execute_shell_command", command=command, wait_seconds=0)
        task_id = started.structured["task_id"]
        while len(_processes_with(marker)) < 2:
            await env.sandbox.wait(task_id, timeout=0.05)
        killed = await env.call("kill_shell", task_id=task_id)
        assert killed.structured["state"] == "killed"
        while _processes_with(marker):
            await env.sandbox.wait(task_id, timeout=0.05)
    assert _processes_with(marker) == []


async def test_two_sessions_tasks_are_kept_apart(env: Env) -> None:
    with anyio.fail_after(30):
        started = await env.call(
            "execute_shell_command", session="alice", command="sleep 600", wait_seconds=0
        )
        task_id = started.structured["task_id"]
        stolen_wait = await env.call("await_shell", session="bob", task_id=task_id)
        stolen_kill = await env.call("kill_shell", session="bob", task_id=task_id)
        assert _code(stolen_wait) == "task_not_found"
        assert _code(stolen_kill) == "task_not_found"
        assert "in this session" in stolen_kill.text
        assert (await env.sandbox.status(task_id)).state == "running"
        killed = await env.call("kill_shell", session="alice", task_id=task_id)
    assert killed.structured["state"] == "killed"


async def test_progress_events_concatenate_to_the_log_without_duplicate_or_loss(
    env: Env,
) -> None:
    command = 'i=0; while [ $i -lt 4000 ]; do echo "línea $i €😀"; i=$((i+1)); done'
    result, streamed = await env.call_collecting("execute_shell_command", command=command)
    expected = "".join(f"línea {i} €😀\n" for i in range(4000))
    assert result.structured["exit_code"] == 0
    assert result.structured["output_bytes"] == len(expected.encode())
    assert streamed == expected


async def test_a_character_split_across_two_writes_and_reads_arrives_whole(
    sandbox: Sandbox,
) -> None:
    env = Env(sandbox, BuiltinSettings(read_chunk_bytes=1, shell_poll_seconds=0.02))
    # "€" is E2 82 AC: the first two bytes are written, then the last one later.
    command = r"printf 'x\342\202'; sleep 0.3; printf '\254y😀\n'"
    result, streamed = await env.call_collecting("execute_shell_command", command=command)
    assert streamed == "x€y😀\n"
    assert result.structured["output"] == "x€y😀\n"


@pytest.mark.parametrize(
    "command",
    [
        "head -c 50000000 /dev/zero | tr '\\0' 'a'",
        # the same, written over seconds: the write-budget watchdog scans the task's log meanwhile
        "for i in $(seq 50); do head -c 1000000 /dev/zero | tr '\\0' 'a'; sleep 0.05; done",
    ],
    ids=["at once", "over seconds"],
)
async def test_fifty_megabytes_of_output_do_not_grow_our_memory(
    tmp_path: Path, command: str
) -> None:
    # A background task's log counts towards the write budget (the host stores it), so this
    # sandbox's budget holds the 50 MB: what is measured here is memory, not the budget.
    limits = dataclasses.replace(LIMITS, write_budget_bytes=128 * 1024**2)
    params = SandboxParams(workspace=str(tmp_path / "ws"), limits=limits)
    tracemalloc.start()
    try:
        async with create_sandbox("local", params) as sandbox:
            env = Env(sandbox)
            # however slow a loaded machine writes the 50 MB, wait for the task to end
            # (await_shell until it is no longer running): what is measured is memory, not speed
            with anyio.fail_after(900):
                result = await env.call(
                    "execute_shell_command", command=command, wait_seconds=60, timeout_seconds=850
                )
                while result.structured["state"] == "running":
                    result = await env.call(
                        "await_shell", task_id=result.structured["task_id"], wait_seconds=60
                    )
            peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.structured["state"] == "exited"
    assert result.structured["output_bytes"] == 50_000_000
    assert result.structured["output_truncated"]
    assert len(result.structured["output"]) == 16 * 1024
    assert peak < 16 * 1024 * 1024


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("execute_shell_command", {"command": ""}),
        ("execute_shell_command", {"command": "   "}),
        ("execute_shell_command", {"command": "true", "wait_seconds": -1}),
        ("execute_shell_command", {"command": "true", "timeout_seconds": 0}),
        ("execute_shell_command", {"command": "true", "bogus": 1}),
        ("execute_shell_command", {}),
        ("await_shell", {}),
        ("await_shell", {"task_id": ""}),
        ("kill_shell", {"task_id": 5}),
    ],
)
async def test_bad_shell_arguments_are_invalid_arguments(
    env: Env, name: str, arguments: dict[str, Any]
) -> None:
    assert _code(await env.call(name, **arguments)) == "invalid_arguments"


@pytest.mark.parametrize("name", ["await_shell", "kill_shell"])
async def test_an_unknown_task_id_is_task_not_found(env: Env, name: str) -> None:
    result = await env.call(name, task_id="no-such-task")
    assert _code(result) == "task_not_found"
    assert "no-such-task" in result.text


async def test_a_working_directory_outside_the_workspace_is_refused(env: Env) -> None:
    result = await env.call("execute_shell_command", command="pwd", cwd="../..")
    assert _code(result) == "path_not_allowed"


async def test_a_missing_working_directory_is_file_not_found(env: Env) -> None:
    result = await env.call("execute_shell_command", command="pwd", cwd="ghost")
    assert _code(result) == "file_not_found"


async def test_a_working_directory_inside_the_workspace_is_used(env: Env) -> None:
    await env.sandbox.mkdir("sub")
    result = await env.call("execute_shell_command", command="pwd", cwd="sub")
    assert result.structured["output"] == "/workspace/sub\n"


async def test_a_wait_longer_than_the_call_timeout_is_cut_to_fit_inside_it(env: Env) -> None:
    with anyio.fail_after(30):
        result = await env.manager.run_tool(
            "execute_shell_command",
            {"command": "sleep 600", "wait_seconds": 500},
            SessionContext(session_id="s1"),
            timeout=2,
        )
        assert not result.is_error, result.text
        assert result.structured["state"] == "running"
        await env.call("kill_shell", task_id=result.structured["task_id"])


async def test_the_oldest_finished_tasks_are_forgotten_beyond_the_cap(sandbox: Sandbox) -> None:
    env = Env(sandbox, BuiltinSettings(shell_max_tasks_per_session=2))
    with anyio.fail_after(60):
        running = await env.call("execute_shell_command", command="sleep 600", wait_seconds=0)
        ids = [running.structured["task_id"]]
        for n in range(3):
            done = await env.call("execute_shell_command", command=f"echo {n}")
            ids.append(done.structured["task_id"])
        results = [await env.call("await_shell", task_id=i, wait_seconds=0) for i in ids]
    assert results[0].structured["state"] == "running"
    assert [r.error.code if r.error else None for r in results[1:]] == [
        "task_not_found",
        "task_not_found",
        None,
    ]
