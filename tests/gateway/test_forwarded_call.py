"""A call forwarded by ``sagents serve`` (stdio) to an upstream server keeps what the client
would get from the upstream directly (docs/gateway.md, "Progress", "stdio"):

``structuredContent`` and ``_meta`` unchanged, every content block kind, the upstream's errors
answered as before, cancellation reaching the upstream, progress forwarded when the client sends
a token, and a W3C trace context sent by the client reaching the upstream. One real
``sagents serve`` process serves the module, over stdio, with the fault server
(``tests/mcp/servers/fault_server.py``) and ``fixtures/stdio_echo.py`` as its upstreams; the
direct results come from the same servers without the gateway.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
FAULT = ROOT / "tests" / "mcp" / "servers" / "fault_server.py"
ECHO = Path(__file__).parent / "fixtures" / "stdio_echo.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def _fault() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(FAULT)], env=ENV)


def _echo() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(ECHO), "sdk"], env=ENV)


@pytest.fixture(scope="module")
async def serve(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    """A client of one ``sagents serve --mode auto`` process (2026-07-28 era, as the SDK's
    client picks by default)."""
    tmp = tmp_path_factory.mktemp("forwarded")
    config = tmp / "servers.json"
    upstream = {"env": {"PYTHONPATH": str(ROOT)}, "permission": "read_only"}
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "fault": {"command": sys.executable, "args": [str(FAULT)], **upstream},
                    "echo": {"command": sys.executable, "args": [str(ECHO), "sdk"], **upstream},
                }
            }
        )
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-c",
            "from sagents.cli.main import main; main()",
            *("serve", "--config", str(config), "--mode", "auto"),
        ],
        env={**ENV, "SAGENTS_DATA_DIR": str(tmp / "data")},
    )
    async with Client(params) as client:
        with anyio.fail_after(60):  # tools/list waits for the upstreams' first start
            names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"fault__content", "echo__meta"} <= names
        yield client


def _wire(result: mt.CallToolResult) -> dict[str, Any]:
    """The result as on the wire, without the stamp of the server that answered."""
    wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    meta = wire.pop("_meta", {})
    meta.pop(mt.SERVER_INFO_META_KEY, None)
    return {**wire, "_meta": meta} if meta else wire


def _answered_by(result: mt.CallToolResult) -> str:
    return str((result.meta or {})[mt.SERVER_INFO_META_KEY]["name"])


@pytest.mark.parametrize("tool", ["content", "structured_only", "add"])
async def test_a_forwarded_result_is_the_upstreams_own(serve: Client, tool: str) -> None:
    arguments = {"a": 2, "b": 3} if tool == "add" else {}
    with anyio.fail_after(30):
        async with Client(_fault()) as direct:
            expected = await direct.call_tool(tool, arguments)
        forwarded = await serve.call_tool(f"fault__{tool}", arguments)
    assert _wire(forwarded) == _wire(expected)
    assert (_answered_by(expected), _answered_by(forwarded)) == ("fault", "sagents")


async def test_structured_content_and_meta_pass_through_unchanged(serve: Client) -> None:
    with anyio.fail_after(30):
        async with Client(_echo()) as direct:
            expected = await direct.call_tool("meta", {})
        forwarded = await serve.call_tool("echo__meta", {})
    assert forwarded.structured_content == {"trace": {}, "nested": {"list": [1, "two", None]}}
    assert _wire(forwarded)["_meta"] == {"example.com/kept": {"a": [1, 2], "b": None}}
    assert _wire(forwarded) == _wire(expected)
    # the 2026-07-28 serverInfo stamp names the server that answered: the gateway
    assert (_answered_by(expected), _answered_by(forwarded)) == ("stdio-echo", "sagents")


async def test_a_trace_context_sent_by_the_client_reaches_the_upstream(serve: Client) -> None:
    with anyio.fail_after(30):
        meta = mt.RequestParamsMeta(traceparent=TRACEPARENT)  # type: ignore[typeddict-unknown-key]  # an extra item
        result = await serve.call_tool("echo__meta", {}, meta=meta)
    assert result.structured_content is not None
    assert result.structured_content["trace"] == {"traceparent": TRACEPARENT}


async def test_an_upstream_error_reaches_the_client_as_before(serve: Client) -> None:
    with anyio.fail_after(30):
        empty = await serve.call_tool("fault__error_empty", {})
        failed = await serve.call_tool("fault__jsonrpc_error", {})
        invalid = await serve.call_tool("fault__add", {"a": "two"})
    # an isError result without content gets one text block (clients crash on an empty one)
    assert empty.is_error is True
    assert [block.type for block in empty.content] == ["text"]
    # the upstream's JSON-RPC error: an error result naming it, with the layer's error code
    assert failed.is_error is True
    assert failed.meta is not None
    assert failed.meta["sagents/error"]["code"] == "upstream_protocol_error"
    assert "custom failure" in failed.meta["sagents/error"]["message"]
    assert invalid.is_error is True
    assert invalid.meta is not None
    assert invalid.meta["sagents/error"]["code"] == "invalid_arguments"


async def test_cancelling_a_forwarded_call_cancels_the_upstream_call(serve: Client) -> None:
    scope = anyio.CancelScope()

    async def cancel_once_hanging(
        progress: float, total: float | None, message: str | None
    ) -> None:
        scope.cancel()  # the upstream has the call: it reported progress from inside it

    with anyio.fail_after(30):
        with scope:
            await serve.call_tool("fault__hang", {}, progress_callback=cancel_once_hanging)
        reached = await serve.call_tool("fault__was_cancelled", {})
    assert scope.cancelled_caught
    assert [block.text for block in reached.content if isinstance(block, mt.TextContent)] == [
        "True"
    ]


async def test_progress_is_forwarded_when_the_client_sends_a_token(serve: Client) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with anyio.fail_after(30):
        quiet = await serve.call_tool("fault__progress_token", {})
        result = await serve.call_tool("fault__progress", {}, progress_callback=on_progress)
    assert [block.type for block in quiet.content] == ["text"]
    assert quiet.content[0].text == "False"  # type: ignore[union-attr]  # a text block
    assert [block.text for block in result.content if isinstance(block, mt.TextContent)] == ["done"]
    messages = "".join(message or "" for _, _, message in seen)
    assert "step 1" in messages
    assert "step 3" in messages
    assert [progress for progress, _, _ in seen] == sorted({p for p, _, _ in seen})
