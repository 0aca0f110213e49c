"""Overhead of the gateway façade: tool calls per second through ``sagents serve``'s MCP server.

Baselines (measured in the same run): the provider's ``run_tool`` called directly, and, for each
transport, a bare ``mcp`` low-level server that answers the same tool with no policy, progress or
sessions. The ratio gateway / bare server on the same transport is the façade's own cost. Paths:
the SDK's in-process client on the 2026-07-28 per-request protocol (direct dispatch), on the
handshake protocol (JSON-RPC over memory streams), and streamable HTTP on loopback. Each path
makes CALLS calls, CONCURRENCY at a time.

Run: ``.venv/bin/python bench/bench_gateway.py``
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import mcp_types as mt
from mcp import Client
from mcp.server.lowlevel.server import Server

from sagents.core._permissions import ToolAnnotations
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.gateway import Gateway, serve_http
from sagents.gateway._settings import GatewaySettings
from sagents.tool._context import SessionContext

CALLS = 500  # tool calls per measured path
CONCURRENCY = 4  # calls in flight (run_script's default limit)
ROUNDS = 3  # interleaved measurements per path; the best one counts


class EchoProvider:
    """One read-only tool that answers at once (so the measure is the gateway's own cost)."""

    def list_specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name="bench__echo",
                permission="read_only",
                annotations=ToolAnnotations(read_only_hint=True),
            )
        ]

    async def run_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        session_context: SessionContext | None,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the provider seam's signature
    ) -> ToolResult:
        return ToolResult.from_structured({"echo": dict(arguments)})


async def measure(call: Callable[[int], Awaitable[object]]) -> float:
    """Calls per second for CALLS calls, CONCURRENCY at a time."""
    limiter = anyio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with limiter:
            await call(i)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(CALLS):
            tg.start_soon(one, i)
    return CALLS / (time.perf_counter() - start)


def bare_server() -> Server[Any]:
    """The same tool on a plain SDK server: the per-transport baseline."""

    async def list_tools(ctx: Any, params: Any) -> mt.ListToolsResult:
        return mt.ListToolsResult(
            tools=[mt.Tool(name="bench__echo", input_schema={"type": "object"})]
        )

    async def call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        result = ToolResult.from_structured({"echo": dict(params.arguments or {})})
        text = result.text
        return mt.CallToolResult(
            content=[mt.TextContent(text=text)], structured_content=result.structured
        )

    return Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)


async def rate_of(target: Any, mode: str) -> float:
    async with Client(target, mode=mode) as client:

        async def through(i: int) -> object:
            return await client.call_tool("bench__echo", {"i": i})

        return await measure(through)


async def http_rate(server: Server[Any], gateway: Gateway) -> float:
    gateway.server = server
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_http, gateway, GatewaySettings(transport="http", port=0))
        rate = await rate_of(f"http://127.0.0.1:{port}/mcp", "legacy")
        tg.cancel_scope.cancel()
    return rate


async def main() -> None:
    provider = EchoProvider()

    async def direct(i: int) -> object:
        return await provider.run_tool("bench__echo", {"i": i}, SessionContext())

    baseline = await measure(direct)
    print(f"direct run_tool: {baseline:.0f} calls/s (no MCP at all)")
    async with Gateway(provider) as gateway:
        real = gateway.server
        for label, mode in (("per-request (2026-07-28)", "auto"), ("handshake JSON-RPC", "legacy")):
            bare = ours = 0.0
            for _ in range(ROUNDS):  # interleaved, best of ROUNDS: the machine is shared
                bare = max(bare, await rate_of(bare_server(), mode))
                ours = max(ours, await rate_of(real, mode))
            report(label, bare, ours)
        bare = ours = 0.0
        for _ in range(ROUNDS):
            bare = max(bare, await http_rate(bare_server(), gateway))
            ours = max(ours, await http_rate(real, gateway))
        report("streamable HTTP", bare, ours)


def report(label: str, bare: float, ours: float) -> None:
    print(
        f"{label:>25}: bare SDK {bare:7.0f} calls/s, gateway {ours:7.0f} calls/s, "
        f"ratio {ours / bare:.3f}"
    )


if __name__ == "__main__":
    anyio.run(main)
