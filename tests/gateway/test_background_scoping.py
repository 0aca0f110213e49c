"""Background calls of 2026-07-28 clients: without a token, reachable only through the handle
the starter received; with a token, scoped to the token. Handshake sessions stay apart."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from sagents.audit._store import AuditEntry, SqliteAuditStore
from sagents.audit._tasks import SqliteTaskStore
from sagents.gateway import Profile
from sagents.gateway._settings import GatewaySettings
from sagents.tool._background import TASK_ID_BYTES
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


async def test_the_task_and_audit_stores_are_private_to_the_gateways_user(
    tmp_path: Path,
) -> None:
    # They hold every call's arguments and the results of background calls: another local
    # user must not read them, whatever the umask.
    data = tmp_path / "data"
    tasks = SqliteTaskStore(data / "background.sqlite3")
    tasks.started("t1", owner="o", tool="fleet__status", started_at=0.0)
    audit = SqliteAuditStore(path=data / "audit.sqlite3")
    await audit.record(AuditEntry(kind="gateway_call", ts=0.0, tool="t", status="ok"))
    shared = tmp_path / "shared"  # a data dir that exists already, world-readable
    shared.mkdir(mode=0o755)
    (shared / "background.sqlite3").touch(mode=0o644)
    SqliteTaskStore(shared / "background.sqlite3").get("t1")
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    for path in (
        data / "background.sqlite3",
        data / "audit.sqlite3",
        shared / "background.sqlite3",
    ):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
