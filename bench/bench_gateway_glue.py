"""Cost of serving an upstream MCP tool through ``sagents serve``'s gateway, in the same run.

Run: ``.venv/bin/python bench/bench_gateway_glue.py``. One upstream stdio server
(tests/mcp/servers/fault_server.py) behind a ``ConfiguredGateway``; prints per-call times and
ratios of:

* baseline: ``ToolManager.run_tool("fault__add")`` on the gateway's own registry (the upstream
  round trip through the tool core);
* through the gateway: ``tools/call fault__add`` from an in-process MCP client (policy,
  progress subscription on the hub, result conversion, the client's JSON-RPC);
* the same with a progress token and ``fault__progress`` (three upstream progress
  notifications forwarded per call).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from sagents.gateway._factory import open_gateway
from sagents.gateway._settings import GatewaySettings
from sagents.tool._context import SessionContext

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 200


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "sagents.json"
        upstream = {
            "command": sys.executable,
            "args": [str(ROOT / "tests" / "mcp" / "servers" / "fault_server.py")],
            "toolPermissions": {"progress": "read_only"},
        }
        config.write_text(json.dumps({"mcpServers": {"fault": upstream}}))
        settings = GatewaySettings(config=config, mode="auto")
        async with open_gateway(settings) as gateway:
            context = SessionContext(session_id="bench")
            args = {"a": 1, "b": 2}
            await gateway.manager.run_tool("fault__add", args, context)
            start = time.perf_counter()
            for _ in range(ROUNDS):
                await gateway.manager.run_tool("fault__add", args, context)
            direct = (time.perf_counter() - start) / ROUNDS

            async def on_progress(progress: float, total: float | None, msg: str | None) -> None:
                return None

            async with Client(gateway.server, mode="legacy") as client:
                await client.call_tool("fault__add", args)
                start = time.perf_counter()
                for _ in range(ROUNDS):
                    await client.call_tool("fault__add", args)
                served = (time.perf_counter() - start) / ROUNDS
                start = time.perf_counter()
                for _ in range(ROUNDS):
                    await client.call_tool("fault__progress", {}, progress_callback=on_progress)
                progressed = (time.perf_counter() - start) / ROUNDS
    print(f"baseline ToolManager.run_tool: {direct * 1e3:.2f} ms/call")
    print(f"gateway tools/call:            {served * 1e3:.2f} ms/call  ratio {served / direct:.2f}")
    print(
        f"gateway with 3 progress notes: {progressed * 1e3:.2f} ms/call  "
        f"ratio {progressed / direct:.2f}"
    )


if __name__ == "__main__":
    anyio.run(main)
