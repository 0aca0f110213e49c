"""A configurable MCP server on the official SDK (low-level ``Server``), for the fault suite.

Run as ``python fault_server.py MODE [MODE...]`` over stdio, or build in-process with
:func:`build_server`. Modes:

- ``garbage``: print non-protocol lines (and an invalid UTF-8 byte) on stdout before serving;
- ``slow_start``: sleep 5 s before serving;
- ``exit_at_once``: write one line to stderr and exit with status 3 before serving;
- ``ignore_sigterm``: ignore SIGTERM and keep running after stdin closes;
- ``grandchild``: start a ``sleep`` grandchild and write its pid to ``$GRANDCHILD_PID_FILE``;
- ``paged``: list 300 tools 7 per page; ``paged_loop``: the cursor repeats after page 3;
  ``paged_empty``: page 3 answers with an empty-string cursor;
- ``bad_schemas``: also list tools with unusable input schemas.

Tools: ``echo``, ``add`` (read-only), ``die`` (exits mid-call), ``hang`` (reports progress once
when it has started, to a caller that sent a progress token, then waits until cancelled),
``was_cancelled`` (whether a ``hang`` was cancelled, waiting for it up to 20 s),
``progress``, ``progress_token`` (whether the call carried a progress token), ``content``,
``structured_only``, ``error_empty``, ``jsonrpc_error``, ``big`` (5 MB), ``add_tool`` (adds
``extra`` and publishes a tools-changed event), ``pid``, ``die_once``
(idempotent; exits on its first call, marked by the file ``$DIE_ONCE_FILE``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

OBJ: dict[str, Any] = {"type": "object", "properties": {}}
TEXT_ARG: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}
PAGE = 7
WAS_CANCELLED_BOUND_S = 20.0  # generous: under load a cancellation takes its time to arrive


def _tool(name: str, schema: dict[str, Any] | None = None, **kw: Any) -> types.Tool:
    return types.Tool(name=name, description=f"The {name} tool.", input_schema=schema or OBJ, **kw)


def build_server(modes: set[str], on_hang: Callable[[], None] | None = None) -> Server[Any]:
    """Build the server for ``modes`` (see the module docstring).

    ``on_hang`` is called when a ``hang`` call starts (in-process tests wait on it).
    """
    bus = InMemorySubscriptionBus()
    cancelled = anyio.Event()
    extra: list[types.Tool] = []
    base = [
        _tool("echo", TEXT_ARG),
        _tool(
            "add",
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        _tool("die"),
        _tool("hang"),
        _tool("was_cancelled"),
        _tool("progress"),
        _tool("progress_token"),
        _tool("content"),
        _tool("structured_only", output_schema={"type": "object"}),
        _tool("error_empty"),
        _tool("jsonrpc_error"),
        _tool("big"),
        _tool("add_tool"),
        _tool("pid"),
        _tool("die_once", annotations=types.ToolAnnotations(idempotent_hint=True)),
        _tool("long_task", execution=types.ToolExecution(task_support="required")),
    ]
    if "bad_schemas" in modes:
        base += [
            _tool("bad_ref", {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}),
            _tool("not_a_schema", {"type": "object", "properties": {"x": {"type": 12}}}),
            _tool(
                "good_ref",
                {
                    "type": "object",
                    "$defs": {"P": {"type": "object", "properties": {"n": {"type": "integer"}}}},
                    "properties": {"p": {"$ref": "#/$defs/P"}},
                },
            ),
        ]
    paged = {"paged", "paged_loop", "paged_empty"} & modes
    if paged:
        base = [_tool(f"t{i:03d}") for i in range(300)]

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = base + extra
        if not paged:
            return types.ListToolsResult(tools=tools)
        start = int(params.cursor) if params is not None and params.cursor else 0
        if "paged_loop" in modes and start >= 3 * PAGE:
            return types.ListToolsResult(tools=tools[start : start + PAGE], next_cursor=str(start))
        end = start + PAGE
        if "paged_empty" in modes and start >= 2 * PAGE:
            return types.ListToolsResult(tools=tools[start:end], next_cursor="")
        return types.ListToolsResult(
            tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None
        )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        name = params.name
        if name == "echo":
            return types.CallToolResult(content=[types.TextContent(text=str(args.get("text")))])
        if name == "add":
            total = int(args["a"]) + int(args["b"])
            return types.CallToolResult(
                content=[types.TextContent(text=str(total))], structured_content={"sum": total}
            )
        if name == "die":
            os._exit(3)
        if name == "hang":
            if on_hang is not None:
                on_hang()
            try:
                # a caller that sent a progress token learns that the call has arrived
                await ctx.session.report_progress(0, None, "hanging")
                await anyio.sleep_forever()
            finally:
                cancelled.set()
        if name == "was_cancelled":
            # waits for the cancellation of a hang; the bound only ends a test gone wrong
            with anyio.move_on_after(WAS_CANCELLED_BOUND_S):
                await cancelled.wait()
            return types.CallToolResult(content=[types.TextContent(text=str(cancelled.is_set()))])
        if name == "progress":
            for step in range(1, 4):
                await ctx.session.report_progress(step, 3, f"step {step}")
            return types.CallToolResult(content=[types.TextContent(text="done")])
        if name == "progress_token":
            meta: Any = ctx.meta or {}
            token = meta.get("progress_token", meta.get("progressToken"))
            return types.CallToolResult(content=[types.TextContent(text=str(token is not None))])
        if name == "content":
            return types.CallToolResult(
                content=[
                    types.TextContent(text="hello"),
                    types.ImageContent(data="aW1n", mime_type="image/png"),
                    types.AudioContent(data="YXVk", mime_type="audio/wav"),
                    types.ResourceLink(
                        uri="file:///r.txt", name="r", title="R", mime_type="text/plain", size=3
                    ),
                    types.EmbeddedResource(
                        resource=types.TextResourceContents(uri="file:///t", text="embedded")
                    ),
                    types.EmbeddedResource(
                        resource=types.BlobResourceContents(
                            uri="file:///b", blob="YmxvYg==", mime_type="application/x"
                        )
                    ),
                ],
                structured_content={"k": [1, 2]},
            )
        if name == "structured_only":
            return types.CallToolResult(content=[], structured_content={"only": True})
        if name == "error_empty":
            return types.CallToolResult(content=[], is_error=True)
        if name == "jsonrpc_error":
            raise MCPError(code=-32099, message="custom failure", data={"why": "test"})
        if name == "big":
            return types.CallToolResult(content=[types.TextContent(text="x" * 5_000_000)])
        if name == "add_tool":
            extra.append(_tool(f"extra{len(extra)}"))
            await bus.publish(ToolsListChanged())
            return types.CallToolResult(content=[types.TextContent(text="added")])
        if name == "die_once":
            marker = anyio.Path(os.environ["DIE_ONCE_FILE"])
            if not await marker.exists():
                await marker.write_text("died")
                os._exit(4)
            return types.CallToolResult(content=[types.TextContent(text="survived")])
        if name == "pid":
            return types.CallToolResult(content=[types.TextContent(text=str(os.getpid()))])
        raise MCPError(code=-32602, message=f"unknown tool {name!r}")

    return Server(
        "fault",
        version="1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(bus),
    )


async def _serve(modes: set[str]) -> None:
    server = build_server(modes)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    modes = set(sys.argv[1:])
    print(f"fault server starting in modes {sorted(modes)}", file=sys.stderr, flush=True)
    if "exit_at_once" in modes:
        print("fatal: BRAVE_API_KEY is not set", file=sys.stderr, flush=True)
        sys.exit(3)
    if "garbage" in modes:
        sys.stdout.buffer.write(b'this is not JSON-RPC\n{"jsonrpc": broken\n\xff\xfe junk\n')
        sys.stdout.flush()
    if "slow_start" in modes:
        time.sleep(5)
    if "grandchild" in modes:
        child = subprocess.Popen(["sleep", "1000"])
        with open(os.environ["GRANDCHILD_PID_FILE"], "w") as f:
            f.write(str(child.pid))
    if "ignore_sigterm" in modes:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    anyio.run(_serve, modes)
    print("fault server stopped: its stdin closed", file=sys.stderr, flush=True)
    if "ignore_sigterm" in modes:
        while True:
            time.sleep(1000)


if __name__ == "__main__":
    main()
