"""run_script's spare sandbox: started ahead of the next run, used once, never shared."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.core._limits import ScriptLimits
from sagents.sandbox import LocalSandbox, SandboxLimits, SandboxParams
from sagents.sandbox._process import LocalProcess
from sagents.script._runner import ScriptRunner
from sagents.script._runtime import ScriptRuntime
from sagents.script._sandbox_launcher import SandboxLauncher
from sagents.script._values import ScriptRequest, ScriptRunResult
from tests.script.conftest import SPECS, FakeTools

pytestmark = pytest.mark.anyio

ENV_AND_TMP = (
    "import os, sys\n"
    "print(sorted(os.environ), os.environ['SAGENTS_SCRIPT_ID'])\n"
    "print(os.path.exists('/tmp/mark'), sys.argv[0].endswith('/script.py'))\n"
    "open('/tmp/mark', 'w').write('run')\n"
    "from agent_tools import call\n"
    "print(call('fleet__get', {'sn': 'A1'})['sn'])\n"
)


@pytest.fixture
async def launcher(workspace: Path) -> AsyncIterator[SandboxLauncher]:
    async with SandboxLauncher(LocalSandbox(SandboxParams(workspace=str(workspace)))) as entered:
        yield entered


def _runner(
    runtime: ScriptRuntime, workspace: Path, launcher: SandboxLauncher, mode: str = "auto"
) -> ScriptRunner:
    return ScriptRunner(
        specs=SPECS,
        call_tool=FakeTools(),
        workspace=workspace,
        runtime=runtime,
        launcher=launcher,
        mode=mode,  # type: ignore[arg-type]  # tests pass valid literals
        limits=ScriptLimits(timeout_s=60.0),
    )


async def _run(runner: ScriptRunner, code: str) -> ScriptRunResult:
    with anyio.fail_after(90):
        return await runner.run(ScriptRequest(code=code, description="test"))


def _any_exists(paths: tuple[str, ...]) -> bool:
    return any(os.path.exists(path) for path in paths)


async def _spare(launcher: SandboxLauncher) -> LocalProcess:
    with anyio.fail_after(90):
        await launcher.spare_ready()
    process = launcher.spare_process
    assert isinstance(process, LocalProcess)
    return process


async def test_the_next_run_gets_the_spare_a_fresh_tmp_and_the_same_environment(
    runtime: ScriptRuntime, workspace: Path, launcher: SandboxLauncher
) -> None:
    os.environ["SAGENTS_TEST_SECRET"] = "not for scripts"
    try:
        cold = await _run(_runner(runtime, workspace, launcher), ENV_AND_TMP)
        await _spare(launcher)
        warm = await _run(_runner(runtime, workspace, launcher), ENV_AND_TMP)
    finally:
        del os.environ["SAGENTS_TEST_SECRET"]
    assert (cold.status, warm.status) == ("ok", "ok"), warm.output
    assert launcher.spares_used == 1
    cold_lines, warm_lines = cold.output.splitlines()[1:], warm.output.splitlines()[1:]
    assert warm_lines[0] == cold_lines[0].replace(cold.script_id, warm.script_id)
    assert "SAGENTS_TEST_SECRET" not in warm_lines[0]
    assert warm_lines[1:] == ["False True", "A1"]  # run 1's /tmp/mark is not there


async def test_each_spare_serves_one_run(
    runtime: ScriptRuntime, workspace: Path, launcher: SandboxLauncher
) -> None:
    await _run(_runner(runtime, workspace, launcher), "pass\n")
    first = await _spare(launcher)
    result = await _run(_runner(runtime, workspace, launcher), "print(1)\n")
    assert result.status == "ok"
    second = await _spare(launcher)
    assert second is not first
    assert launcher.spares_used == 1
    with anyio.fail_after(30):
        await first.wait()  # the used spare's tree is gone


async def test_a_spare_is_dropped_when_the_run_needs_another_configuration(
    runtime: ScriptRuntime, workspace: Path, launcher: SandboxLauncher
) -> None:
    await _run(_runner(runtime, workspace, launcher), "pass\n")
    spare = await _spare(launcher)
    code = "open('written.txt', 'w').write('x')\n"
    result = await _run(_runner(runtime, workspace, launcher, mode="read_only"), code)
    assert result.status == "error"  # a read-only workspace: the read-write spare was not used
    assert "Read-only file system" in result.output
    assert launcher.spares_used == 0
    assert not (workspace / "written.txt").exists()
    with anyio.fail_after(30):
        await spare.wait()  # dropped: killed


async def test_a_spare_never_serves_another_session(runtime: ScriptRuntime, tmp_path: Path) -> None:
    ws_a, ws_b = tmp_path / "a", tmp_path / "b"
    async with (
        SandboxLauncher(LocalSandbox(SandboxParams(workspace=str(ws_a)))) as a,
        SandboxLauncher(LocalSandbox(SandboxParams(workspace=str(ws_b)))) as b,
    ):
        await _run(_runner(runtime, ws_a, a), "open('a.txt', 'w').write('a')\n")
        await _spare(a)
        result = await _run(_runner(runtime, ws_b, b), "import os\nprint(os.listdir('.'))\n")
        assert result.status == "ok"
        assert "a.txt" not in result.output
        assert (a.spares_used, b.spares_used) == (0, 0)
        assert a.spare_process is not None  # A's spare waits for A's next run


async def test_a_dead_spare_is_replaced_by_a_cold_start(
    runtime: ScriptRuntime, workspace: Path, launcher: SandboxLauncher
) -> None:
    await _run(_runner(runtime, workspace, launcher), "pass\n")
    spare = await _spare(launcher)
    os.kill(spare.pid, signal.SIGKILL)
    with anyio.fail_after(30):
        await spare.wait()
    result = await _run(_runner(runtime, workspace, launcher), "print('ran')\n")
    assert result.status == "ok", result.output
    assert result.output.splitlines()[1:] == ["ran"]
    assert launcher.spares_used == 0


async def test_an_unused_spare_ends_after_its_idle_time(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    sandbox = LocalSandbox(SandboxParams(workspace=str(workspace)))
    # The idle time counts from the spare's start: one not ready within it ends unseen, and
    # the wait for it below runs to its bound. 5 s leaves a loaded machine room to start it.
    async with SandboxLauncher(sandbox, spare_idle_s=5.0) as launcher:
        await _run(_runner(runtime, workspace, launcher), "pass\n")
        spare = await _spare(launcher)
        with anyio.fail_after(60):
            await spare.wait()
        assert launcher.spare_process is None


async def test_closing_the_launcher_kills_the_spare_and_removes_its_cgroup(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    sandbox = LocalSandbox(SandboxParams(workspace=str(workspace)))
    async with SandboxLauncher(sandbox) as launcher:
        await _run(_runner(runtime, workspace, launcher), "pass\n")
        spare = await _spare(launcher)
        cgroup = spare._spec.cgroup
        assert spare.returncode is None
    assert spare.returncode is not None  # reaped: killed at exit
    with pytest.raises(ProcessLookupError):
        os.kill(spare.pid, 0)
    if cgroup is not None:
        assert not _any_exists(cgroup.dirs)


def _write_file(path: Path, size: int) -> None:
    path.write_bytes(b"x" * size)


async def test_a_spare_run_is_charged_only_for_what_it_writes(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    limits = SandboxLimits(write_budget_bytes=2 * 1024**2)
    sandbox = LocalSandbox(SandboxParams(workspace=str(workspace), limits=limits))
    async with SandboxLauncher(sandbox) as launcher:
        await _run(_runner(runtime, workspace, launcher), "pass\n")
        await _spare(launcher)
        # Someone else (a file tool of the session) writes while the spare waits...
        await anyio.to_thread.run_sync(_write_file, workspace / "other.bin", 3 * 1024**2 // 2)
        # ...then the run writes 1 MiB and lives long enough for the watchdog to measure.
        code = "import time\nopen('mine.bin', 'wb').write(b'y' * 2**20)\ntime.sleep(2)\n"
        result = await _run(_runner(runtime, workspace, launcher), code)
    assert launcher.spares_used == 1
    assert result.status == "ok", result.output


async def test_back_to_back_runs_each_get_their_own_run_whatever_state_the_spare_is_in(
    runtime: ScriptRuntime, workspace: Path, launcher: SandboxLauncher
) -> None:
    # No wait for readiness: a run may reach the spare while it starts, as it says it is
    # ready, or after (the hand-over must work in every case).
    for i in range(12):
        result = await _run(_runner(runtime, workspace, launcher), f"print({i})\n")
        assert result.status == "ok", result.output
        assert result.output.splitlines()[1:] == [str(i)]
        if i % 3 == 0:
            with anyio.fail_after(90):
                while launcher.spare_process is None:
                    await launcher._changed.wait()  # a spare exists, ready or not
    assert launcher.spares_used >= 4  # the runs after each wait took a spare


def _replace_directory(path: Path) -> None:
    path.rename(path.with_name("old-" + path.name))
    path.mkdir()
    (path / "data.txt").write_text("new")


async def test_a_spare_is_not_used_once_its_workspace_was_replaced(
    runtime: ScriptRuntime, workspace: Path, launcher: SandboxLauncher
) -> None:
    await _run(_runner(runtime, workspace, launcher), "pass\n")
    spare = await _spare(launcher)
    _replace_directory(workspace)  # the same path, another directory: the spare holds the old
    result = await _run(_runner(runtime, workspace, launcher), "print(open('data.txt').read())\n")
    assert result.status == "ok", result.output
    assert result.output.splitlines()[1:] == ["new"]
    assert launcher.spares_used == 0
    with anyio.fail_after(30):
        await spare.wait()  # dropped: killed


class _TimeoutsSeen(LocalSandbox):
    """A local sandbox that notes the wall bound each spawn was given."""

    timeouts: list[float | None]

    def spawn(self, argv: Any, **kwargs: Any) -> Any:
        self.timeouts.append(kwargs.get("timeout"))
        return super().spawn(argv, **kwargs)


async def test_a_spare_without_a_launcher_bound_adds_its_idle_time_to_the_sandboxs_own(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    limits = SandboxLimits(wall_timeout_seconds=30.0)
    sandbox = _TimeoutsSeen(SandboxParams(workspace=str(workspace), limits=limits))
    sandbox.timeouts = []
    async with SandboxLauncher(sandbox, spare_idle_s=50.0) as launcher:  # no timeout_s
        await _run(_runner(runtime, workspace, launcher), "pass\n")
        await _spare(launcher)
    # The cold run: the sandbox's own 30 s; the spare: those 30 s after up to 50 s unused.
    assert sandbox.timeouts == [None, 80.0]


async def test_six_runs_in_one_workspace_are_held_to_the_workspace_quota(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    # Each run writes 12 MiB, under its 16 MiB write budget; the workspace's 40 MiB quota
    # holds across the runs, spare sandbox or not (at most one run's budget past it).
    limits = SandboxLimits(write_budget_bytes=16 * 1024**2, workspace_bytes=40 * 1024**2)
    sandbox = LocalSandbox(SandboxParams(workspace=str(workspace), limits=limits))
    results = []
    async with SandboxLauncher(sandbox) as launcher:
        for n in range(6):
            code = f"open('f{n}', 'wb').write(bytes(12 * 1024 * 1024))\n"
            results.append(await _run(_runner(runtime, workspace, launcher), code))
    assert [r.status for r in results[:3]] == ["ok"] * 3
    for refused in results[4:]:
        assert refused.status == "sandbox_error"
        assert "quotas.workspaceBytes" in refused.output
    assert len(os.listdir(workspace)) <= 4 + 1  # f0..f3 at most, and .agent
