"""The supervisor, driven against in-process servers (fast; no subprocess)."""

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from sagents.core import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent
from sagents.core._spec import ToolSpec
from sagents.errors import ToolDefinitionError, ToolNameConflictError, UpstreamUnavailableError
from sagents.mcp import MCPSupervisor, ServerSettings
from tests.mcp.servers.fault_server import build_server

pytestmark = pytest.mark.anyio

BOUND_S = 30.0  # generous: only a test gone wrong waits this long


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


async def test_in_process_server_tools_are_named_and_callable(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        specs = await sup.add_server("fault", build_server(set()))
        names = [s.name for s in specs]
        assert "fault__echo" in names
        result = await sup.call_tool("fault", "add", {"a": 2, "b": 3})
        assert not result.is_error
        assert result.structured == {"sum": 5}
        status = sup.status("fault")
        assert status.state == "ready"
        assert status.protocol_version == "2026-07-28"


async def test_mcpserver_objects_connect_in_process(log_dir: Path) -> None:
    server = MCPServer("calc")

    @server.tool()
    def double(x: int) -> int:
        """Double x."""
        return 2 * x

    async with MCPSupervisor(log_dir=log_dir) as sup:
        await sup.add_server("calc", server)
        result = await sup.call_tool("calc", "double", {"x": 21})
        assert result.structured == {"result": 42}


async def test_every_content_kind_arrives_without_loss(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        await sup.add_server("fault", build_server(set()))
        result = await sup.call_tool("fault", "content")
    kinds = [type(b) for b in result.content]
    assert kinds == [
        TextContent,
        ImageContent,
        AudioContent,
        ResourceLink,
        EmbeddedResource,
        EmbeddedResource,
    ]
    assert result.structured == {"k": [1, 2]}


async def test_structured_content_without_text_is_kept(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        await sup.add_server("fault", build_server(set()))
        result = await sup.call_tool("fault", "structured_only")
    assert result.content == ()
    assert result.structured == {"only": True}


async def test_is_error_with_empty_content_is_an_error_result(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        await sup.add_server("fault", build_server(set()))
        result = await sup.call_tool("fault", "error_empty")
    assert result.is_error
    assert result.content == ()


async def test_jsonrpc_error_becomes_an_error_result_with_its_code(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        await sup.add_server("fault", build_server(set()))
        result = await sup.call_tool("fault", "jsonrpc_error")
    assert result.error is not None
    assert result.error.code == "upstream_protocol_error"
    assert result.error.details["jsonrpc_code"] == -32099
    assert "custom failure" in result.error.message


async def test_unknown_server_is_an_unknown_tool_result(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        result = await sup.call_tool("nope", "x")
    assert result.error is not None
    assert result.error.code == "unknown_tool"


async def test_progress_notifications_reach_the_callback(log_dir: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with MCPSupervisor(log_dir=log_dir) as sup:
        await sup.add_server("fault", build_server(set()))
        result = await sup.call_tool("fault", "progress", progress_callback=on_progress)
    assert result.text == "done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_a_timeout_is_a_timeout_result_and_cancels_upstream(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        await sup.add_server("fault", build_server(set()))
        result = await sup.call_tool("fault", "hang", timeout=0.2)
        assert result.error is not None
        assert result.error.code == "timeout"
        assert (await sup.call_tool("fault", "was_cancelled")).text == "True"


async def test_cancelling_the_caller_cancels_upstream_and_propagates(log_dir: Path) -> None:
    scope = anyio.CancelScope()
    async with MCPSupervisor(log_dir=log_dir) as sup:
        # the caller is cancelled once the upstream has the call
        await sup.add_server("fault", build_server(set(), on_hang=scope.cancel))
        with anyio.fail_after(30), scope:
            await sup.call_tool("fault", "hang", timeout=30)
        assert scope.cancelled_caught
        assert (await sup.call_tool("fault", "was_cancelled")).text == "True"


async def test_pagination_is_followed_to_the_end(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        specs = await sup.add_server("paged", build_server({"paged"}))
    assert len(specs) == 300
    assert specs[-1].name == "paged__t299"


async def test_a_repeating_cursor_ends_the_walk(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        specs = await sup.add_server("loop", build_server({"paged_loop"}))
    assert 21 <= len(specs) < 300


async def test_an_empty_cursor_ends_the_walk(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        specs = await sup.add_server("empty", build_server({"paged_empty"}))
    assert len(specs) == 21


async def test_bad_schemas_are_withheld_without_costing_other_tools(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        specs = await sup.add_server("fault", build_server({"bad_schemas"}))
        status = sup.status("fault")
    names = {s.name for s in specs}
    assert {"fault__echo", "fault__good_ref"} <= names
    withheld = {w.name: w.reason for w in status.withheld}
    assert set(withheld) == {"bad_ref", "not_a_schema"}
    assert "unresolvable $ref" in withheld["bad_ref"]


async def test_tool_list_changes_reach_the_callback(log_dir: Path) -> None:
    changed = anyio.Event()
    received: list[tuple[str, tuple[ToolSpec, ...]]] = []

    async def on_change(server: str, specs: tuple[ToolSpec, ...]) -> None:
        received.append((server, specs))
        changed.set()

    async with MCPSupervisor(log_dir=log_dir, on_tools_changed=on_change) as sup:
        await sup.add_server("fault", build_server(set()))
        await sup.call_tool("fault", "add_tool")
        with anyio.fail_after(10):
            await changed.wait()
        assert "fault__extra0" in {s.name for s in sup.tools("fault")}
    assert received[0][0] == "fault"


class _HangCounter:
    def __init__(self, target: int) -> None:
        self.count = 0
        self.target = target
        self.reached = anyio.Event()

    def __call__(self) -> None:
        self.count += 1
        if self.count >= self.target:
            self.reached.set()


async def test_concurrency_per_server_is_bounded(log_dir: Path) -> None:
    """Two hangs hold both slots until the test ends them; a third call waits for a slot, its
    timeout counting the wait, and times out without reaching the server. (Holding the two,
    not timing them out too, keeps a loaded machine from freeing a slot before the count.)"""
    settings = ServerSettings(max_concurrency=2)
    hangs = _HangCounter(2)
    async with MCPSupervisor(log_dir=log_dir) as sup:
        await sup.add_server("fault", build_server(set(), on_hang=hangs), settings)
        answered: list[Any] = []

        async def hang() -> None:
            answered.append(await sup.call_tool("fault", "hang", timeout=BOUND_S * 2))

        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(hang)
            with anyio.fail_after(BOUND_S):
                await hangs.reached.wait()
                waited = await sup.call_tool("fault", "hang", timeout=0.5)
            assert hangs.count == 2  # the third never reached the server
            tg.cancel_scope.cancel()
    assert waited.error is not None
    assert waited.error.code == "timeout"
    assert answered == []  # the two held their slots until cancelled


async def test_register_call_and_close_from_three_tasks(log_dir: Path) -> None:
    sup = MCPSupervisor(log_dir=log_dir)
    results: list[str] = []
    async with anyio.create_task_group() as tg:
        registered = anyio.Event()

        async def register() -> None:
            await sup.add_server("fault", build_server(set()))
            registered.set()

        async def call() -> None:
            await registered.wait()
            results.append((await sup.call_tool("fault", "echo", {"text": "x"})).text)

        tg.start_soon(register)
        tg.start_soon(call)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sup.aclose)
    assert results == ["x"]
    assert sup.statuses() == []


async def test_closing_fails_in_flight_calls_instead_of_hanging(log_dir: Path) -> None:
    sup = MCPSupervisor(log_dir=log_dir)
    hangs = _HangCounter(1)
    await sup.add_server("fault", build_server(set(), on_hang=hangs))
    results: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def hang() -> None:
            results.append(await sup.call_tool("fault", "hang", timeout=30))

        tg.start_soon(hang)
        with anyio.fail_after(5):
            await hangs.reached.wait()
        with anyio.fail_after(10):
            await sup.aclose()
    assert results[0].error.code == "upstream_unavailable", results[0]


async def test_bad_server_names_and_duplicates_are_refused(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        with pytest.raises(ToolDefinitionError, match="invalid MCP server name"):
            await sup.add_server("a__b", build_server(set()))
        await sup.add_server("a", build_server(set()))
        with pytest.raises(ToolNameConflictError, match="already registered"):
            await sup.add_server("a", build_server(set()))


async def test_a_server_that_cannot_start_raises_and_is_not_kept(log_dir: Path) -> None:
    from mcp import StdioServerParameters

    async with MCPSupervisor(log_dir=log_dir) as sup:
        with pytest.raises(UpstreamUnavailableError, match="could not be started"):
            await sup.add_server("gone", StdioServerParameters(command="/nonexistent/server"))
        assert sup.server_names == []


async def test_remove_server_forgets_its_tools(log_dir: Path) -> None:
    async with MCPSupervisor(log_dir=log_dir) as sup:
        await sup.add_server("fault", build_server(set()))
        await sup.remove_server("fault")
        assert sup.tools() == []
        result = await sup.call_tool("fault", "echo", {"text": "x"})
    assert result.error is not None
    assert result.error.code == "unknown_tool"
