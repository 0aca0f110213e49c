"""``sagents run-script``: the text, ``--json`` in every case, exit codes. Runs are a real
``sagents`` subprocess; the errors found before anything runs (usage and config errors) are the
same command called in-process, with one subprocess kept for their exit code and stdout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagents.cli.main import app
from tests.cli.cli_helpers import CLI_TIMEOUT_S, REPO, SAGENTS, Ran, fleet_config, run_cli


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def _script(tmp_path: Path, code: str) -> Path:
    path = tmp_path / "script.py"
    path.write_text(code)
    return path


def _invoke(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_dir: Path, *args: str) -> Ran:
    """``sagents run-script ARGS`` in this process (stdin not a terminal), from ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(data_dir))
    result = CliRunner().invoke(app, ["run-script", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return Ran(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


def _run(tmp_path: Path, data_dir: Path, code: str, *args: str, **kw: str) -> Ran:
    script = _script(tmp_path, code)
    ws = tmp_path / "ws"
    return run_cli("run-script", str(script), "--workspace", str(ws), *args, cwd=tmp_path,
                   data_dir=data_dir, env=kw or None)  # fmt: skip


def test_a_normal_end_prints_the_model_facing_text_and_exits_0(
    tmp_path: Path, data_dir: Path
) -> None:
    ran = _run(tmp_path, data_dir, "print('hello from the sandbox')\n")
    assert ran.returncode == 0, ran.stderr
    first, *rest = ran.stdout.splitlines()
    assert first.startswith("run_script ok: 0 calls, 0 failed, ")
    assert "records .agent/scripts/" in first
    assert rest == ["hello from the sandbox"]


def test_json_ok_has_every_documented_key(tmp_path: Path, data_dir: Path) -> None:
    ran = _run(tmp_path, data_dir, "import os\nprint(os.getcwd())\n", "--json")
    out = ran.json()
    assert ran.returncode == 0
    assert {"status", "exit_code", "calls", "failed", "duration_s", "records_dir", "output",
            "truncated"} <= set(out)  # fmt: skip
    assert (out["status"], out["exit_code"], out["calls"], out["failed"]) == ("ok", 0, 0, 0)
    assert out["output"].splitlines()[1] == "/workspace"  # ran in the sandbox
    assert out["truncated"] is False
    records = tmp_path / "ws" / out["records_dir"]
    assert (records / "output.txt").read_text() == "/workspace\n"


def test_json_exit_code_3_is_an_error_and_the_command_exits_1(
    tmp_path: Path, data_dir: Path
) -> None:
    ran = _run(tmp_path, data_dir, "import sys\nprint('partial')\nsys.exit(3)\n", "--json")
    out = ran.json()
    assert (out["status"], out["exit_code"], ran.returncode) == ("error", 3, 1)
    assert "partial" in out["output"]


def test_json_an_uncaught_exception_carries_the_traceback(tmp_path: Path, data_dir: Path) -> None:
    ran = _run(tmp_path, data_dir, "raise ValueError('boom 42')\n", "--json")
    out = ran.json()
    assert (out["status"], out["exit_code"], ran.returncode) == ("error", 1, 1)
    assert "ValueError: boom 42" in out["output"]


def test_json_a_timeout_kills_the_script(tmp_path: Path, data_dir: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"scripts": {"timeoutSec": 1}}))
    code = "import time\nprint('started', flush=True)\ntime.sleep(600)\n"
    ran = _run(tmp_path, data_dir, code, "--config", str(config), "--json")
    out = ran.json()
    assert (out["status"], ran.returncode) == ("timeout", 1)
    assert "scripts.timeoutSec" in out["output"]


def test_json_endless_output_ends_with_output_limit(tmp_path: Path, data_dir: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"scripts": {"maxOutputBytes": 100_000}}))
    code = "while True:\n    print('x' * 1000)\n"
    ran = _run(tmp_path, data_dir, code, "--config", str(config), "--json")
    out = ran.json()
    assert (out["status"], ran.returncode) == ("output_limit", 1)
    assert "maxOutputBytes" in out["output"]


