"""Background calls of 2026-07-28 clients: without a token, reachable only through the handle
the starter received; with a token, scoped to the token. Handshake sessions stay apart."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from sagents.gateway import Profile
from sagents.gateway.settings import GatewaySettings
from sagents.tool.background import TASK_ID_BYTES
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_http import http_gateway

pytestmark = pytest.mark.anyio


def _client(url: str, token: str | None = None, mode: Any = "auto") -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(
        streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers)), mode=mode
    )


async def test_clients_without_a_token_cannot_list_or_find_each_others_runs() -> None:
    provider = FakeProvider()
    with anyio.fail_after(30):
        async with (
            http_gateway(provider, background_after_s=0.01) as url,
            _client(url) as starter,
            _client(url) as other,
        ):
            handed = await starter.call_tool("fleet__slow", {})
            task_id = handed.structured_content["task_id"] if handed.structured_content else ""
            listed = await other.call_tool("script_status", {})
            resources = await other.list_resources()
            guessed = await other.call_tool("script_cancel", {"id": task_id[:12]})
            mine = await starter.call_tool("script_status", {"id": task_id})
            provider.release.set()
    assert len(task_id) >= TASK_ID_BYTES  # 128 random bits, URL-safe
    assert listed.is_error is True
    assert task_id not in str(listed.content)
    assert "pass the id" in str(listed.content)
    assert all(task_id not in str(r.uri) for r in resources.resources)
    assert guessed.is_error is True
    assert not provider.cancelled.is_set()
    assert mine.structured_content is not None
    assert mine.structured_content["status"] == "running"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_clients_of_two_tokens_cannot_see_or_cancel_each_others_runs(mode: str) -> None:
    ops = Profile(name="ops")
    settings = GatewaySettings(
        transport="http", port=0, bearer_token="main-token", token_profiles={"ops-token": ops}
    )
    provider = FakeProvider()
    with anyio.fail_after(30):
        async with (
            http_gateway(
                provider, settings, token_profiles={"ops-token": ops}, background_after_s=0.01
            ) as url,
            _client(url, "main-token", mode) as starter,
            _client(url, "ops-token", mode) as other,
        ):
            handed = await starter.call_tool("fleet__slow", {})
            task_id = handed.structured_content["task_id"] if handed.structured_content else ""
            listed = await other.call_tool("script_status", {})
            cancel = await other.call_tool("script_cancel", {"id": task_id})
            status = await other.call_tool("script_status", {"id": task_id})
            mine = await starter.call_tool("script_status", {})
            provider.release.set()
    assert listed.structured_content == {"tasks": []}
    assert cancel.is_error is True
    assert status.is_error is True
    assert not provider.cancelled.is_set()
    assert mine.structured_content is not None
    assert [t["id"] for t in mine.structured_content["tasks"]] == [task_id]
