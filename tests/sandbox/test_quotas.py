"""The workspace quota and the cap on background tasks (docs/sandbox.md, "Limits and their
defaults"): what a workspace holds is bounded across runs, background logs count, and the
background tasks running at once are capped."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from sagents.errors import QuotaExceededError, TooManyTasksError
from sagents.sandbox import Sandbox, SandboxLimits, SandboxParams, SharedQuota, create_sandbox
from sagents.sandbox._diskuse import directory_usage_bytes
from sagents.sandbox._local import LocalSandbox

pytestmark = pytest.mark.anyio

MiB = 1024**2


def _limits(**quotas: int | None) -> SandboxLimits:
    return SandboxLimits(
        memory_bytes=512 * MiB,
        processes=64,
        tmp_size_bytes=16 * MiB,
        write_budget_bytes=16 * MiB,
        wall_timeout_seconds=60.0,
        **quotas,  # type: ignore[arg-type]  # workspace_bytes / background_tasks
    )


async def _sandbox(tmp_path: Path, limits: SandboxLimits) -> AsyncIterator[Sandbox]:
    params = SandboxParams(
        workspace=str(tmp_path / "ws"), limits=limits, logs_dir=str(tmp_path / "logs")
    )
    async with create_sandbox("local", params) as sandbox:
        yield sandbox


async def test_runs_in_one_workspace_are_refused_once_the_workspace_quota_is_used(
    tmp_path: Path,
) -> None:
    # Six runs of 12 MiB each stay under the 16 MiB write budget of each run; the 40 MiB quota
    # of the workspace holds across them.
    outcomes: list[str] = []
    async for sandbox in _sandbox(tmp_path, _limits(workspace_bytes=40 * MiB)):
        for n in range(6):
            try:
                with anyio.fail_after(60):
                    done = await sandbox.run(["sh", "-c", f"head -c {12 * MiB} /dev/zero > f{n}"])
            except QuotaExceededError as error:
                setting = "quotas.workspaceBytes"
                named = error.details["limit"] == setting and setting in error.message
                outcomes.append("refused" if named else "refused without naming the setting")
            else:
                outcomes.append(done.killed_reason or f"exit {done.exit_code}")
        assert isinstance(sandbox, LocalSandbox)
        used = await anyio.to_thread.run_sync(sandbox.usage_bytes)
    assert outcomes[:3] == ["exit 0"] * 3
    assert outcomes[4:] == ["refused", "refused"]
    assert used <= 40 * MiB + 16 * MiB  # at most one run's budget past the quota


async def test_a_running_tree_is_ended_past_the_workspace_quota(tmp_path: Path) -> None:
    limits = _limits(workspace_bytes=8 * MiB)
    async for sandbox in _sandbox(tmp_path, limits):
        with anyio.fail_after(60):
            done = await sandbox.run(
                [
                    "sh",
                    "-c",
                    "i=0; while [ $i -lt 200 ]; do head -c 1048576 /dev/zero > f$i; "
                    "i=$((i+1)); sleep 0.02; done",
                ]
            )
        assert done.killed_reason == "workspace_quota"
        assert len(await sandbox.glob("f*")) < 200


async def test_background_logs_live_in_the_logs_dir_and_count_against_the_quota(
    tmp_path: Path,
) -> None:
    async for sandbox in _sandbox(tmp_path, _limits(workspace_bytes=8 * MiB)):
        task_id = await sandbox.start(
            [
                "sh",
                "-c",
                "i=0; while [ $i -lt 200 ]; do head -c 1048576 /dev/zero; "
                "i=$((i+1)); sleep 0.02; done",
            ]
        )
        with anyio.fail_after(60):
            status = await sandbox.wait(task_id, timeout=60)
        assert status.killed_reason == "workspace_quota"
        assert Path(status.log_path).parent == tmp_path / "logs"
        assert status.output_bytes < 200 * MiB
        # The log alone (nothing in the workspace) holds the quota: nothing else starts.
        assert directory_usage_bytes(str(tmp_path / "ws")) < MiB
        with pytest.raises(QuotaExceededError, match=r"quotas\.workspaceBytes"):
            await sandbox.run(["true"])
        with pytest.raises(QuotaExceededError):
            await sandbox.start(["true"])
        assert os.listdir(tmp_path / "logs") == [f"{task_id}.log"]  # the refused one left none
    assert not (tmp_path / "logs").exists()  # closing removes its logs (and the empty dir)


async def test_one_background_task_more_than_the_cap_is_refused_with_too_many_tasks(
    tmp_path: Path,
) -> None:
    async for sandbox in _sandbox(tmp_path, _limits(background_tasks=2)):
        first = await sandbox.start(["sleep", "60"])
        await sandbox.start(["sleep", "60"])
        with pytest.raises(TooManyTasksError) as caught:
            await sandbox.start(["sleep", "60"])
        assert caught.value.code == "too_many_tasks"
        assert caught.value.details["limit"] == "quotas.backgroundTasksPerSession"
        assert "quotas.backgroundTasksPerSession" in caught.value.message
        await sandbox.kill(first)
        third = await sandbox.start(["true"])  # a task ended: there is room again
        with anyio.fail_after(60):
            assert (await sandbox.wait(third, timeout=60)).exit_code == 0


def test_quota_limits_must_be_positive() -> None:
    for name in ("workspace_bytes", "background_tasks"):
        with pytest.raises(ValueError, match=name):
            SandboxLimits(**{name: -1})  # type: ignore[arg-type]


async def test_the_file_api_is_held_to_the_workspace_quota(tmp_path: Path) -> None:
    async for sandbox in _sandbox(tmp_path, _limits(workspace_bytes=8 * MiB)):
        await sandbox.write_file("a.bin", bytes(5 * MiB))
        with pytest.raises(QuotaExceededError, match=r"quotas\.workspaceBytes"):
            await sandbox.write_file("b.bin", bytes(5 * MiB))
        assert not await sandbox.exists("b.bin")


async def test_a_shared_quota_counts_every_workspace_it_names(tmp_path: Path) -> None:
    """The gateway's per-principal quota: a sandbox refuses to start anything, and to write,
    once its workspace and the other directories of its principal hold the shared quota, and a
    running tree is ended past it; a sandbox outside the group is not held."""
    other = tmp_path / "other-session"
    other.mkdir()
    (other / "old.bin").write_bytes(b"x" * 12 * MiB)
    shared = SharedQuota(
        limit_bytes=20 * MiB, setting="quotas.principalBytes", elsewhere=lambda: (str(other),)
    )
    params = SandboxParams(
        workspace=str(tmp_path / "ws"),
        limits=_limits(),
        logs_dir=str(tmp_path / "logs"),
        shared_quota=shared,
    )
    async with create_sandbox("local", params) as sandbox:
        with anyio.fail_after(60):
            first = await sandbox.run(["sh", "-c", f"head -c {6 * MiB} /dev/zero > a"])
        assert first.exit_code == 0
        with anyio.fail_after(60):
            second = await sandbox.run(["sh", "-c", f"head -c {12 * MiB} /dev/zero > b; sleep 60"])
        assert second.killed_reason == "workspace_quota"
        with pytest.raises(QuotaExceededError) as refused:
            await sandbox.run(["true"])
        assert refused.value.details["limit"] == "quotas.principalBytes"
        assert "quotas.principalBytes" in refused.value.message
        with pytest.raises(QuotaExceededError):
            await sandbox.write_file("c", b"x")
    alone = SandboxParams(workspace=str(tmp_path / "alone"), limits=_limits())
    async with create_sandbox("local", alone) as sandbox:
        with anyio.fail_after(60):
            assert (await sandbox.run(["true"])).exit_code == 0


def test_a_shared_quota_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit_bytes"):
        SharedQuota(limit_bytes=0, setting="quotas.principalBytes", elsewhere=tuple)


async def test_bytes_charged_elsewhere_count_against_the_quotas(tmp_path: Path) -> None:
    """What the owner keeps for the workspace outside its directories (the gateway's stored
    results: ``SandboxParams.charged_bytes``, ``SharedQuota.charged_bytes``) counts with its
    files: a write or a run gets only the remainder, and the shared quota counts the
    principal's charges once (this sandbox's among them)."""
    params = SandboxParams(
        workspace=str(tmp_path / "ws"),
        limits=_limits(workspace_bytes=8 * MiB),
        logs_dir=str(tmp_path / "logs"),
        charged_bytes=lambda: 6 * MiB,
    )
    async with create_sandbox("local", params) as sandbox:
        await sandbox.write_file("a.bin", bytes(MiB))
        with pytest.raises(QuotaExceededError, match=r"quotas\.workspaceBytes"):
            await sandbox.write_file("b.bin", bytes(2 * MiB))
        assert not await sandbox.exists("b.bin")
        with anyio.fail_after(60):
            done = await sandbox.run(["sh", "-c", f"head -c {2 * MiB} /dev/zero > c; sleep 60"])
        assert done.killed_reason == "workspace_quota"
        with pytest.raises(QuotaExceededError, match=r"quotas\.workspaceBytes"):
            await sandbox.run(["true"])
    shared = SharedQuota(
        limit_bytes=20 * MiB,
        setting="quotas.principalBytes",
        elsewhere=tuple,
        charged_bytes=lambda: 6 * MiB,  # the principal's: the 6 MiB below among them
    )
    params = SandboxParams(
        workspace=str(tmp_path / "ws2"),
        limits=_limits(),
        logs_dir=str(tmp_path / "logs2"),
        shared_quota=shared,
        charged_bytes=lambda: 6 * MiB,
    )
    async with create_sandbox("local", params) as sandbox:
        await sandbox.write_file("a.bin", bytes(12 * MiB))  # 18 MiB of 20: counted once
        with pytest.raises(QuotaExceededError) as refused:
            await sandbox.write_file("b.bin", bytes(2 * MiB))
        assert refused.value.details["limit"] == "quotas.principalBytes"