def test_json_a_script_killed_by_a_signal_is_killed(tmp_path: Path, data_dir: Path) -> None:
    code = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    ran = _run(tmp_path, data_dir, code, "--json")
    out = ran.json()
    assert (out["status"], out["exit_code"], ran.returncode) == ("killed", -9, 1)


def test_json_a_listed_destructive_tool_rejects_the_run(tmp_path: Path, data_dir: Path) -> None:
    config = fleet_config(tmp_path / "fleet.json")
    code = "from agent_tools import call\ncall('fleet__reboot_device', {'sn': 'SN0001'})\n"
    args = ("--config", str(config), "--tools", "fleet__reboot_device", "--mode", "auto")
    ran = _run(tmp_path, data_dir, code, *args, "--json")
    out = ran.json()
    assert (out["status"], out["exit_code"], ran.returncode) == ("rejected", None, 1)
    assert "fleet__reboot_device" in out["output"]
    assert "directly" in out["output"]


def test_json_ask_mode_without_a_terminal_denies_with_a_hint(
    tmp_path: Path, data_dir: Path
) -> None:
    config = fleet_config(tmp_path / "fleet.json")
    code = "print('must not run')\n"
    args = ("--config", str(config), "--tools", "fleet__set_device_config", "--mode", "ask")
    ran = _run(tmp_path, data_dir, code, *args, "--json")
    out = ran.json()
    assert (out["status"], ran.returncode) == ("rejected", 1)
    assert "must not run" not in out["output"]
    assert "--mode auto" in out["hint"]
    assert "no terminal" in ran.stderr
    assert "nobody was asked" in out["output"]  # not "the user denied": nobody was
    assert "user denied" not in out["output"]


def test_auto_mode_allows_a_listed_write_tool(tmp_path: Path, data_dir: Path) -> None:
    config = fleet_config(tmp_path / "fleet.json")
    code = (
        "from agent_tools import call\n"
        "print(call('fleet__set_device_config', {'sn': 'SN0001', 'key': 'k', 'value': 'v'}))\n"
    )
    args = ("--config", str(config), "--tools", "fleet__set_device_config", "--mode", "auto")
    ran = _run(tmp_path, data_dir, code, *args, "--json")
    out = ran.json()
    assert (out["status"], out["calls"], out["failed"]) == ("ok", 1, 0)
    assert "SN0001: k set to 'v'" in out["output"]


@pytest.mark.parametrize("spelling", ["read-only", "read_only"])
def test_read_only_mode_in_both_spellings_makes_the_workspace_read_only(
    tmp_path: Path, data_dir: Path, spelling: str
) -> None:
    code = "open('new.txt', 'w').write('x')\n"
    ran = _run(tmp_path, data_dir, code, "--mode", spelling, "--json")
    out = ran.json()
    assert out["status"] == "error"
    assert "Read-only file system" in out["output"]
    assert not (tmp_path / "ws" / "new.txt").exists()


def test_json_a_missing_bubblewrap_is_a_sandbox_error(tmp_path: Path, data_dir: Path) -> None:
    ran = _run(tmp_path, data_dir, "print(1)\n", "--json", PATH="/nonexistent")
    out = ran.json()
    assert (out["status"], ran.returncode) == ("sandbox_error", 1)
    assert "bubblewrap" in out["output"]
    assert out["script_id"] is None


def test_json_a_bad_config_names_file_and_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_dir: Path
) -> None:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"scripts": {"maxCalls": "many"}}))
    script = _script(tmp_path, "print(1)\n")
    ran = _invoke(monkeypatch, tmp_path, data_dir, str(script), "--config", str(config), "--json")
    out = ran.json()
    assert (out["status"], ran.returncode) == ("config_error", 2)
    assert "bad.json" in out["output"]
    assert "scripts.maxCalls" in out["output"]


