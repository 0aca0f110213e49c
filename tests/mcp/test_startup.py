"""Start-up: servers start side by side, the gateway answers at once, tools arrive when ready."""

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import IncomingMessage

from sagents.core._spec import ToolSpec
from sagents.gateway._factory import open_gateway
from sagents.gateway._settings import GatewaySettings
from sagents.mcp import MCPSupervisor, ServerSettings
from tests.mcp.helpers import ROOT, SERVERS

pytestmark = pytest.mark.anyio

FAULT = SERVERS / "fault_server.py"


def gated_server(gate: Path) -> dict[str, Any]:
    """A stdio server that starts only once the test writes a line into the FIFO ``gate``."""
    script = f'read line < "{gate}"; exec "{sys.executable}" "{FAULT}"'
    return {"command": "sh", "args": ["-c", script], "env": {"PYTHONPATH": str(ROOT)}}


async def open_gate(gate: Path) -> None:
    def write() -> None:
        with gate.open("w") as fifo:  # blocks until the server's shell opens it for reading
            fifo.write("go\n")

    await anyio.to_thread.run_sync(write)


async def test_the_gateway_answers_before_a_blocked_server_and_announces_its_tools(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    config = tmp_path / "sagents.json"
    config.write_text(json.dumps({"mcpServers": {"late": gated_server(gate)}}), encoding="utf-8")
    settings = GatewaySettings(config=config, transport="http", port=0)
    announced = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            announced.set()

    with anyio.fail_after(60):
        async with open_gateway(settings, wait_for_servers=False) as gateway:
            gateway.first_list_wait_s = (
                1.0  # the first list waits this long for 'late', then goes on
            )
            state = gateway.manager.mcp_server_status("late").state
            client = Client(gateway.server, mode="legacy", message_handler=on_message)
            async with client:
                before = {tool.name for tool in (await client.list_tools()).tools}
                await open_gate(gate)
                await announced.wait()
                after = {tool.name for tool in (await client.list_tools()).tools}
                echoed = await client.call_tool("late__add", {"a": 1, "b": 2})
    assert state == "connecting"
    assert not any(name.startswith("late__") for name in before)
    assert {"late__echo", "late__add"} <= after
    assert echoed.structured_content == {"sum": 3}


async def test_a_server_that_failed_its_first_start_is_retried_in_the_background(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "second-try"
    script = (
        f'if [ -e "{marker}" ]; then exec "{sys.executable}" "{FAULT}"; '
        f'else touch "{marker}"; echo "not yet" >&2; exit 1; fi'
    )
    params = StdioServerParameters(command="sh", args=["-c", script])
    ready = anyio.Event()

    async def on_tools(server: str, specs: tuple[ToolSpec, ...]) -> None:
        ready.set()

    settings = ServerSettings(restart_backoff=0.05)
    async with MCPSupervisor(log_dir=tmp_path, on_tools_changed=on_tools) as sup:
        with anyio.fail_after(30):
            first = (await sup.add_servers({"flaky": (params, settings)}))["flaky"]
            await ready.wait()  # no call asks for it: the retry happens by itself
            added = await sup.call_tool("flaky", "add", {"a": 1, "b": 1})
        status = sup.status("flaky")
    assert first.state == "failed"
    assert first.exit_code == 1
    assert added.structured == {"sum": 2}
    assert (status.state, status.restarts) == ("ready", 1)


async def test_servers_added_without_waiting_report_connecting_at_once(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    spec = gated_server(gate)
    params = StdioServerParameters(command=spec["command"], args=spec["args"], env=spec["env"])
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        with anyio.fail_after(30):
            statuses = await sup.add_servers({"late": (params, ServerSettings())}, wait=False)
            await open_gate(gate)
            await sup.call_tool("late", "echo", {"text": "x"})  # waits for the first start
        state = sup.status("late").state
    assert statuses["late"].state == "connecting"
    assert state == "ready"
