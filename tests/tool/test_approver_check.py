"""An ``approver=`` that is no :class:`~sagents.tool.Approver` (a plain function, most often) is
refused where it is given, with a ``TypeError`` that names it and says what to pass instead,
rather than denying the first call that needs an approval (docs/tools.md, "Permission modes and
approvals"). Anything with an ``approve(request)`` method is an approver: no subclassing."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import pytest

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.tool import (
    ApprovalAnswer,
    ApprovalRequest,
    SessionContext,
    ToolManager,
    ToolProxy,
    ToolRequest,
)
from sagents.tool._handler import ToolCall

pytestmark = pytest.mark.anyio


def allow(request: ApprovalRequest) -> ApprovalAnswer:
    return "allow_once"


def _manager(ran: list[str]) -> ToolManager:
    async def save(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        ran.append("save")
        return ToolResult.from_text("saved")

    manager = ToolManager()
    manager.register_tool((ToolSpec(name="save", description="save", permission="write"), save))
    return manager


def test_a_function_given_as_the_proxys_approver_is_refused_saying_how_to_wrap_it() -> None:
    with pytest.raises(TypeError, match=r"^ToolProxy\(approver=\.\.\.\)") as caught:
        ToolProxy(ToolManager(), approver=allow)  # type: ignore[arg-type]  # the mistake
    message = str(caught.value)
    assert "<function allow" in message  # what was given
    assert "an object with an approve(request) method" in message  # what is expected
    assert 'docs/tools.md, "Permission modes and approvals"' in message
    assert "async def approve(self, request)" in message  # how to wrap a function


def test_a_value_that_is_no_approver_at_all_is_refused_without_wrapping_advice() -> None:
    with pytest.raises(TypeError, match="'allow_once'") as caught:
        ToolProxy(ToolManager(), approver="allow_once")  # type: ignore[arg-type]  # the mistake
    assert "async def approve" not in str(caught.value)


async def test_a_function_given_as_one_calls_approver_is_refused_before_the_call() -> None:
    ran: list[str] = []
    proxy = ToolProxy(_manager(ran))
    context = SessionContext(session_id="s1", permission_mode="ask")
    with pytest.raises(TypeError, match=r"^ToolRequest\(approver=\.\.\.\)"):
        await proxy.run_tool("save", {}, context, approver=allow)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"<function allow"):
        ToolRequest("save", {}, context, approver=allow)  # type: ignore[arg-type]
    assert ran == []


class DuckApprover:
    """No base class, no registration: only an ``approve`` method, as the protocol says."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, ...]] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.append(request.tools)
        return "allow_once"


async def test_a_duck_typed_approver_is_accepted_and_asked() -> None:
    ran: list[str] = []
    duck = DuckApprover()
    context = SessionContext(session_id="s1", permission_mode="ask")
    proxy = ToolProxy(_manager(ran), approver=duck)
    assert (await proxy.run_tool("save", {}, context)).text == "saved"
    other = DuckApprover()
    assert (await proxy.run_tool("save", {}, context, approver=other)).text == "saved"
    assert duck.asked == [("save",)]
    assert other.asked == [("save",)]
    assert ran == ["save", "save"]


class SyncDuckApprover:
    """``approve`` a plain method that returns a coroutine: the call site awaits what it
    returns, so this is an approver too, and the check must not ask for ``async def``."""

    def __init__(self) -> None:
        self.inner = DuckApprover()

    def approve(self, request: ApprovalRequest) -> Coroutine[Any, Any, ApprovalAnswer]:
        return self.inner.approve(request)


async def test_an_approver_whose_approve_is_sync_but_returns_a_coroutine_is_accepted() -> None:
    ran: list[str] = []
    sync = SyncDuckApprover()
    proxy = ToolProxy(_manager(ran), approver=sync)
    context = SessionContext(session_id="s1", permission_mode="ask")
    assert (await proxy.run_tool("save", {}, context)).text == "saved"
    assert sync.inner.asked == [("save",)]
