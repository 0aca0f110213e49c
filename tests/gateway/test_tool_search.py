"""``sagents serve --tool-search``: search_tools and tool_expand_tools, only expanded tools
listed, expansion enforced on tools/call (docs/gateway.md, "Tool search").

Driven with the MCP SDK's own client, in memory and over streamable HTTP on loopback.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from sagents.agent import suggest_tools
from sagents.cli._serve import resolve_settings
from sagents.core._spec import ToolSpec
from sagents.errors import ConfigError
from sagents.gateway import Gateway, Profile
from sagents.gateway._settings import GatewaySettings
from sagents.gateway._tool_search import ToolSearch
from sagents.tool._approval import AllowAllApprover
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_http import client as http_client
from tests.gateway.test_http import http_gateway
from tests.gateway.test_server import ERAS, error_code

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

OWN = ["search_tools", "tool_expand_tools"]


@asynccontextmanager
async def searching(provider: FakeProvider, **kwargs: Any) -> AsyncIterator[Gateway]:
    kwargs.setdefault("approver", AllowAllApprover())
    async with Gateway(provider, tool_search=ToolSearch(suggest_tools), **kwargs) as gateway:
        yield gateway


async def names(client: Client) -> list[str]:
    return [tool.name for tool in (await client.list_tools()).tools]


def structured(result: mt.CallToolResult) -> Any:
    assert result.is_error is False, result
    return result.structured_content


@pytest.mark.parametrize("era", ERAS)
async def test_only_the_search_and_expansion_tools_are_listed_at_first(era: str) -> None:
    async with searching(FakeProvider()) as gateway, Client(gateway.server, mode=era) as client:
        listed = await client.list_tools()
    assert [tool.name for tool in listed.tools] == OWN
    assert listed.cache_scope == "private"  # the list is this session's
    assert listed.ttl_ms == 0


async def test_search_tools_ranks_the_sessions_offer_and_shows_descriptions() -> None:
    async with (
        searching(FakeProvider(), mode="read_only") as gateway,
        Client(gateway.server) as client,
    ):
        found = structured(await client.call_tool("search_tools", {"query": "ping", "limit": 3}))
        expansion = structured(
            await client.call_tool("tool_expand_tools", {"tool_names": ["fleet__configure"]})
        )
    listed = [tool["name"] for tool in found["tools"]]
    assert listed[0] == "other__ping"
    assert len(listed) <= 3
    assert "fleet__configure" not in listed  # a write tool is not offered in read-only mode
    assert expansion["invalid_tools"] == ["fleet__configure"]
    assert found["tools"][0] == {
        "name": "other__ping",
        "description": "The other__ping tool.",
        "expanded": False,
    }


async def test_an_offered_tool_that_was_not_expanded_is_refused_with_the_hint() -> None:
    provider = FakeProvider()
    async with searching(provider) as gateway, Client(gateway.server) as client:
        result = await client.call_tool("fleet__status", {"sn": "A1"})
    assert result.is_error
    assert error_code(result) == "not_allowed"
    block = result.content[0]
    assert isinstance(block, mt.TextContent)
    assert 'tool_expand_tools({"tool_names": ["fleet__status"]})' in block.text
    assert provider.calls == []


async def test_expansion_returns_the_structure_notifies_lists_and_lets_the_call_run() -> None:
    provider = FakeProvider()
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            changed.set()

    asked = {"tool_names": ["fleet__status", "nope", "fleet__hidden"]}
    async with (
        searching(provider, profile=Profile(name="p", servers=frozenset({"fleet"}))) as gateway,
        Client(gateway.server, mode="legacy", message_handler=on_message) as client,
    ):
        with anyio.fail_after(10):
            first = structured(await client.call_tool("tool_expand_tools", asked))
            await changed.wait()
            again = structured(
                await client.call_tool(
                    "tool_expand_tools", {"tool_names": ["fleet__status", "fleet__slow"]}
                )
            )
            listed = await names(client)
            ran = await client.call_tool("fleet__status", {"sn": "A1"})
    assert first == {
        "success": True,
        "expanded_tools": ["fleet__status"],
        "invalid_tools": ["nope", "fleet__hidden"],  # disabled tools are never offered
        "already_selected_tools": [],
        "available_expandable_tools": [
            "fleet__configure",
            "fleet__reboot",
            "fleet__slow",
            "fleet__progress",
            "local_echo",  # a profile's servers leave local tools in
        ],
    }
    assert again["expanded_tools"] == ["fleet__slow"]
    assert again["already_selected_tools"] == ["fleet__status"]
    assert listed == [*OWN, "fleet__status", "fleet__slow"]  # in expansion order, appended
    assert ran.is_error is False
    assert provider.calls[0][0] == "fleet__status"


async def test_a_tool_outside_the_profile_can_never_be_expanded_or_called() -> None:
    provider = FakeProvider()
    profile = Profile(name="p", servers=frozenset({"other"}))
    async with searching(provider, profile=profile) as gateway, Client(gateway.server) as client:
        expansion = structured(
            await client.call_tool("tool_expand_tools", {"tool_names": ["fleet__status"]})
        )
        searched = structured(await client.call_tool("search_tools", {"query": "fleet status"}))
        called = await client.call_tool("fleet__status", {"sn": "A1"})
        listed = await names(client)
    assert expansion["invalid_tools"] == ["fleet__status"]
    assert "fleet__status" not in expansion["available_expandable_tools"]
    assert all(tool["name"] != "fleet__status" for tool in searched["tools"])
    assert error_code(called) == "unknown_tool"
    assert listed == OWN
    assert provider.calls == []


async def test_each_session_keeps_its_own_expanded_tools() -> None:
    async with searching(FakeProvider()) as gateway:
        async with Client(gateway.server, mode="legacy") as one:
            await one.call_tool("tool_expand_tools", {"tool_names": ["other__ping"]})
            in_one = await names(one)
        async with Client(gateway.server, mode="legacy") as two:
            in_two = await names(two)
    assert in_one == [*OWN, "other__ping"]
    assert in_two == OWN


@pytest.mark.parametrize(
    ("arguments", "wrong"),
    [({"query": ""}, "query"), ({"query": "x", "limit": 0}, "limit"), ({}, "query")],
)
async def test_bad_search_arguments_are_invalid_arguments_naming_the_argument(
    arguments: dict[str, Any], wrong: str
) -> None:
    async with searching(FakeProvider()) as gateway, Client(gateway.server) as client:
        result = await client.call_tool("search_tools", arguments)
    assert result.is_error
    assert error_code(result) == "invalid_arguments"
    block = result.content[0]
    assert isinstance(block, mt.TextContent)
    assert repr(wrong) in block.text or wrong in block.text


async def test_without_tool_search_every_offered_tool_is_listed() -> None:
    async with Gateway(FakeProvider()) as gateway, Client(gateway.server) as client:
        listed = await names(client)
    assert "search_tools" not in listed
    assert "fleet__status" in listed


async def test_a_tokenless_2026_client_over_http_is_refused_tool_search() -> None:
    search = ToolSearch(suggest_tools)
    async with (
        http_gateway(FakeProvider(), tool_search=search) as url,
        http_client(url, mode="auto") as mcp,
    ):
        with pytest.raises(MCPError, match="carries no identity"):
            await mcp.list_tools()


async def test_a_2026_client_with_a_token_keeps_its_expansion_across_requests() -> None:
    settings = GatewaySettings(transport="http", port=0, bearer_token="t0ken")
    search = ToolSearch(suggest_tools)
    async with http_gateway(FakeProvider(), settings, tool_search=search) as url:
        async with http_client(url, "t0ken", mode="auto") as mcp:
            await mcp.call_tool("tool_expand_tools", {"tool_names": ["other__ping"]})
        async with http_client(url, "t0ken", mode="auto") as mcp:
            listed = await names(mcp)
    assert listed == [*OWN, "other__ping"]


def test_serve_refuses_tool_search_over_http_without_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SAGENTS_GATEWAY_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="--tool-search") as caught:
        resolve_settings(
            config=None,
            profile=None,
            transport="http",
            host="127.0.0.1",
            port=0,
            mode=None,
            workspace=None,
            background_after=None,
            allowed_hosts=[],
            tool_search=True,
        )
    assert "SAGENTS_GATEWAY_TOKEN" in str(caught.value)


def test_serve_accepts_tool_search_over_stdio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAGENTS_GATEWAY_TOKEN", raising=False)
    settings = resolve_settings(
        config=None,
        profile=None,
        transport="stdio",
        host="127.0.0.1",
        port=0,
        mode=None,
        workspace=None,
        background_after=None,
        allowed_hosts=[],
        tool_search=True,
    )
    assert settings.tool_search is True


async def test_sagents_serve_tool_search_over_stdio_with_the_fleet_server(tmp_path: Path) -> None:
    config = tmp_path / "servers.json"
    fleet = {"command": sys.executable, "args": ["-m", "sagents.demo.fleet_server"]}
    config.write_text(json.dumps({"mcpServers": {"fleet": fleet}}), encoding="utf-8")
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            changed.set()

    command = ["-c", "from sagents.cli.main import main; main()", "serve", "--tool-search"]
    command += ["--config", str(config), "--mode", "auto", "--workspace", str(tmp_path / "ws")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(tmp_path / "data")}
    server = StdioServerParameters(command=sys.executable, args=command, env=env, cwd=str(ROOT))
    with anyio.fail_after(60):
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            before = await names(client)
            found = structured(
                await client.call_tool("search_tools", {"query": "is device SN0001 online?"})
            )
            refused = await client.call_tool("fleet__get_device_status", {"sn": "SN0001"})
            expanded = structured(
                await client.call_tool(
                    "tool_expand_tools", {"tool_names": ["fleet__get_device_status"]}
                )
            )
            await changed.wait()
            after = await names(client)
            status = await client.call_tool("fleet__get_device_status", {"sn": "SN0001"})
            await client.call_tool("tool_expand_tools", {"tool_names": ["run_script"]})
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert before == OWN
    assert found["tools"][0]["name"] == "fleet__get_device_status"
    assert error_code(refused) == "not_allowed"
    assert expanded["expanded_tools"] == ["fleet__get_device_status"]
    assert after == [*OWN, "fleet__get_device_status"]
    assert status.is_error is False
    description = listed["run_script"].description or ""
    assert "- 4 tools of this session: in the script, tools() lists them" in description
    assert "fleet__reboot_device" not in description  # counted, not listed one per line


async def test_an_async_ranking_is_awaited_and_names_outside_the_offer_are_dropped() -> None:
    async def rank(query: str, specs: Sequence[ToolSpec], k: int) -> list[str]:
        return ["not_offered", "fleet__slow", "fleet__slow"]

    async with (
        Gateway(FakeProvider(), tool_search=ToolSearch(rank)) as gateway,
        Client(gateway.server) as client,
    ):
        found = structured(await client.call_tool("search_tools", {"query": "anything"}))
    assert [tool["name"] for tool in found["tools"]] == ["fleet__slow"]
