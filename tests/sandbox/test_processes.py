"""Conformance for providers that run real programs (local and passthrough)."""

from __future__ import annotations

import errno
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.errors import SandboxError
from sagents.sandbox import Sandbox, create_sandbox
from sagents.sandbox import _local as local_provider
from sagents.sandbox._process import open_process

pytestmark = pytest.mark.anyio


async def test_run_feeds_stdin_and_separates_stderr(process_sandbox: Sandbox) -> None:
    done = await process_sandbox.run(
        ["sh", "-c", "tr a-z A-Z; echo oops >&2; exit 3"], stdin=b"shout\n"
    )
    assert (done.exit_code, done.stdout, done.stderr) == (3, b"SHOUT\n", b"oops\n")


async def test_run_timeout_kills_the_program_and_says_so(process_sandbox: Sandbox) -> None:
    with anyio.fail_after(30):
        done = await process_sandbox.run(["sh", "-c", "echo started; exec sleep 600"], timeout=0.5)
    assert done.timed_out
    assert done.killed_reason == "timeout"
    assert done.exit_code is None
    assert b"started\n".startswith(done.stdout)  # on a loaded machine it may not have started


async def test_run_timeout_is_not_stalled_by_a_grandchild_holding_the_pipes(
    process_sandbox: Sandbox,
) -> None:
    with anyio.fail_after(30):
        done = await process_sandbox.run(["sh", "-c", "setsid sleep 600 & sleep 600"], timeout=0.5)
    assert done.timed_out


async def test_run_drains_large_output_keeping_only_the_cap(process_sandbox: Sandbox) -> None:
    done = await process_sandbox.run(
        ["sh", "-c", "head -c 20000000 /dev/zero; echo done >&2"], max_output_bytes=1000
    )
    assert (len(done.stdout), done.stdout_truncated, done.stderr) == (1000, True, b"done\n")


