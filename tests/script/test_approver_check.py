"""run_script's ``approver=`` that is no :class:`~sagents.tool.Approver` (a plain function, most
often) is refused where it is given, rather than rejecting the first run that lists a write tool
as "not approved" (docs/tools.md, "Permission modes and approvals")."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagents.sandbox import LocalSandbox, SandboxParams
from sagents.script import RunScriptTool, ScriptRunner
from sagents.script._launcher import PlainLauncher
from sagents.script._runtime import ScriptRuntime
from sagents.tool import ApprovalAnswer, ApprovalRequest, SessionContext, ToolManager
from tests.script.conftest import SPECS, FakeTools

pytestmark = pytest.mark.anyio


def allow(request: ApprovalRequest) -> ApprovalAnswer:
    return "allow_once"


def test_a_function_given_to_a_script_runner_as_its_approver_is_refused(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    with pytest.raises(TypeError, match=r"^ScriptRunner\(approver=\.\.\.\)") as caught:
        ScriptRunner(
            specs=SPECS,
            call_tool=FakeTools(),
            workspace=workspace,
            runtime=runtime,
            launcher=PlainLauncher(),
            approver=allow,  # type: ignore[arg-type]  # the mistake
        )
    assert "<function allow" in str(caught.value)
    assert "async def approve(self, request)" in str(caught.value)


def test_a_function_given_to_the_run_script_tool_as_its_approver_is_refused(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    with pytest.raises(TypeError, match=r"^RunScriptTool\(approver=\.\.\.\)"):
        RunScriptTool(
            tools=ToolManager(),
            session=SessionContext(session_id="s-1"),
            sandbox=LocalSandbox(SandboxParams(workspace=str(workspace))),
            runtime=runtime,
            approver=allow,  # type: ignore[arg-type]  # the mistake
        )
