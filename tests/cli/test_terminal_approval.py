"""The command line's terminal approver, for the one approval before a run_script run."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from sagents.cli.terminal_approval import TerminalApprover
from sagents.tool._approval import AllowAllApprover, ApprovalRequest, DenyAllApprover

REQUEST = ApprovalRequest.for_script(("fleet__set",), "print(1)", description="d")


@pytest.mark.anyio
async def test_allow_all_and_deny_all_approvers_answer_as_named() -> None:
    assert await AllowAllApprover().approve(REQUEST) == "allow_once"
    assert await DenyAllApprover().approve(REQUEST) == "deny"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("answer", "decision"),
    [
        ("a", "allow_once"),
        ("o", "allow_once"),
        ("allow once", "allow_once"),
        ("s", "deny"),
        ("d", "deny"),
        ("yes", "deny"),
        ("", "deny"),
    ],
)
async def test_the_terminal_approver_shows_tools_and_script_and_reads_the_answer(
    answer: str, decision: str
) -> None:
    screen = io.StringIO()
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return answer

    approver = TerminalApprover(console=Console(file=screen, width=100), ask=ask)
    assert await approver.approve(REQUEST) == decision
    assert "fleet__set" in screen.getvalue()
    assert "print(1)" in screen.getvalue()
    assert prompts == ["allow once [o] / deny [d]: "]


@pytest.mark.anyio
async def test_the_terminal_approver_denies_at_end_of_input() -> None:
    def ask(prompt: str) -> str:
        raise EOFError

    approver = TerminalApprover(console=Console(file=io.StringIO()), ask=ask)
    assert await approver.approve(REQUEST) == "deny"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("caller", "heading"),
    [("The model", "The model wants to call fleet__reboot (destructive) with:"),
     (None, "Call fleet__reboot (destructive) with:")],
)  # fmt: skip
async def test_a_direct_calls_heading_names_who_calls(caller: str | None, heading: str) -> None:
    """The model's call says so; one a person typed (``sagents call``) does not blame a model."""
    screen = io.StringIO()
    approver = TerminalApprover(
        console=Console(file=screen, width=100), ask=lambda _: "d", caller=caller
    )
    request = ApprovalRequest.for_tool_call(
        "fleet__reboot", {"id": 1}, permission="destructive", session_id=""
    )
    assert await approver.approve(request) == "deny"
    assert heading in screen.getvalue()
    assert ("model" in screen.getvalue()) is (caller is not None)
