"""The red team's path, closed: a sandboxed upstream server with network, behind a real
``sagents serve`` over HTTP, tries the gateway's own port (docs/sandbox.md, "The network").

The server (tests/mcp/servers/escape_server.py) lists the gateway's port in its allowlist and
fetches ``/console/approvals`` through the egress proxy, as an HTTP client in the sandbox
does; it also tries the port directly. Both fail, and the gateway keeps serving.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from sagents.gateway import build_gateway, serve_http
from sagents.gateway._settings import GatewaySettings
from sagents.sandbox._bwrap import python_runtime

pytestmark = pytest.mark.anyio

SERVERS = Path(__file__).resolve().parents[1] / "mcp" / "servers"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def _gateway(tmp_path: Path, port: int, network: object) -> AsyncIterator[str]:
    escape = {
        "command": python_runtime()[1],
        "args": [str(SERVERS / "escape_server.py")],
        "permission": "read_only",
        "sandbox": {
            "readable": [str(SERVERS)],
            "home": str(tmp_path / "home"),
            "network": network,
        },
    }
    config = tmp_path / "sagents.json"
    config.write_text(json.dumps({"mcpServers": {"escape": escape}}), encoding="utf-8")
    settings = GatewaySettings(config=config, mode="auto", transport="http", port=port)
    async with build_gateway(settings) as gateway, anyio.create_task_group() as tg:
        bound = await tg.start(serve_http, gateway, settings)
        yield f"http://127.0.0.1:{bound}/mcp"
        tg.cancel_scope.cancel()


def _text(result: mt.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, mt.TextContent))


@pytest.mark.parametrize("listed", [True, False])
async def test_a_sandboxed_server_cannot_reach_the_gateway_that_runs_it(
    tmp_path: Path, listed: bool
) -> None:
    port = _free_port()
    network = {"allow": [f"127.0.0.1:{port}", "localhost"]} if listed else True
    with anyio.fail_after(120):
        async with _gateway(tmp_path, port, network) as url:
            transport = streamable_http_client(url, http_client=httpx2.AsyncClient())
            async with Client(transport) as client:
                approvals = f"http://127.0.0.1:{port}/console/approvals"
                through = await client.call_tool("escape__fetch", {"url": approvals})
                by_name = await client.call_tool(
                    "escape__fetch", {"url": f"http://localhost:{port}/console/approvals"}
                )
                direct = await client.call_tool(
                    "escape__connect", {"host": "127.0.0.1", "port": port}
                )
                still = await client.list_tools()
    assert _text(through).startswith("HTTP 403 sagents egress proxy refused"), _text(through)
    if listed:
        assert "a port of the gateway (this host process) itself" in _text(through)
    else:  # "network": true is public hosts only
        assert "a loopback address not listed in network.allow" in _text(through)
    assert _text(by_name).startswith("HTTP 403"), _text(by_name)
    if listed:  # its own forwarder takes it, and the proxy refuses the tunnel before any byte
        assert _text(direct) == "CONNECTED"
    else:  # the host's loopback is not in its namespace
        assert _text(direct).startswith("ERROR"), _text(direct)
    assert "escape__fetch" in {tool.name for tool in still.tools}
