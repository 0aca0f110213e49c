"""The command line's run_script host, in process: approvers, the progress bar, limits."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from sagents.cli._run_script import exit_code_of
from sagents.cli._script_host import (
    LiveProgress,
    NoTerminalApprover,
    choose_approver,
    failure_object,
    limits_of,
    run_with_manager,
)
from sagents.cli.terminal_approval import TerminalApprover
from sagents.config import parse_config
from sagents.core._limits import ScriptLimits
from sagents.sandbox import LocalSandbox, SandboxParams
from sagents.script._sandbox_launcher import SandboxLauncher
from sagents.script._values import ScriptProgressUpdate, ScriptRequest
from sagents.tool._approval import AllowAllApprover, ApprovalRequest
from sagents.tool.tool_manager import ToolManager


def _update(**changes: object) -> ScriptProgressUpdate:
    values: dict[str, object] = {
        "script_id": "s", "tool_call_id": None, "calls": 0, "failures": 0, "done": None,
        "total": None, "message": None, "elapsed_s": 0.0, "status": "running",
    }  # fmt: skip
    values.update(changes)
    return ScriptProgressUpdate(**values)  # type: ignore[arg-type]


def test_ask_mode_on_a_terminal_asks_on_the_terminal() -> None:
    assert isinstance(choose_approver("ask", interactive=True), TerminalApprover)


def test_ask_mode_without_a_terminal_denies() -> None:
    assert isinstance(choose_approver("ask", interactive=False), NoTerminalApprover)


def test_auto_mode_allows() -> None:
    assert isinstance(choose_approver("auto", interactive=False), AllowAllApprover)


@pytest.mark.anyio
async def test_the_no_terminal_approver_denies_and_remembers_the_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    approver = NoTerminalApprover()
    request = ApprovalRequest.for_script(("fleet__set_device_config",), "pass", description="")
    assert await approver.approve(request) == "deny"
    assert approver.asked == ("fleet__set_device_config",)
    assert "--mode auto" in caplog.text


def test_the_progress_bar_shows_calls_failures_and_the_scripts_total() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with LiveProgress(console=console) as live:
        live.update(_update(calls=42, failures=3, done=40, total=500, message="querying"))
    text = out.getvalue()
    assert "42 calls, 3 failed" in text
    assert "40/500" in text
    assert "querying" in text


def test_the_progress_bar_says_1_call_not_1_calls() -> None:
    out = io.StringIO()
    with LiveProgress(console=Console(file=out, force_terminal=True, width=120)) as live:
        live.update(_update(calls=1, failures=0))
    assert "1 call, 0 failed" in out.getvalue()


def test_the_progress_bar_is_silent_off_a_terminal() -> None:
    out = io.StringIO()
    with LiveProgress(console=Console(file=out, force_terminal=False)) as live:
        live.update(_update(calls=1))
    assert out.getvalue() == ""


def test_limits_come_from_the_scripts_section_in_either_concurrency_spelling() -> None:
    config = parse_config(
        {"scripts": {"maxCalls": 10, "maxConcurrency": 2, "timeoutSec": 5, "maxOutputBytes": 99}}
    )
    limits = limits_of(config)
    assert (limits.max_calls, limits.max_concurrency) == (10, 2)
    assert (limits.timeout_s, limits.max_output_bytes) == (5.0, 99)
    assert limits_of(parse_config({"scripts": {"maxParallel": 3}})).max_concurrency == 3


def test_a_failure_object_has_the_keys_of_a_run() -> None:
    out = failure_object("usage_error", "no file", hint="give one")
    assert out["status"] == "usage_error"
    assert out["output"] == "run_script usage_error: no file"
    assert (out["calls"], out["failed"], out["exit_code"], out["hint"]) == (0, 0, None, "give one")


@pytest.mark.parametrize(
    ("status", "code"),
    [("ok", 0), ("error", 1), ("timeout", 1), ("rejected", 1), ("config_error", 2),
     ("usage_error", 2)],
)  # fmt: skip
def test_only_ok_exits_0(status: str, code: int) -> None:
    assert exit_code_of(status) == code


@pytest.mark.anyio
async def test_runs_given_an_entered_launcher_use_its_spare_and_keep_their_results(
    tmp_path: Path,
) -> None:
    def echo(sn: str) -> str:
        """Echo a serial number."""
        return sn

    workspace = tmp_path / "ws"
    code = "from agent_tools import call\nprint(call('echo', {'sn': 'A1'}))\n"
    sandbox = LocalSandbox(SandboxParams(workspace=str(workspace)))
    async with ToolManager() as manager, SandboxLauncher(sandbox) as launcher:
        manager.register_tool(echo)
        results = []
        for _ in range(2):
            with anyio.fail_after(90):
                results.append(
                    await run_with_manager(
                        manager,
                        ScriptRequest(code=code, tools=("echo",)),
                        workspace=workspace,
                        limits=ScriptLimits(timeout_s=60.0),
                        mode="auto",
                        launcher=launcher,
                    )
                )
                if launcher.spares_used == 0:
                    await launcher.spare_ready()
    assert [(r.status, r.calls, r.output.splitlines()[-1]) for r in results] == [
        ("ok", 1, "A1")
    ] * 2
    assert launcher.spares_used == 1
