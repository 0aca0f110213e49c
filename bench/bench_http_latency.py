"""Per-call latency of one client session over streamable HTTP: the gateway vs a bare SDK server.

One session calls a trivial tool CALLS times in a row (one call in flight, so a fixed per-call
delay such as a flush timer or Nagle's algorithm shows in full). Measured in the same run:

- ``bare SDK``: a low-level ``mcp`` server with the tool, served the SDK's way (its
  ``streamable_http_app`` under uvicorn, which binds the port itself): the baseline;
- ``gateway (local tool)``: the gateway façade in-process (:func:`sagents.gateway.serve_http`)
  with the tool as a local provider: the cost of the gateway's HTTP path alone;
- ``sagents serve``: the real command (``sagents serve --transport http``) with the same bare
  server as a stdio upstream: what a user of the gateway sees (one more hop, over stdio).

For each, both protocol generations: the handshake era (``legacy``, an SSE response per call)
and 2026-07-28 (``auto``, one JSON response per POST). The ratio is p50 / bare p50 of the same
protocol; rounds are interleaved and the best p50 of ROUNDS counts (the machine is shared).

Run: ``.venv/bin/python bench/bench_http_latency.py``
"""

from __future__ import annotations

import os
import socket
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import uvicorn
from mcp import Client
from mcp.server.lowlevel.server import Server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_gateway import EchoProvider  # noqa: E402 - the bench directory is not a package

from sagents.gateway import Gateway, serve_http  # noqa: E402
from sagents.gateway._settings import GatewaySettings  # noqa: E402

CALLS = 200  # sequential calls per measurement
ROUNDS = 3  # interleaved measurements per target and protocol; the best p50 counts
MODES = ("legacy", "auto")

UPSTREAM = """
import anyio, mcp_types as mt
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

async def list_tools(ctx, params):
    return mt.ListToolsResult(tools=[mt.Tool(name="echo", input_schema={"type": "object"})])

async def call_tool(ctx, params):
    return mt.CallToolResult(content=[mt.TextContent(text="ok")])

async def main():
    server = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""


def bare_server() -> Server[Any]:
    """The trivial tool on a plain SDK server."""

    async def list_tools(ctx: Any, params: Any) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=[mt.Tool(name="echo", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        return mt.CallToolResult(content=[mt.TextContent(text="ok")])

    return Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def bare_http() -> AsyncIterator[str]:
    """The bare server under uvicorn on a port uvicorn binds itself (the SDK's own way)."""
    port = free_port()
    app = bare_server().streamable_http_app(streamable_http_path="/mcp")
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        while not server.started:  # noqa: ASYNC110 - uvicorn offers no event for it
            await anyio.sleep(0.01)
        yield f"http://127.0.0.1:{port}/mcp"
        server.should_exit = True


@asynccontextmanager
async def gateway_http() -> AsyncIterator[str]:
    """The gateway façade in-process with the tool as a local provider."""

    async with Gateway(EchoProvider()) as gateway, anyio.create_task_group() as tg:
        port = await tg.start(serve_http, gateway, GatewaySettings(transport="http", port=0))
        yield f"http://127.0.0.1:{port}/mcp"
        tg.cancel_scope.cancel()


@asynccontextmanager
async def sagents_serve(workdir: Path) -> AsyncIterator[str]:
    """``sagents serve --transport http`` with the bare server as its stdio upstream."""
    import json

    config = workdir / "sagents.json"
    upstream = {"command": sys.executable, "args": ["-c", UPSTREAM]}
    config.write_text(json.dumps({"mcpServers": {"bench": upstream}}), encoding="utf-8")
    code = "from sagents.cli.main import main; main()"
    command = [sys.executable, "-c", code, "serve", "--transport", "http", "--port", "0"]
    command += ["--config", str(config)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(workdir / "data")}
    async with await anyio.open_process(command, env=env, cwd=ROOT) as process:
        assert process.stderr is not None
        buffer = b""
        while b"/mcp" not in buffer:
            buffer += await process.stderr.receive()
        line = next(li for li in buffer.decode().splitlines() if "/mcp" in li)
        try:
            yield line.split("sagents serve: ", 1)[1].strip()
        finally:
            process.terminate()
            await process.wait()


async def p50_ms(url: str, tool: str, mode: str) -> tuple[float, float]:
    """p50 and p90 in milliseconds of CALLS sequential calls (after one warm-up call)."""
    async with Client(url, mode=mode) as client:
        await client.call_tool(tool, {})
        times = []
        for _ in range(CALLS):
            start = time.perf_counter()
            await client.call_tool(tool, {})
            times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times) * 1000, times[int(len(times) * 0.9)] * 1000


Target = Callable[[], Awaitable[tuple[float, float]]]


async def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sagents-bench-") as tmp:
        async with (
            bare_http() as bare_url,
            gateway_http() as gateway_url,
            sagents_serve(Path(tmp)) as serve_url,
        ):
            targets = {
                "bare SDK": (bare_url, "echo"),
                "gateway (local tool)": (gateway_url, "bench__echo"),
                "sagents serve": (serve_url, "bench__echo"),
            }
            for mode in MODES:
                best: dict[str, tuple[float, float]] = {}
                for _ in range(ROUNDS):
                    for label, (url, tool) in targets.items():
                        measured = await p50_ms(url, tool, mode)
                        if label not in best or measured[0] < best[label][0]:
                            best[label] = measured
                base = best["bare SDK"][0]
                for label, (p50, p90) in best.items():
                    print(
                        f"{mode:>6} {label:>21}: p50 {p50:6.2f} ms, p90 {p90:6.2f} ms, "
                        f"ratio to bare {p50 / base:5.2f}"
                    )


if __name__ == "__main__":
    anyio.run(main)
