"""2026-07-28 checks of the gateway: server/discover, deterministic tools/list order, cache
hints on the wire, and the Mcp-Method / Mcp-Name headers over HTTP (tasks/* included)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.shared.subscriptions import ToolsListChanged

from sagents.core._spec import ToolSpec
from sagents.gateway import Gateway
from sagents.gateway._sources import SkillResources
from sagents.mcp._ext_types import SKILLS_EXTENSION, TASKS_EXTENSION
from sagents.skill import SkillManager
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_http import http_gateway

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"


def body(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {TASKS_EXTENSION: {}},
        },
    }
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {**(params or {}), "_meta": meta},
    }


async def post(
    http: httpx2.AsyncClient, url: str, message: dict[str, Any], **headers: str
) -> dict[str, Any]:
    base = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": message["method"],
    }
    response = await http.post(url, headers={**base, **headers}, content=json.dumps(message))
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    answer: dict[str, Any] = json.loads(text)
    return answer


@dataclass
class Reversed(FakeProvider):
    def list_specs(self) -> list[ToolSpec]:
        return list(reversed(super().list_specs()))


async def test_tools_list_order_is_the_same_whatever_the_provider_order() -> None:
    names: list[list[str]] = []
    for provider in (FakeProvider(), Reversed()):
        async with Gateway(provider) as gateway, Client(gateway.server) as client:
            names.append([tool.name for tool in (await client.list_tools()).tools])
    assert names[0] == names[1]
    assert names[0] == sorted(names[0])


async def test_server_discover_announces_both_extensions_over_http() -> None:
    resources = SkillResources(SkillManager())
    with anyio.fail_after(20):
        async with (
            http_gateway(FakeProvider(), resources=resources) as url,
            httpx2.AsyncClient() as http,
        ):
            answer = await post(http, url, body("server/discover"))
    result = answer["result"]
    assert VERSION in result["supportedVersions"]
    assert set(result["capabilities"]["extensions"]) == {SKILLS_EXTENSION, TASKS_EXTENSION}


async def test_list_results_carry_cache_hints_on_the_wire() -> None:
    resources = SkillResources(SkillManager())
    with anyio.fail_after(20):
        async with (
            http_gateway(FakeProvider(), resources=resources) as url,
            httpx2.AsyncClient() as http,
        ):
            tools = await post(http, url, body("tools/list"))
            listed = await post(http, url, body("resources/list"))
            skills = await post(http, url, body("skills/list"))
    for answer in (tools, listed, skills):
        assert answer["result"]["ttlMs"] == 0
        assert answer["result"]["cacheScope"] == "private"


async def test_http_headers_must_match_the_body_tasks_included() -> None:
    with anyio.fail_after(20):
        async with http_gateway(FakeProvider()) as url, httpx2.AsyncClient() as http:
            wrong_method = await post(http, url, body("tools/list"), **{"Mcp-Method": "ping"})
            get = body("tasks/get", {"taskId": "t1"})
            no_name = await post(http, url, get)
            wrong_name = await post(http, url, get, **{"Mcp-Name": "t2"})
            right_name = await post(http, url, get, **{"Mcp-Name": "t1"})
    assert wrong_method["error"]["code"] == -32020
    assert no_name["error"]["code"] == -32020
    assert wrong_name["error"]["code"] == -32020
    assert right_name["error"]["code"] == -32602  # checked, then: no such task


async def test_a_2026_client_hears_of_changed_tools_on_its_listen_stream() -> None:
    async with (
        Gateway(FakeProvider()) as gateway,
        Client(gateway.server, mode="auto") as client,
    ):
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True
        with anyio.fail_after(10):
            async with client.listen(tools_list_changed=True) as subscription:
                await gateway.notify_tools_changed()
                event = await subscription.__anext__()
    assert isinstance(event, ToolsListChanged)
