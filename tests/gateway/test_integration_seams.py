"""The seams the integration plugs into: a ToolProxy-shaped provider, run_script's approver."""

from __future__ import annotations

from typing import ClassVar

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from sagents.core._result import EmbeddedResource, ResourceLink, ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import SkillNotFoundError, UpstreamUnavailableError
from sagents.gateway import ClientScriptApprover, Gateway, Profile, ProxyProvider
from sagents.tool import ToolManager, ToolProxy, ToolRequest
from sagents.tool._approval import ApprovalRequest
from sagents.tool.tool_base import tool
from tests.gateway.fakes import FakeProvider

pytestmark = pytest.mark.anyio


class ScriptProvider(FakeProvider):
    """``run_script`` asks run_script's approver, as the real runner does, and reports it."""

    def list_specs(self) -> list[ToolSpec]:
        return [ToolSpec(name="run_script", permission="read_only")]

    async def call(self, request: ToolRequest) -> ToolResult:
        asked = ApprovalRequest.for_script(
            ("fleet__configure",), "print(1)", description="configure all"
        )
        return ToolResult.from_text(await ClientScriptApprover().approve(asked))


class RaisingProvider(FakeProvider):
    async def call(self, request: ToolRequest) -> ToolResult:
        raise UpstreamUnavailableError("the fleet server died", details={"server": "fleet"})


def text_of(result: mt.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mt.TextContent)
    return block.text


async def test_a_tool_proxy_is_served_as_it_is() -> None:
    @tool(name="srv__read", description="Read.", permission="read_only")
    async def read(k: int) -> str:
        return f"read {k}"

    async with ToolManager() as manager:
        manager.register_tool(read)
        proxy = ToolProxy(manager)
        async with Gateway(proxy) as gateway, Client(gateway.server) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("srv__read", {"k": 1})
    assert names == ["srv__read"]
    assert text_of(result) == "read 1"


def test_proxy_provider_is_a_deprecated_alias_that_returns_the_proxy() -> None:
    proxy = ToolProxy(ToolManager())
    with pytest.warns(DeprecationWarning, match="pass the ToolProxy"):
        assert ProxyProvider(proxy) is proxy


async def test_a_provider_that_raises_gets_a_json_rpc_error_and_the_session_goes_on() -> None:
    # A provider returns failures as results (ToolManager.run_tool is the one boundary): one
    # that raises broke the seam, which the gateway reports as a protocol error, not a result.
    async with Gateway(RaisingProvider()) as gateway, Client(gateway.server) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("fleet__status", {})
        still_alive = await client.list_tools()
    assert raised.value.code == -32603  # JSON-RPC 2.0 internal error
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
    answer = await ClientScriptApprover().approve(
        ApprovalRequest.for_script(("t",), "", description="d")
    )
    assert answer == "deny"


async def test_an_unanswered_approval_times_out_as_a_denial() -> None:
    never = anyio.Event()

    async def silent(
        context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        await never.wait()
        return mt.ElicitResult(action="cancel")

    provider = FakeProvider()
    with anyio.fail_after(10):
        async with (
            Gateway(provider, approval_timeout_s=0.05) as gateway,  # approvals.timeoutSec
            Client(gateway.server, mode="legacy", elicitation_callback=silent) as client,
        ):
            result = await client.call_tool("fleet__configure", {})
            never.set()
    assert result.is_error
    assert "approval_denied" in text_of(result)
    assert provider.calls == []


class SkillFiles:
    """Two skills' files as resources, filtered by the allowed skills."""

    FILES: ClassVar[dict[str, tuple[str, str]]] = {
        "skill://triage/SKILL.md": ("triage", "---\nname: triage\n---\nTriage."),
        "skill://deploy/SKILL.md": ("deploy", "---\nname: deploy\n---\nDeploy."),
    }

    def list_resources(self, skills: frozenset[str] | None) -> list[ResourceLink]:
        return [
            ResourceLink(uri=uri, name=f"{skill}/SKILL.md", mime_type="text/markdown")
            for uri, (skill, _) in self.FILES.items()
            if skills is None or skill in skills
        ]

    async def read_resource(self, uri: str, skills: frozenset[str] | None) -> EmbeddedResource:
        if uri not in self.FILES or (skills is not None and self.FILES[uri][0] not in skills):
            raise SkillNotFoundError(f"no skill file {uri!r}")
        return EmbeddedResource(uri=uri, mime_type="text/markdown", text=self.FILES[uri][1])


async def test_skill_files_are_resources_filtered_by_the_profiles_skills() -> None:
    profile = Profile(name="p", skills=frozenset({"triage"}))
    async with (
        Gateway(FakeProvider(), resources=SkillFiles(), profile=profile) as gateway,
        Client(gateway.server) as client,
    ):
        listed = [str(r.uri) for r in (await client.list_resources()).resources]
        read = await client.read_resource("skill://triage/SKILL.md")
        with pytest.raises(MCPError) as hidden:
            await client.read_resource("skill://deploy/SKILL.md")
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("file:///etc/passwd")
    assert listed == ["skill://triage/SKILL.md"]
    content = read.contents[0]
    assert isinstance(content, mt.TextResourceContents)
    assert content.text.endswith("Triage.")
    assert hidden.value.error.code == -32002
    assert unknown.value.error.code == -32002
