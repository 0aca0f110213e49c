"""Fixtures shared by the agent-loop tests."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import pytest
from mcp import StdioServerParameters

from sagents.tool import ToolManager


@pytest.fixture
async def fleet() -> AsyncIterator[ToolManager]:
    """The demo fleet MCP server, a real stdio peer a script's tool calls reach."""
    async with ToolManager() as manager:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "sagents.demo.fleet_server"]
        )
        await manager.register_mcp_server(name="fleet", params=params)
        yield manager
