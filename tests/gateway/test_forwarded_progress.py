"""A forwarded upstream call follows its progress only when the client would see it.

Following a call costs a subscription per call and makes the call "listened to", so that the
upstream is sent a progress token; a client that asked for no progress (no token, no log
messages) gets neither, and an upstream call through the gateway then costs what it costs
without the gateway (docs/gateway.md, "Progress").
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning

from sagents.core._spec import ToolSource, ToolSpec
from sagents.gateway import Gateway
from sagents.gateway._sources import HubProgressSource
from sagents.tool import ToolManager
from tests.gateway.fakes import FakeProvider, FakeToolProgress

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "auto"]
ROOT = Path(__file__).resolve().parents[2]
ECHO = Path(__file__).parent / "fixtures" / "stdio_echo.py"


class CountingSource:
    """A progress source that counts its subscriptions."""

    def __init__(self, provider: FakeProvider) -> None:
        self.inner = provider.progress
        self.subscribed: list[str] = []

    @asynccontextmanager
    async def subscribe(
        self, session_id: str, tool_call_id: str
    ) -> AsyncIterator[MemoryObjectReceiveStream[object]]:
        self.subscribed.append(tool_call_id)
        async with self.inner.subscribe(session_id, tool_call_id) as events:
            yield events


class LocalProgressProvider(FakeProvider):
    """The fake fleet tools, and ``fleet__progress`` as a local tool of the gateway."""

    def list_specs(self) -> list[ToolSpec]:
        specs = super().list_specs()
        return [
            ToolSpec(
                name=spec.name,
                description=spec.description,
                input_schema=spec.input_schema,
                permission=spec.permission,
                source=ToolSource(kind="local"),
            )
            if spec.name == "fleet__progress"
            else spec
            for spec in specs
        ]


def _logs() -> tuple[list[mt.LoggingMessageNotificationParams], Any]:
    logs: list[mt.LoggingMessageNotificationParams] = []

    async def on_log(params: mt.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    return logs, on_log


async def test_a_forwarded_call_without_a_token_is_not_followed_and_sends_nothing() -> None:
    provider = FakeProvider(script_events=[FakeToolProgress(tool_call_id="x", text="line")])
    source = CountingSource(provider)
    logs, on_log = _logs()
    async with (
        Gateway(provider, progress=source) as gateway,
        Client(gateway.server, mode="legacy", logging_callback=on_log) as client,
    ):
        with anyio.fail_after(10):
            result = await client.call_tool("fleet__progress", {})
            await client.list_tools()
    assert result.structured_content == {"ok": True}
    assert source.subscribed == []
    assert logs == []


@pytest.mark.parametrize("era", ERAS)
async def test_a_forwarded_call_with_a_token_is_followed_and_its_progress_forwarded(
    era: str,
) -> None:
    provider = FakeProvider(script_events=[FakeToolProgress(tool_call_id="x", text="line")])
    source = CountingSource(provider)
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with Gateway(provider, progress=source) as gateway, Client(gateway.server, mode=era) as c:
        with anyio.fail_after(10):
            await c.call_tool("fleet__progress", {}, progress_callback=on_progress)
    assert len(source.subscribed) == 1
    assert seen == [(1.0, "line")]


async def test_the_gateways_own_tools_are_followed_without_a_token() -> None:
    provider = LocalProgressProvider(
        script_events=[FakeToolProgress(tool_call_id="x", text="oops", stream="stderr")]
    )
    source = CountingSource(provider)
    logs, on_log = _logs()
    async with (
        Gateway(provider, progress=source) as gateway,
        Client(gateway.server, mode="legacy", logging_callback=on_log) as client,
    ):
        with anyio.fail_after(10):
            await client.call_tool("fleet__progress", {})
            await client.list_tools()
    assert len(source.subscribed) == 1
    assert [(log.level, log.data, log.logger) for log in logs] == [
        ("warning", "oops", "tool_progress")
    ]


# A real upstream MCP server (stdio) behind a ToolManager ---------------------------------------


def _upstream() -> StdioServerParameters:
    """The fixture's ``progress`` tool: reports 1/2, answers whether it got a progress token."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return StdioServerParameters(command=sys.executable, args=[str(ECHO), "sdk"], env=env)


def _text(result: mt.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mt.TextContent)
    return block.text


@pytest.mark.parametrize("with_token", [False, True])
async def test_the_upstream_is_asked_for_progress_only_when_the_client_asked(
    with_token: bool,
) -> None:
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with ToolManager() as manager:
        await manager.register_mcp_server(name="up", params=_upstream())
        async with (
            Gateway(manager, mode="auto", progress=HubProgressSource(manager.progress_hub)) as g,
            Client(g.server, mode="legacy") as client,
        ):
            with anyio.fail_after(30):
                result = await client.call_tool(
                    "up__progress", {}, progress_callback=on_progress if with_token else None
                )
    assert not result.is_error, result
    assert _text(result) == ("token" if with_token else "no token")
    assert seen == (["progress 1/2: half\n"] if with_token else [])


async def test_a_client_that_reads_log_messages_gets_upstream_progress_without_a_token() -> None:
    logs, on_log = _logs()
    async with ToolManager() as manager:
        await manager.register_mcp_server(name="up", params=_upstream())
        async with (
            Gateway(manager, mode="auto", progress=HubProgressSource(manager.progress_hub)) as g,
            Client(g.server, mode="legacy", logging_callback=on_log) as client,
        ):
            with anyio.fail_after(30):
                with pytest.warns(MCPDeprecationWarning):  # deprecated from 2026-07-28
                    await client.session.set_logging_level("info")
                result = await client.call_tool("up__progress", {})
                await client.list_tools()
    assert _text(result) == "token"
    assert [(log.data, log.logger) for log in logs] == [("progress 1/2: half\n", "tool_progress")]


@pytest.mark.parametrize("era", ERAS)
async def test_sagents_serve_asks_its_upstream_for_progress_only_for_a_client_that_asked(
    era: str, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    config = tmp_path / "servers.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "up": {"command": sys.executable, "args": [str(ECHO), "sdk"], "env": env}
                }
            }
        )
    )
    serve = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from sagents.cli.main import main; main()", "serve", "--config", str(config)],
        env={**env, "SAGENTS_DATA_DIR": str(tmp_path / "data")},
    )
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    with anyio.fail_after(60):
        async with Client(serve, mode=era) as client:
            # tools/list waits (a few seconds) for an upstream still on its first start
            assert "up__progress" in {t.name for t in (await client.list_tools()).tools}
            quiet = await client.call_tool("up__progress", {})
            followed = await client.call_tool("up__progress", {}, progress_callback=on_progress)
    assert _text(quiet) == "no token"
    assert _text(followed) == "token"
    assert seen == ["progress 1/2: half\n"]
