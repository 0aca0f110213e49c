"""``Sandbox.spawn``: the low-level start that run_script uses (fds 3/4, binds, pipes)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from sagents.errors import SandboxError
from sagents.sandbox import ReadOnlyBind, Sandbox, create_sandbox

pytestmark = pytest.mark.anyio

GUEST = """
import os
print(sorted(int(fd) for fd in os.listdir("/proc/self/fd")), flush=True)
os.write(3, b"ping\\n")
print("reply:", os.read(4, 100).decode().strip(), flush=True)
"""


async def test_extra_fds_become_3_and_4_and_nothing_else_is_open(
    process_sandbox: Sandbox,
) -> None:
    python = process_sandbox.describe().python
    assert python is not None
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    try:
        async with process_sandbox.spawn(
            [python, "-c", GUEST], extra_fds={3: req_w, 4: rep_r}
        ) as proc:
            os.close(req_w)
            os.close(rep_r)
            req_w = rep_r = -1
            assert proc.stdout is not None
            with anyio.fail_after(30):
                listing = await proc.stdout.receive()
                request = await anyio.to_thread.run_sync(os.read, req_r, 100)
                os.write(rep_w, b"pong\n")
                reply = await proc.stdout.receive()
                assert await proc.wait() == 0
    finally:
        for fd in (req_r, req_w, rep_r, rep_w):
            if fd >= 0:
                os.close(fd)
    # 0-4 plus the descriptor listdir itself opens (5)
    assert listing == b"[0, 1, 2, 3, 4, 5]\n"
    assert request == b"ping\n"
    assert reply == b"reply: pong\n"


async def test_a_host_file_is_bound_read_only(bwrap_sandbox: Sandbox, tmp_path: Path) -> None:
    helper = tmp_path / "agent_tools.py"
    helper.write_text("VALUE = 42\n")
    python = bwrap_sandbox.describe().python
    assert python is not None
    code = (
        "import sys; sys.path.insert(0, '/opt/sagents'); import agent_tools;"
        "print(agent_tools.VALUE);"
        "open('/opt/sagents/agent_tools.py', 'w')"
    )
    bind = ReadOnlyBind(host_path=str(helper), sandbox_path="/opt/sagents/agent_tools.py")
    async with bwrap_sandbox.spawn([python, "-c", code], extra_ro_binds=[bind]) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        with anyio.fail_after(30):
            out = await proc.stdout.receive()
            err = b"".join([chunk async for chunk in proc.stderr])
            assert await proc.wait() != 0
    assert out == b"42\n"
    assert b"Read-only file system" in err
    assert helper.read_text() == "VALUE = 42\n"


async def test_spawn_with_stdin_pipe(process_sandbox: Sandbox) -> None:
    async with process_sandbox.spawn(["cat"], stdin=True) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        with anyio.fail_after(30):
            await proc.stdin.send(b"echoed")
            await proc.stdin.aclose()
            out = b"".join([chunk async for chunk in proc.stdout])
            assert await proc.wait() == 0
    assert out == b"echoed"


async def test_spawn_timeout_kills_the_tree(process_sandbox: Sandbox) -> None:
    async with process_sandbox.spawn(["sleep", "600"], timeout=0.3) as proc:
        with anyio.fail_after(30):
            await proc.wait()
    assert proc.killed_reason == "timeout"


async def test_cancelling_the_owner_kills_the_tree(process_sandbox: Sandbox) -> None:
    with anyio.fail_after(30), anyio.CancelScope() as scope:
        async with process_sandbox.spawn(["sh", "-c", "echo up; exec sleep 600"]) as proc:
            assert proc.stdout is not None
            assert await proc.stdout.receive() == b"up\n"
            scope.cancel()
            await proc.wait()
    assert scope.cancelled_caught
    assert proc.killed_reason == "cancelled"
    assert proc.returncode is not None


async def test_extra_fds_must_be_dense_from_3(process_sandbox: Sandbox) -> None:
    r, w = os.pipe()
    try:
        with pytest.raises(ValueError, match="dense from 3"):
            async with process_sandbox.spawn(["true"], extra_fds={5: r}):
                pass
    finally:
        os.close(r)
        os.close(w)


async def test_passthrough_cannot_move_a_bind(tmp_path: Path) -> None:
    async with create_sandbox("passthrough", workspace=str(tmp_path / "ws")) as sandbox:
        bind = ReadOnlyBind(host_path=str(tmp_path), sandbox_path="/elsewhere")
        with pytest.raises(SandboxError, match="no mount namespace"):
            async with sandbox.spawn(["true"], extra_ro_binds=[bind]):
                pass


async def test_memory_sandbox_cannot_spawn(tmp_path: Path) -> None:
    async with create_sandbox("memory", workspace=str(tmp_path)) as sandbox:
        assert not sandbox.describe().supports_spawn
        with pytest.raises(SandboxError, match="cannot spawn"):
            sandbox.spawn(["true"])


async def test_a_missing_program_is_a_clear_error_in_passthrough(tmp_path: Path) -> None:
    async with create_sandbox("passthrough", workspace=str(tmp_path / "ws")) as sandbox:
        with pytest.raises(SandboxError, match="no-such-program"):
            await sandbox.run(["no-such-program-xyz"])
