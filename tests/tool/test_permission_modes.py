"""The library's permission-mode contract: ToolProxy applies a SessionContext's mode, through the
one approval protocol (sagents.tool._approval)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sagents.core._permissions import PermissionClass, PermissionMode
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.tool import (
    AllowAllApprover,
    ApprovalAnswer,
    ApprovalRequest,
    Decision,
    DenyAllApprover,
    SessionContext,
    ToolManager,
    ToolProxy,
    settle_answer,
)
from sagents.tool._handler import ToolCall
from sagents.tool.tool_base import tool

pytestmark = pytest.mark.anyio


class Recorder:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def handler(self, name: str) -> Any:
        async def handle(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
            self.ran.append(name)
            return ToolResult.from_text(f"ran {name}")

        return handle


class ScriptedApprover:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.requests.append(request)
        return self.answers.pop(0)  # type: ignore[return-value]  # tests give bad answers too


def _proxy(recorder: Recorder, **kwargs: Any) -> ToolProxy:
    manager = ToolManager()
    classes: dict[str, PermissionClass] = {
        "lookup": "read_only",
        "save": "write",
        "delete": "destructive",
        "off": "disabled",
    }
    for name, permission in classes.items():
        spec = ToolSpec(name=name, description=name, permission=permission)
        manager.register_tool((spec, recorder.handler(name)))
    return ToolProxy([manager], **kwargs)


def _context(mode: PermissionMode) -> SessionContext:
    return SessionContext(session_id="s1", permission_mode=mode)


async def test_read_only_mode_refuses_write_and_destructive_tools() -> None:
    recorder = Recorder()
    proxy = _proxy(recorder, approver=AllowAllApprover())
    for name in ("save", "delete"):
        result = await proxy.run_tool(name, {}, _context("read_only"))
        assert result.error is not None
        assert result.error.code == "not_allowed"
        assert "read-only" in result.error.message
    assert (await proxy.run_tool("lookup", {}, _context("read_only"))).text == "ran lookup"
    assert recorder.ran == ["lookup"]


async def test_ask_mode_without_an_approver_refuses_writes_and_says_how_to_allow_them() -> None:
    recorder = Recorder()
    proxy = _proxy(recorder)
    result = await proxy.run_tool("save", {"x": 1}, _context("ask"))
    assert result.error is not None
    assert result.error.code == "not_allowed"
    assert "no approver" in result.error.message
    assert result.error.hint is not None
    assert "approver=" in result.error.hint
    assert recorder.ran == []


async def test_ask_mode_asks_the_approver_with_the_literal_arguments() -> None:
    recorder = Recorder()
    approver = ScriptedApprover("allow_once")
    proxy = _proxy(recorder, approver=approver)
    result = await proxy.run_tool("save", '{"path": "a b.txt"}', _context("ask"), tool_call_id="c1")
    assert result.text == "ran save"
    (request,) = approver.requests
    assert request.kind == "tool_call"
    assert request.tools == ("save",)
    assert request.permissions == {"save": "write"}
    assert request.arguments == {"path": "a b.txt"}
    assert request.session_id == "s1"
    assert request.tool_call_id == "c1"
    assert request.offered == ("allow_once", "allow_session", "deny")
    assert '"a b.txt"' in request.shown_text()


async def test_a_denial_is_a_not_allowed_result_saying_the_user_denied_it() -> None:
    recorder = Recorder()
    proxy = _proxy(recorder, approver=DenyAllApprover())
    result = await proxy.run_tool("save", {}, _context("ask"))
    assert result.error is not None
    assert result.error.code == "not_allowed"
    assert "denied by the user" in result.error.message
    assert recorder.ran == []


async def test_allow_session_is_remembered_for_that_session_only() -> None:
    recorder = Recorder()
    approver = ScriptedApprover("allow_session", "deny")
    proxy = _proxy(recorder, approver=approver)
    assert not (await proxy.run_tool("save", {}, _context("ask"))).is_error
    assert not (await proxy.run_tool("save", {}, _context("ask"))).is_error
    assert len(approver.requests) == 1
    assert proxy.allowed_for_session("s1") == {"save"}
    other = SessionContext(session_id="s2", permission_mode="ask")
    assert (await proxy.run_tool("save", {}, other)).is_error
    assert len(approver.requests) == 2


async def test_auto_mode_runs_writes_but_destructive_tools_always_ask() -> None:
    recorder = Recorder()
    approver = ScriptedApprover("allow_once", "allow_session", "allow_session")
    proxy = _proxy(recorder, approver=approver)
    assert (await proxy.run_tool("save", {}, _context("auto"))).text == "ran save"
    assert approver.requests == []
    assert not (await proxy.run_tool("delete", {}, _context("auto"))).is_error
    assert approver.requests[0].offered == ("allow_once", "deny")
    # allow_session was not offered for a destructive tool: it counts as a denial
    assert (await proxy.run_tool("delete", {}, _context("auto"))).is_error
    assert (await proxy.run_tool("delete", {}, _context("ask"))).is_error
    assert recorder.ran == ["save", "delete"]


async def test_an_approver_given_to_the_call_wins_over_the_proxys() -> None:
    recorder = Recorder()
    proxy = _proxy(recorder, approver=DenyAllApprover())
    result = await proxy.run_tool("save", {}, _context("ask"), approver=AllowAllApprover())
    assert result.text == "ran save"


async def test_a_disabled_tool_never_runs_and_a_call_without_context_applies_no_mode() -> None:
    recorder = Recorder()
    proxy = _proxy(recorder, approver=AllowAllApprover())
    assert (await proxy.run_tool("off", {}, _context("auto"))).is_error
    assert (await proxy.run_tool("delete", {})).text == "ran delete"


async def test_a_proxy_whose_caller_applies_the_mode_does_not_ask_again() -> None:
    recorder = Recorder()
    proxy = _proxy(recorder, enforce_mode=False)
    assert (await proxy.run_tool("delete", {}, _context("read_only"))).text == "ran delete"


def test_a_script_request_offers_only_allow_once_and_deny() -> None:
    request = ApprovalRequest.for_script(("save",), "print('x')\n" * 3, description="d")
    assert request.offered == ("allow_once", "deny")
    assert not request.rememberable
    assert request.shown_text() == "print('x')\n" * 3
    assert settle_answer(request, "allow_session") == "deny"
    assert settle_answer(request, "allow_once") == "allow_once"
    assert settle_answer(request, "yes") == "deny"
    assert request.to_dict()["kind"] == "script"


async def test_a_proxy_over_a_proxy_asks_once() -> None:
    recorder = Recorder()
    approver = ScriptedApprover("allow_once")
    inner = _proxy(recorder)
    outer = ToolProxy([inner], available_tools=["save", "lookup"], approver=approver)
    assert (await outer.run_tool("save", {}, _context("ask"))).text == "ran save"
    assert len(approver.requests) == 1
    assert (await outer.run_tool("save", {}, _context("read_only"))).is_error


async def test_a_call_that_carries_a_decision_runs_without_asking_again() -> None:
    recorder, approver = Recorder(), ScriptedApprover()
    proxy = _proxy(recorder, approver=approver)
    decided = Decision(kind="approved_once", tools=frozenset({"save"}))
    context = replace(_context("ask"), decision=decided)
    result = await proxy.run_tool("save", {}, context)
    assert result.is_error is False
    assert recorder.ran == ["save"]
    assert approver.requests == []


async def test_a_decision_for_another_tool_lets_nothing_else_run() -> None:
    recorder, approver = Recorder(), ScriptedApprover("allow_once")
    proxy = _proxy(recorder, approver=approver)
    decided = Decision(kind="approved_once", tools=frozenset({"lookup"}))
    result = await proxy.run_tool("save", {}, replace(_context("ask"), decision=decided))
    assert result.error is not None
    assert result.error.code == "not_allowed"
    assert "does not let 'save' run" in result.error.message
    assert recorder.ran == []
    assert approver.requests == []  # decided once: not asked a second time either


async def test_a_proxy_over_a_proxy_decides_once_and_the_inner_one_honours_it() -> None:
    recorder = Recorder()
    outer_approver, inner_approver = ScriptedApprover("allow_once"), ScriptedApprover()
    inner = _proxy(recorder, approver=inner_approver)
    outer = ToolProxy(inner, approver=outer_approver)
    result = await outer.run_tool("save", {}, _context("ask"))
    assert result.is_error is False
    assert recorder.ran == ["save"]
    assert len(outer_approver.requests) == 1
    assert inner_approver.requests == []


async def test_a_tool_never_sees_the_decision_of_its_own_call() -> None:
    seen: list[Decision | None] = []

    @tool(name="peek", description="Records the context it was given.", permission="write")
    async def peek(context: SessionContext) -> str:
        seen.append(context.decision)
        return "ok"

    async with ToolManager() as manager:
        manager.register_tool(peek)
        proxy = ToolProxy(manager, approver=AllowAllApprover())
        result = await proxy.run_tool("peek", {}, _context("ask"))
    assert result.is_error is False
    assert seen == [None]  # its own calls are new calls, decided on their own
