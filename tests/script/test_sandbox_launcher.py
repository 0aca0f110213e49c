"""run_script inside the real sandbox (bubblewrap): fds, network, read-only places, kills."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import anyio
import pytest

from sagents.core._limits import ScriptLimits
from sagents.errors import SandboxError
from sagents.sandbox import LocalSandbox, SandboxLimits, SandboxParams, create_sandbox
from sagents.script._launcher import LaunchSpec
from sagents.script._runner import ScriptRunner
from sagents.script._runtime import ScriptRuntime
from sagents.script._sandbox_launcher import RUNTIME_MOUNT, SandboxLauncher
from sagents.script._values import ScriptRequest, ScriptRunResult
from tests.script.conftest import SPECS, FakeTools

pytestmark = pytest.mark.anyio


def _runner(
    runtime: ScriptRuntime,
    workspace: Path,
    *,
    mode: str = "auto",
    limits: ScriptLimits | None = None,
    sandbox_limits: SandboxLimits | None = None,
) -> ScriptRunner:
    params = SandboxParams(workspace=str(workspace), limits=sandbox_limits or SandboxLimits())
    sandbox = LocalSandbox(params)
    return ScriptRunner(
        specs=SPECS,
        call_tool=FakeTools(),
        workspace=workspace,
        runtime=runtime,
        launcher=SandboxLauncher(sandbox),
        mode=mode,  # type: ignore[arg-type]  # tests pass valid literals
        limits=limits or ScriptLimits(timeout_s=60.0),
    )


async def _run(runner: ScriptRunner, code: str) -> ScriptRunResult:
    with anyio.fail_after(90):
        return await runner.run(ScriptRequest(code=code, description="test"))


def _printed(result: ScriptRunResult) -> list[str]:
    return result.output.splitlines()[1:]


async def test_the_script_sees_exactly_fds_0_to_4_inside_bubblewrap(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    code = (
        "import os\n"
        "fds = []\n"
        "for fd in range(1024):\n"
        "    try:\n"
        "        os.fstat(fd)\n"
        "    except OSError:\n"
        "        continue\n"
        "    fds.append(fd)\n"
        "print(fds, os.getcwd())\n"
        "from agent_tools import call\n"
        "print(call('fleet__get', {'sn': 'A1'})['sn'])\n"
    )
    result = await _run(_runner(runtime, workspace), code)
    assert result.status == "ok", result.output
    assert _printed(result) == ["[0, 1, 2, 3, 4] /workspace", "A1"]


async def test_the_script_has_no_network(runtime: ScriptRuntime, workspace: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    code = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
        "    print('connected')\n"
        "except OSError as exc:\n"
        "    print('refused', type(exc).__name__)\n"
    )
    try:
        result = await _run(_runner(runtime, workspace), code)
    finally:
        listener.close()
    assert result.status == "ok", result.output
    assert _printed(result)[0].startswith("refused")


async def test_agent_dir_and_records_cannot_be_tampered_with_from_inside(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    code = (
        "import os, glob\n"
        "records = glob.glob('.agent/scripts/*/')[0]\n"
        "for attempt in ('write', 'symlink', 'rename', 'mkdir'):\n"
        "    try:\n"
        "        if attempt == 'write':\n"
        "            open('.agent/planted', 'w').close()\n"
        "        elif attempt == 'symlink':\n"
        "            os.remove(records + 'output.txt')\n"
        "            os.symlink('/workspace/stolen', records + 'output.txt')\n"
        "        elif attempt == 'rename':\n"
        "            os.rename(records, '.agent/scripts/moved')\n"
        "        else:\n"
        "            os.mkdir('.agent/scripts/new')\n"
        "        print(attempt, 'succeeded')\n"
        "    except OSError as exc:\n"
        "        print(attempt, 'refused', exc.errno)\n"
        "print('after the attempts')\n"
    )
    result = await _run(_runner(runtime, workspace), code)
    assert result.status == "ok", result.output
    assert all("refused" in line for line in _printed(result)[:4]), result.output
    assert result.records_dir is not None
    output = workspace / result.records_dir / "output.txt"
    assert not output.is_symlink()
    assert "after the attempts" in output.read_text()
    assert not (workspace / "stolen").exists()
    assert not (workspace / ".agent" / "planted").exists()
    status = json.loads((workspace / result.records_dir / "run.json").read_text())
    assert status["status"] == "ok"


async def test_a_timeout_kills_a_setsid_grandchild_inside_bubblewrap(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    marker = f"sagents-grandchild-{os.getpid()}-{id(workspace)}"
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', "
        f"'{marker}'], start_new_session=True)\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    runner = _runner(runtime, workspace, limits=ScriptLimits(timeout_s=3.0))
    result = await _run(runner, code)
    assert result.status == "timeout", result.output
    assert "started" in result.output
    assert _processes_with(marker) == []


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


async def test_a_memory_bomb_ends_as_killed(runtime: ScriptRuntime, workspace: Path) -> None:
    limits = SandboxLimits(memory_bytes=128 * 1024**2, tmp_size_bytes=1024**3)
    code = (
        "with open('/tmp/fill', 'wb') as f:\n"  # tmpfs pages: charged to the cgroup, not to AS
        "    while True:\n"
        "        f.write(b'x' * (8 * 1024 * 1024))\n"
    )
    assert LocalSandbox(SandboxParams(workspace=str(workspace))).describe().cgroups
    runner = _runner(runtime, workspace, sandbox_limits=limits)
    result = await _run(runner, code)
    assert result.status == "killed", result.output
    assert result.exit_code == -9


async def test_read_only_mode_makes_the_workspace_read_only_inside(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    (workspace / "data.txt").write_text("kept")
    code = (
        "for name in ('new.txt', 'data.txt'):\n"
        "    try:\n"
        "        open(name, 'w').write('changed')\n"
        "        print(name, 'written')\n"
        "    except OSError as exc:\n"
        "        print(name, 'refused', exc.errno)\n"
        "print(open('data.txt').read())\n"
    )
    result = await _run(_runner(runtime, workspace, mode="read_only"), code)
    assert result.status == "ok", result.output
    assert _printed(result) == ["new.txt refused 30", "data.txt refused 30", "kept"]
    assert not (workspace / "new.txt").exists()
    assert (workspace / "data.txt").read_text() == "kept"
    assert result.records_dir is not None
    assert (workspace / result.records_dir / "output.txt").exists()  # the host still records


async def test_a_workspace_agent_tools_module_cannot_shadow_the_helper(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    (workspace / "agent_tools.py").write_text("raise SystemExit('shadowed')\n")
    (workspace / "helper_mod.py").write_text("VALUE = 7\n")
    code = (
        "import agent_tools, helper_mod\n"
        "print(agent_tools.__file__)\n"
        "print(helper_mod.VALUE)\n"
        "print(agent_tools.call('fleet__get', {'sn': 'B2'})['sn'])\n"
    )
    result = await _run(_runner(runtime, workspace), code)
    assert result.status == "ok", result.output
    assert _printed(result) == [f"{RUNTIME_MOUNT}/agent_tools.py", "7", "B2"]


async def test_a_sandbox_that_cannot_start_the_script_gives_sandbox_error(
    runtime: ScriptRuntime, workspace: Path, tmp_path: Path
) -> None:
    other = LocalSandbox(SandboxParams(workspace=str(tmp_path / "other")))
    runner = ScriptRunner(
        specs=SPECS,
        call_tool=FakeTools(),
        workspace=workspace,
        runtime=runtime,
        launcher=SandboxLauncher(other),
        mode="auto",
    )
    result = await _run(runner, "print('never')\n")
    assert result.status == "sandbox_error"
    assert "not the run's" in result.output
    assert "never" not in result.output


async def test_the_launcher_refuses_a_sandbox_that_cannot_spawn(tmp_path: Path) -> None:
    async with create_sandbox("memory", workspace=str(tmp_path)) as sandbox:
        with pytest.raises(SandboxError, match="cannot run scripts"):
            SandboxLauncher(sandbox)


async def test_the_launcher_refuses_a_script_outside_the_workspace(
    runtime: ScriptRuntime, workspace: Path, tmp_path: Path
) -> None:
    launcher = SandboxLauncher(LocalSandbox(SandboxParams(workspace=str(workspace))))
    spec = LaunchSpec(
        bootstrap=runtime.bootstrap, script=tmp_path / "elsewhere.py", workspace=workspace
    )
    with pytest.raises(SandboxError, match="not inside the workspace"):
        await launcher.launch(spec, request_fd=0, reply_fd=0)


async def test_the_default_launcher_of_a_runner_is_the_sandbox(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    runner = ScriptRunner(
        specs=SPECS, call_tool=FakeTools(), workspace=workspace, runtime=runtime, mode="auto"
    )
    result = await _run(runner, "import os\nprint(os.getcwd())\n")
    assert result.status == "ok", result.output
    assert _printed(result) == ["/workspace"]


async def test_workspace_modules_come_after_the_standard_library_and_installed_packages(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    for name in ("statistics", "json", "_sagents_script_protocol"):
        (workspace / f"{name}.py").write_text("raise SystemExit('shadowed')\n")
    code = (
        "import json, statistics, sys\n"
        "print(statistics.mean([1, 3]))\n"
        "print(sys.path[-1])\n"
        "print(sys.flags.no_site, sys.flags.isolated)\n"
        "print(any(p.endswith('site-packages') for p in sys.path))\n"
        "print(sorted(m for m in sys.modules if m in ('site', 'certifi', '_distutils_hack')))\n"
    )
    result = await _run(_runner(runtime, workspace), code)
    assert result.status == "ok", result.output
    assert _printed(result) == ["2", "/workspace", "1 1", "True", "[]"]


async def test_what_the_host_records_for_a_run_counts_against_its_write_budget(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    # The script writes nothing itself; the host's calls.jsonl (in the workspace) grows by
    # ~4 KiB per call until the sandbox's write budget ends the run.
    code = (
        "import time\n"
        "from agent_tools import call\n"
        "for i in range(2000):\n"
        "    call('fleet__get', {'sn': str(i), 'pad': 'x' * 4000})\n"
        "print('all calls made')\n"
        "time.sleep(120)\n"
    )
    limits = SandboxLimits(write_budget_bytes=1024**2)
    result = await _run(_runner(runtime, workspace, sandbox_limits=limits), code)
    assert result.status == "killed", result.output
    records = workspace / str(result.records_dir)
    assert (records / "calls.jsonl").stat().st_size > 1024**2  # what went over the budget
