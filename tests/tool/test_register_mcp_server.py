"""ToolManager.register_mcp_server: MCP tools in the registry, on the same call path."""

from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from sagents.core.events import ToolProgressEvent
from sagents.errors import ToolDefinitionError, ToolNameConflictError, UnknownToolError
from sagents.mcp import ServerSettings
from sagents.progress import ProgressHub
from sagents.tool import SessionContext, ToolManager
from tests.mcp.helpers import fault_server
from tests.mcp.servers.fault_server import build_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path) -> ServerSettings:
    return ServerSettings(log_dir=tmp_path / "logs")


async def test_seed_usage_registers_calls_and_closes_without_a_context_manager(
    settings: ServerSettings,
) -> None:
    manager = ToolManager()
    names = await manager.register_mcp_server("fault", build_server(set()), settings)
    assert "fault__add" in names
    assert set(names) <= set(manager.list_all_tools_name())
    spec = manager.get_tool_spec("fault__add")
    assert spec.source.kind == "mcp"
    assert spec.source.server == "fault"
    exported = {t["function"]["name"] for t in manager.get_openai_tools()}
    assert "fault__add" in exported
    result = await manager.run_tool("fault__add", {"a": "2", "b": 3})  # "2" coerced
    assert result.structured == {"sum": 5}
    assert manager.mcp_server_status("fault").state == "ready"
    await manager.aclose()
    after = await manager.run_tool("fault__add", {"a": 1, "b": 1})
    assert after.is_error


async def test_arguments_are_validated_before_the_upstream_call(settings: ServerSettings) -> None:
    async with ToolManager() as manager:
        await manager.register_mcp_server("fault", build_server(set()), settings)
        result = await manager.run_tool("fault__add", {"a": "two"})
    assert result.error is not None
    assert result.error.code == "invalid_arguments"


async def test_unregister_closes_the_server_and_removes_its_tools(
    settings: ServerSettings,
) -> None:
    async with ToolManager() as manager:
        names = await manager.register_mcp_server("fault", build_server(set()), settings)
        removed = await manager.unregister_mcp_server("fault")
        assert sorted(removed) == sorted(names)
        assert not [n for n in manager.list_all_tools_name() if n.startswith("fault__")]
        with pytest.raises(UnknownToolError):
            await manager.unregister_mcp_server("fault")


async def test_a_name_taken_by_a_local_tool_keeps_nothing_of_the_server(
    settings: ServerSettings,
) -> None:
    async with ToolManager() as manager:

        def fault__add(a: int, b: int) -> int:
            return a - b

        manager.register_tool(fault__add)
        with pytest.raises(ToolNameConflictError):
            await manager.register_mcp_server("fault", build_server(set()), settings)
        assert manager.list_all_tools_name() == ["fault__add"]
        assert manager.mcp_server_statuses() == []
        assert (await manager.run_tool("fault__add", {"a": 5, "b": 3})).structured == {"result": 2}


async def test_upstream_progress_becomes_tool_progress_of_the_call(
    settings: ServerSettings,
) -> None:
    hub = ProgressHub()
    async with ToolManager(progress_hub=hub) as manager:
        await manager.register_mcp_server("fault", build_server(set()), settings)
        async with hub.subscribe("s") as events:
            result = await manager.run_tool(
                "fault__progress", {}, SessionContext(session_id="s"), tool_call_id="c1"
            )
            assert result.text == "done"
            text = ""
            with anyio.fail_after(5):
                while True:
                    event = await events.receive()
                    assert isinstance(event, ToolProgressEvent)
                    text += event.text
                    if event.closed:
                        break
    assert "progress 1/3: step 1" in text
    assert "progress 3/3: step 3" in text


async def test_a_progress_token_goes_upstream_only_when_someone_listens(
    settings: ServerSettings,
) -> None:
    hub = ProgressHub()
    context = SessionContext(session_id="s")
    async with ToolManager(progress_hub=hub) as manager:
        await manager.register_mcp_server("fault", fault_server(), settings)  # on the wire
        quiet = await manager.run_tool("fault__progress_token", {}, context, tool_call_id="c1")
        async with hub.subscribe("s"):
            listened = await manager.run_tool(
                "fault__progress_token", {}, context, tool_call_id="c2"
            )
    assert (quiet.text, listened.text) == ("False", "True")


