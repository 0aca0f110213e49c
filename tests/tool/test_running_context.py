"""Code running inside a tool call finds the call's context without being handed it
(``sagents.tool._context.running_context``): what the no-argument public readers
(``current_agent_session()``, ``sagents.gateway.current_client_asker()``) are built on."""

from __future__ import annotations

import anyio
import pytest

from sagents.progress import ProgressHub
from sagents.tool import SessionContext, ToolManager
from sagents.tool._context import running_context
from sagents.tool.tool_base import tool

pytestmark = pytest.mark.anyio


@tool(permission="read_only")
async def whose_call() -> str:
    """The session id of the call this runs in, as found without being handed it."""
    found = running_context()
    return "none" if found is None else found.session_id


@tool(permission="read_only")
def whose_call_in_a_thread() -> str:
    """The same, from a sync tool's worker thread."""
    found = running_context()
    return "none" if found is None else found.session_id


@pytest.mark.parametrize("name", ["whose_call", "whose_call_in_a_thread"])
async def test_a_tool_finds_the_context_of_the_call_it_runs_in(name: str) -> None:
    async with ToolManager() as manager:
        manager.register_tool(whose_call)
        manager.register_tool(whose_call_in_a_thread)
        result = await manager.run_tool(name, {}, SessionContext(session_id="s-1"))
        unbound = await manager.run_tool(name, {})  # no session: nothing to find
    assert result.text == "s-1"
    assert unbound.text == "none"
    assert running_context() is None  # outside any call


async def test_a_call_someone_listens_to_carries_its_context_too() -> None:
    hub = ProgressHub()
    async with ToolManager(progress_hub=hub) as manager:
        manager.register_tool(whose_call)
        async with hub.subscribe("s-2"):  # coalesced progress: the other binding
            assert hub.listening("s-2")
            result = await manager.run_tool("whose_call", {}, SessionContext(session_id="s-2"))
    assert result.text == "s-2"


async def test_a_call_of_no_session_made_inside_a_call_runs_as_part_of_it() -> None:
    async with ToolManager() as manager:

        @tool(permission="read_only")
        async def outer() -> str:
            """Calls whose_call without handing it a context."""
            return (await manager.run_tool("whose_call", {})).text

        @tool(permission="read_only")
        async def outer_with_its_own() -> str:
            """Calls whose_call in a session of its own."""
            inner = SessionContext(session_id="inner")
            return (await manager.run_tool("whose_call", {}, inner)).text

        manager.register_tool(whose_call)
        manager.register_tool(outer)
        manager.register_tool(outer_with_its_own)
        with anyio.fail_after(30):
            nested = await manager.run_tool("outer", {}, SessionContext(session_id="s-3"))
            own = await manager.run_tool("outer_with_its_own", {}, SessionContext(session_id="s-3"))
    assert nested.text == "s-3"
    assert own.text == "inner"
