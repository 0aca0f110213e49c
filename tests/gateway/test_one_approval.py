"""The gateway and ``ToolProxy`` apply one approval rule: the gateway asks the client before the
call runs and hands the answer to its proxy, which applies the session's mode itself."""

from __future__ import annotations

import anyio
import mcp_types as mt
import pytest
from mcp import Client

from sagents.gateway import Gateway, GatewayCallApprover
from sagents.tool import SessionContext, ToolManager, ToolProxy
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest
from sagents.tool.tool_base import tool

pytestmark = pytest.mark.anyio


@tool(name="save", description="Save a note.")
async def save(note: str) -> str:
    return f"saved {note}"


@tool(name="wipe", description="Wipe the notes.", permission="destructive")
async def wipe() -> str:
    return "wiped"


class Counting:
    """Answers ``answer`` and keeps every request it was asked."""

    def __init__(self, answer: ApprovalAnswer) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.requests.append(request)
        return self.answer


def _text(result: mt.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mt.TextContent)
    return block.text


def _proxy(manager: ToolManager) -> ToolProxy:
    manager.register_tool(save)
    manager.register_tool(wipe)
    return ToolProxy(manager, approver=GatewayCallApprover())


async def test_a_write_call_is_asked_once_and_runs_through_the_proxy_applying_the_mode() -> None:
    approver = Counting("allow_once")
    async with ToolManager() as manager:
        proxy = _proxy(manager)
        assert proxy.enforce_mode
        async with (
            Gateway(proxy, mode="ask", approver=approver) as gateway,
            Client(gateway.server) as client,
        ):
            with anyio.fail_after(30):
                first = await client.call_tool("save", {"note": "a"})
                second = await client.call_tool("save", {"note": "b"})
    assert (_text(first), _text(second)) == ("saved a", "saved b")
    assert [r.tools for r in approver.requests] == [("save",), ("save",)]  # once per call


async def test_allow_session_is_asked_once_for_the_session() -> None:
    approver = Counting("allow_session")
    async with ToolManager() as manager:
        proxy = _proxy(manager)
        async with (
            Gateway(proxy, mode="ask", approver=approver) as gateway,
            Client(gateway.server, mode="legacy") as client,
        ):
            with anyio.fail_after(30):
                for note in ("a", "b", "c"):
                    assert _text(await client.call_tool("save", {"note": note})) == f"saved {note}"
    assert len(approver.requests) == 1


async def test_a_destructive_tool_offers_only_allow_once_and_is_asked_every_call() -> None:
    approver = Counting("allow_session")  # not offered: counts as deny
    async with ToolManager() as manager:
        proxy = _proxy(manager)
        async with (
            Gateway(proxy, mode="auto", approver=approver) as gateway,
            Client(gateway.server) as client,
        ):
            with anyio.fail_after(30):
                result = await client.call_tool("wipe", {})
    assert result.is_error
    assert "approval_denied" in _text(result)
    assert [r.offered for r in approver.requests] == [("allow_once", "deny")]


async def test_the_gateways_proxy_refuses_a_call_nobody_could_be_asked_about() -> None:
    async with ToolManager() as manager:
        proxy = _proxy(manager)
        context = SessionContext(session_id="s", permission_mode="ask")
        result = await proxy.run_tool("save", {"note": "a"}, context)
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "not_allowed"
    assert "cannot show approval requests" in result.error.message
