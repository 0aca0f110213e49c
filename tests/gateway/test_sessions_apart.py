"""One session never sees, answers or inherits another's approvals (docs/architecture.md,
"Per-call state"): two MCP clients on one ``sagents serve --transport http`` at once.

Each call's question goes to the client of that call (direct calls and run_script alike),
and a grant "for this session" stays with the session that gave it and spares only the tools
it names.

Real peers: ``sagents serve`` as a subprocess over streamable HTTP in ``ask`` mode, the
upstream ``tests/mcp/servers/fault_server.py`` (``fault__echo`` and ``fault__add_tool`` are
write tools there), the ``mcp`` SDK's client.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from tests.gateway.serve_probe import Serve, http_serve
from tests.gateway.test_configured import FAULT_SERVER, PERMISSIONS, ROOT, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def fault_upstream() -> dict[str, object]:
    return {
        "command": sys.executable,
        "args": [str(FAULT_SERVER)],
        "env": {"PYTHONPATH": str(ROOT)},
        "toolPermissions": PERMISSIONS,
    }


def serve(tmp_path: Path, settings: dict[str, object] | None = None) -> object:
    return http_serve(
        tmp_path, settings, servers={"fault": fault_upstream()}, args=("--mode", "ask")
    )


def echo_script(text: str, *tools: str) -> dict[str, object]:
    code = f"from agent_tools import call\nprint(call('fault__echo', {{'text': {text!r}}}))\n"
    if "fault__add_tool" in tools:
        code += "print(call('fault__add_tool', {}))\n"
    return {"code": code, "tools": list(tools), "description": f"script of {text}"}


class Client_:
    """An elicitation callback that records each question, waits until ``gate`` is set
    (so that two clients' questions are outstanding at once), then gives ``decision``."""

    def __init__(self, decision: str, gate: anyio.Event | None = None) -> None:
        self.decision = decision
        self.gate = gate
        self.messages: list[str] = []
        self.asked = anyio.Event()

    async def __call__(
        self, context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        self.messages.append(params.message)
        self.asked.set()
        if self.gate is not None:
            await self.gate.wait()
        return mt.ElicitResult(action="accept", content={"decision": self.decision})


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # handshake era; 2026-07-28
async def test_two_clients_each_approve_only_their_own_run_script(
    tmp_path: Path, mode: Literal["legacy", "auto"]
) -> None:
    both_asked = anyio.Event()
    a = Client_("allow_once", both_asked)
    b = Client_("deny", both_asked)
    results: dict[str, mt.CallToolResult] = {}
    with anyio.fail_after(120):
        async with serve(tmp_path) as gateway:  # type: ignore[attr-defined]
            assert isinstance(gateway, Serve)
            async with (
                Client(gateway.url, mode=mode, elicitation_callback=a) as client_a,
                Client(gateway.url, mode=mode, elicitation_callback=b) as client_b,
            ):

                async def run(name: str, client: Client) -> None:
                    results[name] = await client.call_tool(
                        "run_script", echo_script(f"from-{name}", "fault__echo")
                    )

                async with anyio.create_task_group() as tg:
                    tg.start_soon(run, "A", client_a)
                    tg.start_soon(run, "B", client_b)
                    await a.asked.wait()
                    await b.asked.wait()
                    both_asked.set()
    assert len(a.messages) == 1, a.messages
    assert "from-A" in a.messages[0]
    assert len(b.messages) == 1, b.messages
    assert "from-B" in b.messages[0]
    assert results["A"].is_error is False, text_of(results["A"])
    assert "from-A" in text_of(results["A"])
    assert results["B"].is_error is True
    assert "from-B" not in text_of(results["B"])


async def test_a_session_grant_of_one_client_never_spares_another(tmp_path: Path) -> None:
    a = Client_("allow_session")
    b = Client_("deny")
    with anyio.fail_after(120):
        async with (
            serve(tmp_path) as gateway,  # type: ignore[attr-defined]
            Client(gateway.url, mode="legacy", elicitation_callback=a) as client_a,
            Client(gateway.url, mode="legacy", elicitation_callback=b) as client_b,
        ):
            granted = await client_a.call_tool("fault__echo", {"text": "a"})
            a_script = await client_a.call_tool("run_script", echo_script("a2", "fault__echo"))
            b_direct = await client_b.call_tool("fault__echo", {"text": "b"})
            b_script = await client_b.call_tool("run_script", echo_script("b2", "fault__echo"))
    assert text_of(granted) == "a"
    assert a_script.is_error is False, text_of(a_script)
    assert "a2" in text_of(a_script)
    assert len(a.messages) == 1, a.messages  # the grant spared A's script
    assert b_direct.is_error is True
    assert text_of(b_direct) != "b"
    assert b_script.is_error is True
    assert "b2" not in text_of(b_script)
    assert len(b.messages) == 2, b.messages  # B was asked for each of its own calls


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # handshake era; 2026-07-28
async def test_a_script_listing_a_granted_tool_and_another_asks_about_the_other(
    tmp_path: Path, mode: Literal["legacy", "auto"]
) -> None:
    a = Client_("allow_session")
    with anyio.fail_after(120):
        async with (
            serve(tmp_path) as gateway,  # type: ignore[attr-defined]
            Client(gateway.url, mode=mode, elicitation_callback=a) as client,
        ):
            await client.call_tool("fault__echo", {"text": "grant"})
            a.decision = "allow_once"
            ran = await client.call_tool(
                "run_script", echo_script("two", "fault__echo", "fault__add_tool")
            )
    assert ran.is_error is False, text_of(ran)
    assert "two" in text_of(ran)
    assert "added" in text_of(ran)
    assert len(a.messages) == 2, a.messages
    asked_about = a.messages[1].splitlines()[0]  # "... wants to call the write tools ..."
    assert "fault__add_tool" in asked_about
    if mode == "legacy":
        assert "fault__echo" not in asked_about, asked_about  # allowed for the session already
    else:  # a 2026-07-28 session is one per token: it is never offered a grant to keep
        assert "fault__echo" in asked_about, asked_about
