"""Two ``sagents serve --transport http`` replicas on one PostgreSQL database
(docs/scale-out.md): a 2026-07-28 client may use either for any request; background calls
started through one are seen, approved and cancelled through the other; a replica killed while
it runs a call has that call marked failed by the other within its lease; handshake-era
sessions that reach the wrong replica are refused with a message saying why."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import psycopg
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from sagents.gateway._server import APPROVAL_INPUT_KEY
from sagents.store._postgres import LEASE_REASON
from tests.gateway.replicas import LEASE_S, TOKEN, Replica, client, replica
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio

SLEEPER = "import time\nprint('started', flush=True)\ntime.sleep(120)\n"
ALLOW: mt.InputResponses = {
    APPROVAL_INPUT_KEY: mt.ElicitResult(action="accept", content={"decision": "allow_once"})
}


@dataclass
class Pair:
    a: Replica
    b: Replica
    workspaces: Path  # the shared workspace root
    store: str


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def pair(
    tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer
) -> AsyncIterator[Pair]:
    """Replicas A and B on one database, shared by the tests that leave both running (the killed
    replica's test starts its own). Only one of them runs run_script: it counts every run_script
    row of the database."""
    root, store = tmp_path_factory.mktemp("replicas"), postgres.new_database()
    async with replica(root, "a", store) as a, replica(root, "b", store) as b:
        yield Pair(a=a, b=b, workspaces=root / "shared-workspaces", store=store)


async def _never_asked(context: ClientRequestContext, params: mt.ElicitRequestParams) -> Any:
    raise AssertionError("2026-07-28 approvals arrive as InputRequiredResult")


def _structured(result: object) -> dict[str, Any]:
    assert isinstance(result, mt.CallToolResult), result
    assert result.structured_content is not None, result
    return dict(result.structured_content)


async def _status(mcp: Client, task_id: str) -> dict[str, Any]:
    return _structured(await mcp.call_tool("script_status", {"id": task_id}))


async def _background_script(mcp: Client) -> str:
    handed = _structured(
        await mcp.call_tool("run_script", {"code": SLEEPER, "tools": [], "description": "sleep"})
    )
    assert handed["status"] == "running"
    return str(handed["task_id"])


async def test_a_call_asked_on_one_replica_is_approved_on_the_other_and_cancelled_back(
    pair: Pair,
) -> None:
    with anyio.fail_after(120):
        async with (
            client(pair.a.url, elicitation_callback=_never_asked) as on_a,
            client(pair.b.url, elicitation_callback=_never_asked) as on_b,
        ):
            tools_a = sorted(t.name for t in (await on_a.list_tools()).tools)
            tools_b = sorted(t.name for t in (await on_b.list_tools()).tools)
            asked = await on_a.session.call_tool("fault__hang", {}, allow_input_required=True)
            assert isinstance(asked, mt.InputRequiredResult)
            handed = await on_b.session.call_tool(
                "fault__hang",
                {},
                input_responses=ALLOW,
                request_state=asked.request_state,
                allow_input_required=True,
            )
            task_id = str(_structured(handed)["task_id"])  # runs on B, in the background
            seen = await _status(on_a, task_id)
            cancelled = _structured(await on_a.call_tool("script_cancel", {"id": task_id}))
            after = await _status(on_b, task_id)
    assert tools_a == tools_b
    assert "fault__hang" in tools_a
    assert seen["status"] == "running"
    assert cancelled["status"] == "cancelled"
    assert after["status"] == "cancelled"


async def test_a_background_script_started_on_one_replica_is_seen_and_cancelled_on_the_other(
    pair: Pair,
) -> None:
    with anyio.fail_after(120):
        async with client(pair.a.url) as on_a, client(pair.b.url) as on_b:
            task_id = await _background_script(on_a)
            seen = await _status(on_b, task_id)
            listed = _structured(await on_b.call_tool("script_status", {}))
            cancelled = _structured(await on_b.call_tool("script_cancel", {"id": task_id}))
    async with await psycopg.AsyncConnection.connect(pair.store) as db:
        cursor = await db.execute(
            "SELECT status, data->>'records_dir' FROM sagents_audit WHERE tool = 'run_script'"
        )
        rows = await cursor.fetchall()
    assert seen["status"] == "running"
    assert task_id in [t["id"] for t in listed["tasks"]]
    assert cancelled["status"] == "cancelled"
    assert [status for status, _ in rows] == ["cancelled"]
    records = pair.workspaces / "sessions"
    assert len(list(records.glob(f"*/{rows[0][1]}/run.json"))) == 1  # on the shared root


async def test_a_killed_replica_has_its_running_call_failed_by_the_other_within_the_lease(
    tmp_path: Path, postgres_url: str
) -> None:
    with anyio.fail_after(120):
        async with replica(tmp_path, "b", postgres_url) as b, client(b.url) as on_b:
            async with replica(tmp_path, "a", postgres_url) as a:
                async with client(a.url) as on_a:
                    task_id = await _background_script(on_a)
                a.process.kill()  # SIGKILL: no clean-up, no goodbye to the store
                await a.process.wait()
            status = await _status(on_b, task_id)
            # One lease for A's last beat to expire, one beat of B to notice it (and slack
            # for a loaded machine): B's heartbeat is what marks it, nothing here does.
            with anyio.fail_after(LEASE_S * 3):
                while status["status"] == "running":
                    await anyio.sleep(0.2)
                    status = await _status(on_b, task_id)
    assert status["status"] == "failed"
    assert status["reason"] == LEASE_REASON


async def test_a_handshake_session_on_the_wrong_replica_is_refused_with_the_reason(
    pair: Pair,
) -> None:
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    with anyio.fail_after(120):
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            a, b = pair.a, pair.b
            opened = await http.post(a.url, json=initialize)
            session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
            await http.post(
                a.url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=session,
            )
            on_a = await http.post(a.url, json=listing, headers=session)
            on_b = await http.post(b.url, json=listing, headers=session)
    assert on_a.status_code == 200
    assert on_b.status_code == 404
    message = on_b.json()["error"]["message"]
    assert "is not open on this gateway replica" in message
    assert "session affinity" in message
    assert "2026-07-28" in message
