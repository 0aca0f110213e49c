"""A 2026-07-28 client's pending approval survives a restart of ``sagents serve`` (SIGKILL), on
the embedded store and on PostgreSQL: answered after the restart, the call runs once; a
run_script still waiting for its one approval when the gateway restarted is aborted, never run
(docs/gateway.md, "Modes and approvals")."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import psycopg
import pytest
from mcp import Client

from sagents.gateway._decision import ABORTED_WAITING
from tests.gateway.replicas import client, replica
from tests.gateway.test_replicas import ALLOW, _never_asked

pytestmark = pytest.mark.anyio

SCRIPT = "from agent_tools import call\nprint(call('fault__echo', {'text': 'ECHOED-42'}))\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> str:
    return "" if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))


async def _ask_then_kill(tmp_path: Path, store: str, tool: str, arguments: dict[str, Any]) -> str:
    """Ask for ``tool``'s approval, then SIGKILL the gateway; the ``requestState``."""
    async with replica(tmp_path, "a", store) as first:
        async with client(first.url, elicitation_callback=_never_asked) as mcp:
            asked = await mcp.session.call_tool(tool, arguments, allow_input_required=True)
        first.process.send_signal(signal.SIGKILL)
        await first.process.wait()
    assert isinstance(asked, mt.InputRequiredResult), asked
    assert asked.request_state is not None
    return asked.request_state


async def _answer(mcp: Client, tool: str, arguments: dict[str, Any], state: str) -> object:
    """Allow the call once, answering the approval that ``state`` asked for."""
    return await mcp.session.call_tool(
        tool, arguments, input_responses=ALLOW, request_state=state, allow_input_required=True
    )


async def test_an_approval_asked_before_a_restart_is_answered_after_it_and_runs_once(
    tmp_path: Path, store: str
) -> None:
    arguments = {"text": "after the restart"}
    with anyio.fail_after(240):
        state = await _ask_then_kill(tmp_path, store, "fault__echo", arguments)
        async with (
            replica(tmp_path, "a", store) as second,
            client(second.url, elicitation_callback=_never_asked) as mcp,
        ):
            answered = await _answer(mcp, "fault__echo", arguments, state)
            replayed = await _answer(mcp, "fault__echo", arguments, state)
    assert isinstance(answered, mt.CallToolResult), answered
    assert answered.is_error is False
    assert [c.text for c in answered.content if isinstance(c, mt.TextContent)] == [
        "after the restart"
    ]
    assert isinstance(replayed, mt.InputRequiredResult)  # spent: asked again, never run twice


async def _lease_ran_out(store: str) -> None:
    """On PostgreSQL, the killed replica's lease runs out (as ``leaseSec`` after its death):
    its heartbeat is moved back, so no other replica takes it for alive."""
    if store:
        async with await psycopg.AsyncConnection.connect(store, autocommit=True) as db:
            await db.execute("UPDATE sagents_replicas SET heartbeat_at = now() - interval '1 day'")


async def test_a_run_script_waiting_for_its_approval_at_a_restart_is_aborted_not_run(
    tmp_path: Path, store: str
) -> None:
    arguments = {"code": SCRIPT, "tools": ["fault__echo"], "description": "echo once"}
    with anyio.fail_after(240):
        state = await _ask_then_kill(tmp_path, store, "run_script", arguments)
        await _lease_ran_out(store)
        async with (
            replica(tmp_path, "a", store) as second,
            client(second.url, elicitation_callback=_never_asked) as mcp,
        ):
            answered = await _answer(mcp, "run_script", arguments, state)
            again = await mcp.session.call_tool("run_script", arguments, allow_input_required=True)
    assert isinstance(answered, mt.CallToolResult), answered
    shown = " ".join(c.text for c in answered.content if isinstance(c, mt.TextContent))
    assert ABORTED_WAITING in shown, shown
    assert "ECHOED-42" not in shown, shown
    assert not list((tmp_path / "shared-workspaces").glob("**/run.json"))  # nothing ran
    assert isinstance(again, mt.InputRequiredResult)  # the client may ask again


async def test_a_run_script_approval_asked_by_a_live_replica_runs_on_another(
    tmp_path: Path, postgres_url: str
) -> None:
    arguments = {"code": SCRIPT, "tools": ["fault__echo"], "description": "echo once"}
    with anyio.fail_after(240):
        async with (
            replica(tmp_path, "a", postgres_url) as a,
            replica(tmp_path, "b", postgres_url) as b,
            client(a.url, elicitation_callback=_never_asked) as on_a,
            client(b.url, elicitation_callback=_never_asked) as on_b,
        ):
            asked = await on_a.session.call_tool("run_script", arguments, allow_input_required=True)
            assert isinstance(asked, mt.InputRequiredResult)
            assert asked.request_state is not None
            answered = await _answer(on_b, "run_script", arguments, asked.request_state)
    assert isinstance(answered, mt.CallToolResult), answered
    shown = " ".join(c.text for c in answered.content if isinstance(c, mt.TextContent))
    assert "ECHOED-42" in shown.split("\n", 1)[1], shown  # the script's output: it ran, once
