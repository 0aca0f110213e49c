"""The per-tree cgroup: the CPU limit (quota, or SCHED_IDLE without one) and stale cgroups."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import anyio
import pytest

from sagents.sandbox import SandboxLimits, SandboxParams, create_sandbox
from sagents.sandbox import _cgroup as cgroup_module
from sagents.sandbox import _local as local
from sagents.sandbox._cgroup import (
    CPU_PERIOD_US,
    cgroup_support,
    create_cgroup,
    remove_stale_cgroups,
)
from sagents.sandbox._process import LocalProcess

pytestmark = pytest.mark.anyio

needs_cgroups = pytest.mark.skipif(
    not cgroup_support().available, reason="cgroups are not writable here"
)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read()


def _cpu_cgroup_of(pid: int) -> tuple[str, str] | None:
    """``(directory, quota file)`` of ``pid``'s cpu cgroup (v1 or v2), None without one."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return f"/sys/fs/cgroup/cpu{path}", "cpu.cfs_quota_us"
    v2 = next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), None)
    if v2 is not None and Path(f"/sys/fs/cgroup{v2}/cpu.max").exists():
        return f"/sys/fs/cgroup{v2}", "cpu.max"
    return None


@needs_cgroups
async def test_the_whole_tree_gets_the_cpu_quota(tmp_path: Path) -> None:
    probe = create_cgroup(memory_bytes=None, processes=None, cpu_cores=0.5)
    assert probe is not None
    probe.remove()
    if not probe.cpu_limited:
        pytest.skip("no writable cpu controller here")
    limits = SandboxLimits(cpu_cores=0.5, wall_timeout_seconds=60)
    params = SandboxParams(workspace=str(tmp_path / "ws"), limits=limits)
    async with create_sandbox("local", params) as sandbox:
        script = "sleep 600 & echo started; chrt -p $$; read x"
        async with sandbox.spawn(["sh", "-c", script], stdin=True) as proc:
            assert proc.stdout is not None
            assert isinstance(proc, LocalProcess)
            seen = b""
            with anyio.fail_after(60):
                while b"priority" not in seen:
                    seen += await proc.stdout.receive()
            found = _cpu_cgroup_of(proc.pid)
            assert found is not None
            directory, quota_file = found
            quota = _read(f"{directory}/{quota_file}").split()[0]
            members = set(_read(f"{directory}/cgroup.procs").split())
            await proc.kill()
    assert int(quota) == CPU_PERIOD_US // 2
    assert str(proc.pid) in members
    assert len(members) >= 4  # bubblewrap, its pid 1, sh, sleep
    assert b"SCHED_OTHER" in seen  # a quota, not a lower priority


@pytest.mark.parametrize("way", ["spawn", "fork"])
async def test_without_a_cpu_cgroup_the_tree_runs_under_sched_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    monkeypatch.setattr(  # as where the cpu controller is not writable
        "sagents.sandbox._local.create_cgroup",
        lambda **kw: create_cgroup(**{**kw, "cpu_cores": None}),
    )
    if way == "fork":
        monkeypatch.setattr(local, "find_helpers", lambda: None)
    params = SandboxParams(workspace=str(tmp_path / "ws"))
    async with create_sandbox("local", params) as sandbox:
        limited = await sandbox.run(["sh", "-c", "chrt -p $$; sh -c 'chrt -p $$'"])
    unlimited_params = SandboxParams(
        workspace=str(tmp_path / "ws2"), limits=SandboxLimits(cpu_cores=None)
    )
    async with create_sandbox("local", unlimited_params) as sandbox:
        unlimited = await sandbox.run(["sh", "-c", "chrt -p $$"])
    assert limited.stdout.count(b"SCHED_IDLE") == 2, limited  # children inherit it
    assert b"SCHED_OTHER" in unlimited.stdout


async def test_the_tree_cannot_leave_sched_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "sagents.sandbox._local.create_cgroup",
        lambda **kw: create_cgroup(**{**kw, "cpu_cores": None}),
    )
    async with create_sandbox("local", SandboxParams(workspace=str(tmp_path / "ws"))) as sandbox:
        done = await sandbox.run(["sh", "-c", "chrt -o -p 0 $$; chrt -p $$"])
    assert b"SCHED_IDLE" in done.stdout, done
    assert b"SCHED_OTHER" not in done.stdout


@needs_cgroups
def test_stale_cgroups_of_ours_are_removed_and_others_kept() -> None:
    parents = cgroup_module._parent_dirs()
    assert parents is not None
    parent = next(iter(parents[1].values()))
    old = os.path.join(parent, f"sagents-{uuid.uuid4().hex[:16]}")
    young = os.path.join(parent, f"sagents-{uuid.uuid4().hex[:16]}")
    foreign = os.path.join(parent, f"other-{uuid.uuid4().hex[:8]}")
    for path in (old, young, foreign):
        os.mkdir(path)
    try:
        an_hour_ago = time.time() - 3600
        os.utime(old, (an_hour_ago, an_hour_ago))
        os.utime(foreign, (an_hour_ago, an_hour_ago))
        removed = remove_stale_cgroups()
        assert old in removed
        assert not os.path.exists(old)
        assert os.path.isdir(young)  # may be another process's, about to be entered
        assert os.path.isdir(foreign)  # not ours
    finally:
        for path in (old, young, foreign):
            if os.path.isdir(path):
                os.rmdir(path)


@needs_cgroups
async def test_a_cgroup_with_a_process_in_it_is_never_removed(tmp_path: Path) -> None:
    params = SandboxParams(workspace=str(tmp_path / "ws"))
    async with (
        create_sandbox("local", params) as sandbox,
        sandbox.spawn(["sh", "-c", "echo up; read x"], stdin=True) as proc,
    ):
        assert proc.stdout is not None
        assert isinstance(proc, LocalProcess)
        with anyio.fail_after(60):
            await proc.stdout.receive()
        own = {line.split(":", 2)[2] for line in _read(f"/proc/{proc.pid}/cgroup").splitlines()}
        removed = remove_stale_cgroups(min_age_s=0)
        await proc.kill()
    ours = [path for path in own if "sagents-" in path]
    assert ours  # the tree is in a cgroup of ours
    assert not [r for r in removed if any(r.endswith(path) for path in ours)]


@needs_cgroups
def test_a_new_sandbox_cleans_up_what_a_killed_host_left(tmp_path: Path) -> None:
    parents = cgroup_module._parent_dirs()
    assert parents is not None
    name = f"sagents-{uuid.uuid4().hex[:16]}"
    left = [os.path.join(parent, name) for parent in parents[1].values()]
    an_hour_ago = time.time() - 3600
    for path in left:
        os.mkdir(path)
        os.utime(path, (an_hour_ago, an_hour_ago))
    create_sandbox("local", SandboxParams(workspace=str(tmp_path / "ws")))
    assert not any(os.path.exists(path) for path in left)
