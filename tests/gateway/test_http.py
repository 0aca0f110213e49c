"""The gateway over streamable HTTP on loopback: calls, progress, approval, tokens, rebinding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from sagents.gateway import Gateway, Profile, serve_http
from sagents.gateway._settings import GatewaySettings
from tests.gateway.fakes import FakeProvider, FakeScriptProgress

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def http_gateway(
    provider: FakeProvider, settings: GatewaySettings | None = None, **kwargs: Any
) -> AsyncIterator[str]:
    settings = settings or GatewaySettings(transport="http", port=0)
    async with (
        Gateway(provider, progress=provider.progress, **kwargs) as gateway,
        anyio.create_task_group() as tg,
    ):
        port = await tg.start(serve_http, gateway, settings)
        yield f"http://127.0.0.1:{port}/mcp"
        tg.cancel_scope.cancel()


def client(url: str, token: str | None = None, **kwargs: Any) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))
    return Client(transport, **kwargs)


async def allow_once(
    context: ClientRequestContext, params: mt.ElicitRequestParams
) -> mt.ElicitResult:
    return mt.ElicitResult(action="accept", content={"decision": "allow_once"})


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_http_lists_calls_reports_progress_and_asks_for_approval(era: str) -> None:
    provider = FakeProvider(script_events=[FakeScriptProgress(calls=2, done=2, total=5)])
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with anyio.fail_after(20):
        async with (
            http_gateway(provider) as url,
            client(url, mode=era, elicitation_callback=allow_once) as mcp,
        ):
            names = {tool.name for tool in (await mcp.list_tools()).tools}
            status = await mcp.call_tool("fleet__status", {"sn": "Z"})
            progressed = await mcp.call_tool("fleet__progress", {}, progress_callback=on_progress)
            approved = await mcp.call_tool("fleet__configure", {})
    assert "fleet__status" in names
    assert status.structured_content == {"tool": "fleet__status", "arguments": {"sn": "Z"}}
    assert progressed.is_error is False
    assert seen == [2.0]
    assert approved.is_error is False
    assert [call[0] for call in provider.calls][-1] == "fleet__configure"


async def test_http_cancellation_reaches_the_provider() -> None:
    provider = FakeProvider()
    with anyio.fail_after(20):
        async with http_gateway(provider) as url, client(url, mode="legacy") as mcp:
            async with anyio.create_task_group() as tg:
                tg.start_soon(mcp.call_tool, "fleet__slow", {})
                await provider.started.wait()
                tg.cancel_scope.cancel()
            await provider.cancelled.wait()
    assert provider.cancelled.is_set()


async def test_a_bad_host_header_is_refused_as_dns_rebinding() -> None:
    with anyio.fail_after(20):
        async with http_gateway(FakeProvider()) as url, httpx2.AsyncClient() as http:
            response = await http.post(
                url,
                headers={
                    "Host": "evil.example:80",
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
                content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
            )
            foreign_origin = await http.post(
                url,
                headers={
                    "Origin": "http://evil.example",
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
                content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
            )
    assert response.status_code == 421
    assert foreign_origin.status_code == 403


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_configured_token_is_required_and_a_bound_token_selects_its_profile(
    era: str,
) -> None:
    ops = Profile(name="ops", servers=frozenset({"other"}), mode="read_only")
    settings = GatewaySettings(
        transport="http", port=0, bearer_token="main-token", token_profiles={"ops-token": ops}
    )
    provider = FakeProvider()
    with anyio.fail_after(20):
        async with http_gateway(provider, settings, token_profiles={"ops-token": ops}) as url:
            async with httpx2.AsyncClient() as http:
                anonymous = await http.post(
                    url,
                    headers={"Content-Type": "application/json"},
                    content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                )
                wrong = await http.post(
                    url,
                    headers={"Content-Type": "application/json", "Authorization": "Bearer nope"},
                    content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                )
            async with client(url, token="main-token", mode=era) as main:
                main_names = {tool.name for tool in (await main.list_tools()).tools}
            async with client(url, token="ops-token", mode=era) as scoped:
                ops_names = {tool.name for tool in (await scoped.list_tools()).tools}
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert wrong.status_code == 401
    assert "fleet__configure" in main_names
    assert ops_names == {"other__ping"}


async def test_a_handshake_era_http_client_is_told_the_lists_change() -> None:
    # The gateway sends notifications/{tools,resources}/list_changed to these clients (an
    # upstream that becomes ready, a tool search expansion): its capabilities must say so, over
    # HTTP as over stdio (MCP 2025-11-25, "Tools": listChanged).
    with anyio.fail_after(20):
        async with http_gateway(FakeProvider()) as url, client(url, mode="legacy") as mcp:
            tools = mcp.server_capabilities.tools
            resources = mcp.server_capabilities.resources
    assert tools is not None
    assert tools.list_changed is True
    assert resources is not None
    assert resources.list_changed is True
