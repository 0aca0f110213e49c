"""The seams the integration plugs into: a ToolProxy-shaped provider, run_script's approver."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from sagents.core.result import ToolResult
from sagents.core.spec import ToolSpec
from sagents.errors import UpstreamUnavailableError
from sagents.gateway import ClientScriptApprover, Gateway, ProxyProvider
from sagents.gateway import approval as approval_module
from sagents.tool.context import SessionContext
from tests.gateway.fakes import FakeProvider

pytestmark = pytest.mark.anyio


class FakeProxy:
    """Shaped like the seed API's ToolProxy (``args``, an extra keyword)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, str | None]] = []

    def list_all_tools_name(self) -> list[str]:
        return ["srv__read"]

    def get_tool_spec(self, name: str) -> ToolSpec:
        return ToolSpec(name=name, permission="read_only")

    async def run_tool(
        self,
        name: str,
        args: Mapping[str, Any] | str | None = None,
        session_context: SessionContext | None = None,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the seed API's signature
        strict: bool = False,
    ) -> ToolResult:
        self.seen.append((name, args, tool_call_id))
        return ToolResult.from_text("read")


@dataclass(frozen=True)
class ScriptRequest:
    tools: tuple[str, ...]
    script: str
    description: str


class ScriptProvider(FakeProvider):
    """``run_script`` asks run_script's approver, as the real runner does, and reports it."""

    def list_specs(self) -> list[ToolSpec]:
        return [ToolSpec(name="run_script", permission="read_only")]

    async def run_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        session_context: SessionContext | None,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the provider seam's signature
    ) -> ToolResult:
        request = ScriptRequest(("fleet__configure",), "print(1)", "configure all")
        return ToolResult.from_text(await ClientScriptApprover().approve(request))


class RaisingProvider(FakeProvider):
    async def run_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        session_context: SessionContext | None,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the provider seam's signature
    ) -> ToolResult:
        raise UpstreamUnavailableError("the fleet server died", details={"server": "fleet"})


def text_of(result: mt.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mt.TextContent)
    return block.text


async def test_a_tool_proxy_is_served_through_proxy_provider() -> None:
    proxy = FakeProxy()
    async with Gateway(ProxyProvider(proxy)) as gateway, Client(gateway.server) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("srv__read", {"k": 1})
    assert names == ["srv__read"]
    assert text_of(result) == "read"
    assert proxy.seen[0][:2] == ("srv__read", {"k": 1})
    assert proxy.seen[0][2] is not None


async def test_a_provider_that_raises_a_sagents_error_gives_an_error_result() -> None:
    async with Gateway(RaisingProvider()) as gateway, Client(gateway.server) as client:
        result = await client.call_tool("fleet__status", {})
        still_alive = await client.list_tools()
    assert result.is_error
    assert "upstream_unavailable" in text_of(result)
    assert still_alive.tools


async def script_allow(
    context: ClientRequestContext, params: mt.ElicitRequestParams
) -> mt.ElicitResult:
    assert isinstance(params, mt.ElicitRequestFormParams)
    assert "fleet__configure" in params.message
    assert "print(1)" in params.message
    return mt.ElicitResult(action="accept", content={"decision": "allow_once"})


@pytest.mark.parametrize(("era", "answer"), [("legacy", "allow_once"), ("auto", "deny")])
async def test_run_scripts_approver_asks_the_client_of_the_current_call(
    era: str, answer: str
) -> None:
    async with (
        Gateway(ScriptProvider()) as gateway,
        Client(gateway.server, mode=era, elicitation_callback=script_allow) as client,
    ):
        result = await client.call_tool("run_script", {})
    assert text_of(result) == answer


async def test_run_scripts_approver_denies_when_the_client_cannot_be_asked() -> None:
    async with Gateway(ScriptProvider()) as gateway, Client(gateway.server, mode="legacy") as c:
        result = await c.call_tool("run_script", {})
    assert text_of(result) == "deny"


async def test_run_scripts_approver_denies_outside_a_gateway_call() -> None:
    answer = await ClientScriptApprover().approve(ScriptRequest(("t",), "", "d"))
    assert answer == "deny"


async def test_an_unanswered_approval_times_out_as_a_denial(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(approval_module, "APPROVAL_TIMEOUT_S", 0.05)
    never = anyio.Event()

    async def silent(
        context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        await never.wait()
        return mt.ElicitResult(action="cancel")

    provider = FakeProvider()
    with anyio.fail_after(10):
        async with (
            Gateway(provider) as gateway,
            Client(gateway.server, mode="legacy", elicitation_callback=silent) as client,
        ):
            result = await client.call_tool("fleet__configure", {})
            never.set()
    assert result.is_error
    assert "approval_denied" in text_of(result)
    assert provider.calls == []
