"""One place decides a call's timeout: the per-call value, else the server's, else the default."""

from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.mcp import ServerSettings
from sagents.tool import DEFAULT_TOOL_TIMEOUT, ToolManager
from sagents.tool._handler import ToolCall
from tests.mcp.servers.fault_server import build_server

pytestmark = pytest.mark.anyio


async def test_a_servers_call_timeout_ends_a_call_without_a_per_call_timeout(
    tmp_path: Path,
) -> None:
    settings = ServerSettings(call_timeout=0.2, log_dir=tmp_path)
    async with ToolManager() as tm:
        await tm.register_mcp_server("f", build_server(set()), settings)
        with anyio.fail_after(20):  # the 300 s default would trip this
            result = await tm.run_tool("f__hang", {})
    assert result.error is not None
    assert result.error.code == "timeout"


async def test_a_per_call_timeout_wins_over_the_servers_call_timeout(tmp_path: Path) -> None:
    settings = ServerSettings(call_timeout=1000.0, log_dir=tmp_path)
    async with ToolManager() as tm:
        await tm.register_mcp_server("f", build_server(set()), settings)
        with anyio.fail_after(20):
            result = await tm.run_tool("f__hang", {}, timeout=0.2)
    assert result.error is not None
    assert result.error.code == "timeout"


async def test_a_call_timeout_above_the_default_reaches_the_handler(tmp_path: Path) -> None:
    settings = ServerSettings(call_timeout=DEFAULT_TOOL_TIMEOUT * 4, log_dir=tmp_path)
    async with ToolManager() as tm:
        await tm.register_mcp_server("f", build_server(set()), settings)
        assert tm.get_tool_spec("f__echo").timeout == DEFAULT_TOOL_TIMEOUT * 4
    seen: list[float | None] = []

    async def handler(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        seen.append(call.timeout)
        return ToolResult.from_text("ok")

    async with ToolManager() as tm:
        tm.register_tool((ToolSpec(name="slow", timeout=DEFAULT_TOOL_TIMEOUT * 4), handler))
        tm.register_tool((ToolSpec(name="plain"), handler))
        await tm.run_tool("slow", {})
        await tm.run_tool("plain", {})
        await tm.run_tool("slow", {}, timeout=5.0)
    assert seen == [DEFAULT_TOOL_TIMEOUT * 4, DEFAULT_TOOL_TIMEOUT, 5.0]


async def test_a_server_without_a_call_timeout_has_no_limit(tmp_path: Path) -> None:
    settings = ServerSettings(call_timeout=None, log_dir=tmp_path)
    async with ToolManager() as tm:
        await tm.register_mcp_server("f", build_server(set()), settings)
        assert tm.get_tool_spec("f__echo").timeout == float("inf")
        result = await tm.run_tool("f__echo", {"text": "hi"})
    assert not result.is_error
