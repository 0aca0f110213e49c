"""Read-write binds, the network switch and the address-space limit of the ``local`` sandbox."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from sagents.sandbox import (
    ReadOnlyBind,
    ReadWriteBind,
    SandboxLimits,
    SandboxParams,
    create_sandbox,
)
from sagents.sandbox._bwrap import python_runtime

pytestmark = pytest.mark.anyio

PYTHON = python_runtime()[1]


async def test_a_read_write_bind_below_a_private_tmp_parent_is_writable(tmp_path: Path) -> None:
    data = tmp_path / "deep" / "data"  # below pytest's 0700 directories in the host's /tmp
    data.mkdir(parents=True)
    code = tmp_path / "code"
    code.mkdir()
    params = SandboxParams(
        workspace=str(tmp_path / "ws"),
        extra_rw_binds=(ReadWriteBind(host_path=str(data), sandbox_path=str(data)),),
        extra_ro_binds=(ReadOnlyBind(host_path=str(code), sandbox_path=str(code)),),
    )
    async with create_sandbox("local", params) as sandbox:
        wrote = await sandbox.run(["sh", "-c", f"echo hi > {data}/new.txt"])
        refused = await sandbox.run(["sh", "-c", f"echo hi > {code}/new.txt"])
    assert wrote.ok, wrote
    assert (data / "new.txt").read_text() == "hi\n"
    assert not refused.ok
    assert not (code / "new.txt").exists()


async def test_a_read_write_bind_inside_the_workspace_is_refused(tmp_path: Path) -> None:
    params = SandboxParams(
        workspace=str(tmp_path / "ws"),
        extra_rw_binds=(ReadWriteBind(host_path=str(tmp_path), sandbox_path="/workspace/x"),),
    )
    with pytest.raises(ValueError, match="would lie in the workspace"):
        create_sandbox("local", params)


async def test_the_network_switch_never_shows_the_hosts_loopback(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        results = {}
        for network in (False, True):
            params = SandboxParams(workspace=str(tmp_path / "ws"), network=network)
            async with create_sandbox("local", params) as sandbox:
                results[network] = await sandbox.run([PYTHON, "-c", code])
                warnings = sandbox.describe().warnings
            assert any("egress proxy" in w for w in warnings) == network
    assert not results[False].ok
    assert not results[True].ok  # only through the egress proxy (tests/sandbox/test_egress.py)
    assert b"Connection refused" in results[True].stderr, results[True]


async def test_without_the_address_space_limit_the_cgroup_still_bounds_memory(
    tmp_path: Path,
) -> None:
    reserve = "import mmap; m = mmap.mmap(-1, 1 << 30); print('reserved')"  # 1 GiB, untouched
    fill = "b = bytearray(300 * 1024 * 1024); print('filled')"
    found = {}
    for limit in (True, False):
        limits = SandboxLimits(
            memory_bytes=256 * 1024**2, limit_address_space=limit, wall_timeout_seconds=60
        )
        params = SandboxParams(workspace=str(tmp_path / "ws"), limits=limits)
        async with create_sandbox("local", params) as sandbox:
            assert sandbox.describe().cgroups, "CI runs as root with writable cgroups"
            found[limit] = (
                await sandbox.run([PYTHON, "-c", reserve]),
                await sandbox.run([PYTHON, "-c", fill]),
            )
    assert not found[True][0].ok  # RLIMIT_AS refuses even an untouched reservation
    assert found[False][0].stdout == b"reserved\n"
    assert not found[False][1].ok  # the memory cgroup ends the tree past 256 MiB
