"""One call value down the chain: a ``ToolRequest`` passes through every provider's ``call``
(a ``ToolProxy``, a wrapper, the ``ToolManager``), refined on the way (the registered name, the
parsed arguments, the decision) and never decided twice (docs/architecture.md, "One tool
call")."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.tool import (
    AllowAllApprover,
    ApprovalAnswer,
    ApprovalRequest,
    Decision,
    DenyAllApprover,
    SessionContext,
    SpecProvider,
    ToolManager,
    ToolProxy,
    ToolRequest,
    tool,
)

pytestmark = pytest.mark.anyio


@tool(name="fleet.configure", permission="write")
async def configure(sn: str, level: int = 1) -> dict[str, object]:
    """Configure a device."""
    return {"sn": sn, "level": level}


class Recorder(SpecProvider):
    """A wrapper that records the requests it passes on to its manager."""

    def __init__(self, manager: ToolManager) -> None:
        self.manager = manager
        self.seen: list[ToolRequest] = []

    def list_specs(self) -> list[ToolSpec]:
        return self.manager.list_specs()

    async def call(self, request: ToolRequest) -> ToolResult:
        self.seen.append(request)
        return await self.manager.call(request)


class Counting:
    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.append(request)
        return "allow_once"


def _chain() -> tuple[ToolProxy, Recorder]:
    manager = ToolManager()
    manager.register_tool(configure)
    recorder = Recorder(manager)
    return ToolProxy(recorder), recorder


async def test_the_request_goes_down_refined_with_the_name_the_arguments_and_the_decision() -> None:
    proxy, recorder = _chain()
    exported = proxy.get_openai_tools()[0]["function"]["name"]
    approver = Counting()
    request = ToolRequest(
        name=exported,
        arguments='{"sn": "A1", "level": "2"}',
        session_context=SessionContext(session_id="s1", permission_mode="ask"),
        tool_call_id="call_1",
        timeout=30.0,
        approver=approver,
    )
    result = await proxy.call(request)
    assert result.structured == {"sn": "A1", "level": 2}
    assert len(approver.asked) == 1  # the request's approver, asked once
    (seen,) = recorder.seen
    assert seen.name == "fleet.configure"
    assert seen.arguments == {"sn": "A1", "level": "2"}  # parsed once; coerced by the registry
    assert seen.decision == Decision(kind="approved_once", tools=frozenset({"fleet.configure"}))
    assert (seen.tool_call_id, seen.timeout) == ("call_1", 30.0)
    assert request.decision is None  # the caller's value is unchanged: it is frozen
    with pytest.raises(FrozenInstanceError):
        request.name = "other"  # type: ignore[misc]


async def test_a_decided_request_is_not_decided_again() -> None:
    proxy, recorder = _chain()
    proxy.approver = DenyAllApprover()  # would deny, if it were asked
    decided = ToolRequest(
        name="fleet.configure",
        arguments={"sn": "A1"},
        session_context=SessionContext(permission_mode="ask"),
    ).decided(Decision(kind="approved_once", tools=frozenset({"fleet.configure"})))
    result = await proxy.call(decided)
    assert not result.is_error, result
    assert recorder.seen[0].decision == decided.decision


async def test_a_decision_that_does_not_cover_the_tool_refuses_it_without_asking() -> None:
    proxy, recorder = _chain()
    approver = Counting()
    decided = ToolRequest(
        name="fleet.configure",
        arguments={"sn": "A1"},
        session_context=SessionContext(permission_mode="ask"),
        approver=approver,
    ).decided(Decision(kind="approved_once", tools=frozenset({"another_tool"})))
    result = await proxy.call(decided)
    assert result.error is not None
    assert result.error.code == "not_allowed"
    assert approver.asked == []
    assert recorder.seen == []


async def test_run_tool_is_call_with_the_same_values() -> None:
    proxy, recorder = _chain()
    context = SessionContext(permission_mode="auto")
    result = await proxy.run_tool(
        "fleet.configure", {"sn": "B2"}, context, tool_call_id="call_2", timeout=9.0
    )
    assert result.structured == {"sn": "B2", "level": 1}
    (seen,) = recorder.seen
    assert (seen.name, seen.tool_call_id, seen.timeout, seen.strict) == (
        "fleet.configure",
        "call_2",
        9.0,
        False,
    )
    assert seen.session_context is not None
    assert seen.session_context.session_id == context.session_id


async def test_a_per_call_approver_of_run_tool_is_the_requests_approver() -> None:
    proxy, recorder = _chain()
    proxy.approver = DenyAllApprover()
    context = SessionContext(permission_mode="ask")
    result = await proxy.run_tool(
        "fleet.configure", {"sn": "C3"}, context, approver=AllowAllApprover()
    )
    assert not result.is_error, result
    assert recorder.seen[0].approver is not None