def test_json_invalid_config_json_and_a_missing_config_are_config_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_dir: Path
) -> None:
    config = tmp_path / "broken.json"
    config.write_text("{not json")
    script = str(_script(tmp_path, "print(1)\n"))
    broken = _invoke(monkeypatch, tmp_path, data_dir, script, "--config", str(config), "--json")
    assert (broken.json()["status"], broken.returncode) == ("config_error", 2)
    assert "line 1" in broken.json()["output"]
    missing = _invoke(monkeypatch, tmp_path, data_dir, script, "--config", "nope.json", "--json")
    assert (missing.json()["status"], missing.returncode) == ("config_error", 2)
    assert "nope.json" in missing.json()["output"]


def test_json_a_missing_script_file_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_dir: Path
) -> None:
    ran = _invoke(monkeypatch, tmp_path, data_dir, "absent.py", "--json")
    out = ran.json()
    assert (out["status"], ran.returncode) == ("usage_error", 2)
    assert "absent.py" in out["output"]


def test_json_no_script_argument_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_dir: Path
) -> None:
    ran = _invoke(monkeypatch, tmp_path, data_dir, "--json")
    assert (ran.json()["status"], ran.returncode) == ("usage_error", 2)


def test_json_an_unknown_mode_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_dir: Path
) -> None:
    script = _script(tmp_path, "print(1)\n")
    ran = _invoke(monkeypatch, tmp_path, data_dir, str(script), "--mode", "yolo", "--json")
    out = ran.json()
    assert (out["status"], ran.returncode) == ("usage_error", 2)
    assert "read-only" in out["output"]


def test_a_usage_error_without_json_prints_the_message(tmp_path: Path, data_dir: Path) -> None:
    # a real subprocess: the exit code and stdout contract of the errors tested in-process above
    ran = run_cli("run-script", "absent.py", cwd=tmp_path, data_dir=data_dir)
    assert ran.returncode == 2
    assert ran.stdout.startswith("run_script usage_error: cannot read the script 'absent.py'")


def test_the_fleet_example_runs_with_its_own_config(tmp_path: Path, data_dir: Path) -> None:
    ran = run_cli(  # the README's command, from the repository root
        "run-script", "examples/fleet/fleet_report.py", "--config",
        "examples/fleet/mcp_servers.json", "--mode", "auto", "--workspace", str(tmp_path),
        cwd=REPO, data_dir=data_dir,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    first, second, *_ = ran.stdout.splitlines()
    assert first.startswith("run_script ok: 501 calls, 0 failed, ")
    assert second.startswith("500 devices: ")


def test_json_ctrl_c_cancels_the_run_and_kills_the_script(tmp_path: Path, data_dir: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    os.mkfifo(ws / "ready", 0o666)
    os.chmod(ws / "ready", 0o666)  # as root, the script runs as the sandbox uid
    script = _script(tmp_path, "open('ready', 'w').write('x')\nimport time\ntime.sleep(600)\n")
    argv = [str(SAGENTS), "run-script", str(script), "--workspace", str(ws), "--json"]
    env = {**os.environ, "SAGENTS_DATA_DIR": str(data_dir)}
    pipe = subprocess.PIPE
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=pipe, stderr=pipe, env=env, cwd=tmp_path, text=True
    )
    try:
        ready = threading.Thread(target=lambda: (ws / "ready").read_text(), daemon=True)
        ready.start()
        ready.join(timeout=CLI_TIMEOUT_S)  # the script is running once it wrote to the FIFO
        assert not ready.is_alive(), "the script never started"
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    out = Ran(returncode=process.returncode, stdout=stdout, stderr=stderr).json()
    assert (out["status"], process.returncode) == ("cancelled", 1)
    assert "its processes were killed" in out["output"]
    assert "SIGINT" in stderr