async def test_a_tool_list_change_refreshes_the_registry(settings: ServerSettings) -> None:
    changed = anyio.Event()
    seen: list[tuple[str, list[str]]] = []

    async def on_change(server: str, names: list[str]) -> None:
        seen.append((server, names))
        changed.set()

    async with ToolManager() as manager:
        manager.on_mcp_tools_changed(on_change)
        await manager.register_mcp_server("fault", build_server(set()), settings)
        assert not manager.has_tool("fault__extra0")
        await manager.run_tool("fault__add_tool", {})
        with anyio.fail_after(10):
            await changed.wait()
        assert manager.has_tool("fault__extra0")
        assert manager.get_tool_spec("fault__extra0").source.server == "fault"
        assert manager.has_tool("fault__add")
    assert seen[0][0] == "fault"
    assert "fault__extra0" in seen[0][1]


async def test_register_call_and_close_from_three_tasks(settings: ServerSettings) -> None:
    manager = ToolManager()
    registered = anyio.Event()
    called = anyio.Event()
    results: list[bool] = []

    async def register() -> None:
        await manager.register_mcp_server("fault", build_server(set()), settings)
        registered.set()

    async def call() -> None:
        await registered.wait()
        results.append((await manager.run_tool("fault__add", {"a": 1, "b": 2})).is_error)
        called.set()

    async def close() -> None:
        await called.wait()
        await manager.aclose()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(register)
            tg.start_soon(call)
            tg.start_soon(close)
    assert results == [False]
    assert manager.closed


async def test_an_in_process_mcpserver_object_is_a_builtin_server(
    settings: ServerSettings,
) -> None:
    server = MCPServer("calc")

    @server.tool()
    def double(x: int) -> int:
        """Double x."""
        return 2 * x

    async with ToolManager() as manager:
        assert await manager.register_mcp_server("calc", server, settings) == ["calc__double"]
        assert (await manager.run_tool("calc__double", {"x": 21})).structured == {"result": 42}


async def test_register_mcp_servers_skips_a_taken_tool_name_and_keeps_the_rest(
    settings: ServerSettings, caplog: pytest.LogCaptureFixture
) -> None:
    async with ToolManager() as manager:

        def fault__add(a: int, b: int) -> int:
            return a - b

        manager.register_tool(fault__add)
        statuses = await manager.register_mcp_servers({"fault": (build_server(set()), settings)})
        assert statuses["fault"].state == "ready"
        assert "fault__echo" in manager.list_all_tools_name()
        assert (await manager.run_tool("fault__add", {"a": 5, "b": 3})).structured == {"result": 2}
        assert "'fault__add' is not registered" in caplog.text


async def test_register_mcp_servers_refuses_an_ambiguous_name_before_starting_any(
    settings: ServerSettings,
) -> None:
    async with ToolManager() as manager:
        with pytest.raises(ToolDefinitionError):
            await manager.register_mcp_servers(
                {
                    "good": (build_server(set()), settings),
                    "bad__name": (build_server(set()), settings),
                }
            )
        assert manager.mcp_server_statuses() == []


async def test_without_waiting_the_tools_arrive_when_the_server_is_ready(
    settings: ServerSettings,
) -> None:
    arrived = anyio.Event()

    async def on_change(server: str, names: list[str]) -> None:
        if "fault__add" in names:
            arrived.set()

    async with ToolManager() as manager:
        manager.on_mcp_tools_changed(on_change)
        assert (
            await manager.register_mcp_server("fault", build_server(set()), settings, wait=False)
            == []
        )
        with anyio.fail_after(10):
            await arrived.wait()
        assert (await manager.run_tool("fault__add", {"a": 1, "b": 2})).structured == {"sum": 3}