async def test_environment_is_the_allowlist_not_the_host(
    process_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGENTS_TEST_SECRET", "sk-should-not-leak")
    done = await process_sandbox.run(["env"], env={"EXTRA": "given"})
    env = dict(line.split("=", 1) for line in done.stdout.decode().splitlines())
    assert "SAGENTS_TEST_SECRET" not in env
    assert env["EXTRA"] == "given"
    assert env["HOME"] == process_sandbox.describe().workspace


async def test_cwd_defaults_to_the_workspace(process_sandbox: Sandbox) -> None:
    done = await process_sandbox.run(["pwd"])
    assert done.stdout.decode().strip() == process_sandbox.describe().workspace


async def test_a_relative_cwd_is_relative_to_the_workspace(process_sandbox: Sandbox) -> None:
    await process_sandbox.mkdir("sub/dir")
    done = await process_sandbox.run(["pwd"], cwd="sub/dir")
    assert done.stdout.decode().strip() == process_sandbox.describe().workspace + "/sub/dir"


async def test_python_runs_inside(process_sandbox: Sandbox) -> None:
    python = process_sandbox.describe().python
    assert python is not None
    done = await process_sandbox.run([python, "-c", "print(6 * 7)"])
    assert done.stdout == b"42\n"


async def test_stdout_and_stderr_interleave_in_order_in_the_task_log(
    process_sandbox: Sandbox,
) -> None:
    task = await process_sandbox.start(["sh", "-c", "echo 1; echo 2 >&2; echo 3; echo 4 >&2"])
    with anyio.fail_after(30):
        await process_sandbox.wait(task)
    text, _ = await process_sandbox.read_background_output_range(task, 0, 100)
    assert text == "1\n2\n3\n4\n"


async def test_multibyte_characters_are_never_split_across_reads(
    process_sandbox: Sandbox,
) -> None:
    task = await process_sandbox.start(["printf", "a€b😀c"])
    with anyio.fail_after(30):
        await process_sandbox.wait(task)
    pieces, offset = [], 0
    for _ in range(20):
        text, offset = await process_sandbox.read_background_output_range(task, offset, 2)
        if not text:
            break
        pieces.append(text)
    assert "".join(pieces) == "a€b😀c"
    assert all("\ufffd" not in p for p in pieces)


async def test_invalid_utf8_is_replaced_not_stalled(process_sandbox: Sandbox) -> None:
    task = await process_sandbox.start(["printf", "ok\\377\\342\\202"])
    with anyio.fail_after(30):
        await process_sandbox.wait(task)
    text, offset = await process_sandbox.read_background_output_range(task, 0, 100)
    assert text.startswith("ok\ufffd")
    assert offset == 5  # the task ended: the incomplete tail is decoded, not held forever


async def test_background_status_wait_and_kill(process_sandbox: Sandbox) -> None:
    task = await process_sandbox.start(["sh", "-c", "echo ready; exec sleep 600"])
    status = await process_sandbox.status(task)
    assert status.state == "running"
    still = await process_sandbox.wait(task, timeout=0.05)
    assert still.state == "running"
    with anyio.fail_after(30):
        final = await process_sandbox.kill(task)
    assert (final.state, final.killed_reason) == ("killed", "killed")


async def test_kill_ends_a_grandchild_in_its_own_session(process_sandbox: Sandbox) -> None:
    python = process_sandbox.describe().python
    assert python is not None
    script = (
        "import subprocess;"
        "subprocess.Popen(['sleep', '600'], start_new_session=True);"
        "print('ready', flush=True);"
        "subprocess.run(['sleep', '600'])"
    )
    async with process_sandbox.spawn([python, "-c", script]) as proc:
        assert proc.stdout is not None
        with anyio.fail_after(30):
            assert await proc.stdout.receive() == b"ready\n"
            await proc.kill()
            # The grandchild shares the stdout pipe: EOF proves that it is dead too.
            with pytest.raises(anyio.EndOfStream):
                await proc.stdout.receive()
    assert proc.killed_reason == "killed"


async def test_background_task_that_forks_away_is_killed_with_its_tree(
    process_sandbox: Sandbox,
) -> None:
    task = await process_sandbox.start(["sh", "-c", "setsid sleep 600 & echo go; sleep 600"])
    with anyio.fail_after(30):
        while not (await process_sandbox.read_background_output_range(task, 0, 10))[0]:
            await process_sandbox.wait(task, timeout=0.05)
        final = await process_sandbox.kill(task)
    assert final.state == "killed"
    assert final.exit_code is not None


async def test_fifty_megabytes_of_output_do_not_grow_our_memory(process_sandbox: Sandbox) -> None:
    tracemalloc.start()
    try:
        done = await process_sandbox.run(
            ["head", "-c", "50000000", "/dev/zero"], max_output_bytes=4096
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert done.stdout_truncated
    assert peak < 8 * 1024 * 1024


async def test_a_background_start_that_cannot_launch_is_a_clear_error(tmp_path: Path) -> None:
    async with create_sandbox("passthrough", workspace=str(tmp_path / "ws")) as sandbox:
        with pytest.raises(SandboxError, match="no-such-program"):
            await sandbox.start(["no-such-program-xyz"])
        task = await sandbox.start(["echo", "still works"])
        with anyio.fail_after(30):
            assert (await sandbox.wait(task)).exit_code == 0


async def test_a_background_tasks_failed_teardown_never_cancels_the_sandboxs_owner(
    process_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    @asynccontextmanager
    async def failing_teardown(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with open_process(*args, **kwargs) as proc:
            yield proc
        raise OSError(errno.EBUSY, "Device or resource busy")  # as a cgroup that stays busy

    monkeypatch.setattr(local_provider, "open_process", failing_teardown)
    task_id = await process_sandbox.start(["sh", "-c", "exit 3"])
    with anyio.fail_after(30):
        status = await process_sandbox.wait(task_id, timeout=25)
        for _ in range(5):
            await anyio.sleep(0.01)  # the sandbox's owner runs on (it was cancelled before)
    assert (status.state, status.exit_code) == ("exited", 3)
    assert "Device or resource busy" in caplog.text
