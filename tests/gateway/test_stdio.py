"""The gateway over real stdio: a subprocess serving the fake provider, and ``sagents serve``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "serve_fake.py"


def params(*args: str) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return StdioServerParameters(command=sys.executable, args=list(args), env=env, cwd=str(ROOT))


async def allow_once(
    context: ClientRequestContext, params: mt.ElicitRequestParams
) -> mt.ElicitResult:
    return mt.ElicitResult(action="accept", content={"decision": "allow_once"})


async def deny(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    return mt.ElicitResult(action="accept", content={"decision": "deny"})


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_stdio_gateway_lists_calls_and_reports_increasing_progress(era: str) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    with anyio.fail_after(30):
        async with Client(params(str(FIXTURE)), mode=era, elicitation_callback=allow_once) as c:
            names = {tool.name for tool in (await c.list_tools()).tools}
            result = await c.call_tool("fleet__progress", {}, progress_callback=on_progress)
            after = len(seen)
            approved = await c.call_tool("fleet__configure", {"sn": "A"})
    assert "fleet__progress" in names
    assert result.structured_content == {"ok": True}
    assert seen == [(1.0, 3.0), (2.0, None), (3.0, 3.0)]
    assert after == len(seen)
    assert approved.structured_content == {"tool": "fleet__configure", "arguments": {"sn": "A"}}


async def test_stdio_gateway_denies_and_cancels() -> None:
    with anyio.fail_after(30):
        async with Client(params(str(FIXTURE)), mode="legacy", elicitation_callback=deny) as c:
            denied = await c.call_tool("fleet__reboot", {})
            with anyio.move_on_after(0.5) as scope:
                await c.call_tool("fleet__slow", {})
            # The server is still healthy after the cancelled call.
            status = await c.call_tool("fleet__status", {})
    assert denied.is_error
    assert scope.cancelled_caught
    assert status.is_error is False


async def test_sagents_serve_command_speaks_mcp_over_stdio() -> None:
    code = "from sagents.cli.main import main; main()"
    with anyio.fail_after(30):
        async with Client(params("-c", code, "serve", "--mode", "auto"), mode="legacy") as c:
            tools: list[Any] = (await c.list_tools()).tools
            info = c.server_info
    assert tools == []
    assert info is not None
    assert info.name == "sagents"
