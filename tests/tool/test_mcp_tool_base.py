"""MCP servers declared in a module (``sagents.tool.mcp_tool_base``) are collected by a manager
when told to, like ``@tool`` functions, and by no manager otherwise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from sagents.mcp import ServerSettings
from sagents.tool import ToolManager, mcp_tool_base
from sagents.tool.mcp_tool_base import discovered_mcp_servers, mcp_server

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _fresh_declarations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_tool_base, "_DISCOVERED_MCP_TOOLS", [])


def _calc(name: str = "calc") -> MCPServer:
    server = MCPServer(name)

    @server.tool()
    def double(x: int) -> int:
        """Double x."""
        return 2 * x

    return server


async def test_a_declared_server_is_collected_once_by_the_manager_told_to(tmp_path: Path) -> None:
    settings = ServerSettings(log_dir=tmp_path / "logs")
    declared = mcp_server("calc", _calc(), settings, module=__name__)
    assert discovered_mcp_servers() == [declared]
    async with ToolManager() as manager, ToolManager() as other:
        assert manager.list_all_tools_name() == []  # declaring connects nothing
        statuses = await manager.collect_discovered_mcp_servers()
        again = await manager.collect_discovered_mcp_servers()
        result = await manager.run_tool("calc__double", {"x": 21})
        assert other.list_all_tools_name() == []  # another manager holds only what it is given
    assert statuses["calc"].state == "ready"
    assert again == {}
    assert result.structured == {"result": 42}


async def test_a_name_declared_twice_keeps_the_first_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = ServerSettings(log_dir=tmp_path / "logs")
    mcp_server("calc", _calc(), settings, module="first")
    mcp_server("calc", _calc("other"), settings, module="second")
    async with ToolManager() as manager:
        statuses = await manager.collect_discovered_mcp_servers()
    assert list(statuses) == ["calc"]
    assert "declared again (in second)" in caplog.text


def test_an_ambiguous_server_name_is_refused_when_declared() -> None:
    with pytest.raises(ValueError, match="__"):
        mcp_server("a__b", _calc())


def test_importing_the_module_does_not_import_the_mcp_sdk() -> None:
    code = "import sys, sagents.tool.mcp_tool_base\nprint('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
