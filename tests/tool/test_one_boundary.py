"""One exception->result boundary: whoever calls, a failing tool becomes a result in one place.

A tool that raises and a tool that outlives its timeout are called from the library
(``ToolProxy``), from an MCP client (the gateway), from a script (``agent_tools.call``) and
from the agent loop. Each call passes ``ToolManager.run_tool``'s boundary exactly once, and
every caller shows the result that boundary made (docs/architecture.md, "Where errors become
results").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client

from sagents.agent import SAgent
from sagents.core._limits import ScriptLimits
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSource, ToolSpec
from sagents.gateway import Gateway
from sagents.sandbox import LocalSandbox, SandboxParams
from sagents.script._runtime import ScriptRuntime, install_runtime
from sagents.script._session import RunScriptSettings, RunScriptTool
from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, reply
from sagents.tool import SessionContext, ToolManager, ToolProxy
from sagents.tool import tool_manager as tool_manager_module
from sagents.tool._failures import error_result
from sagents.tool._handler import ToolCall
from tests.agent.helpers import collect, done_of, tool_messages

pytestmark = pytest.mark.anyio

TIMEOUT_S = 0.05  # the slow tool's own timeout: it waits on an event nobody sets
EXPECTED = {
    "fleet__boom": ("execution_error", "tool 'fleet__boom' failed: RuntimeError: boom"),
    "fleet__slow": ("timeout", f"tool 'fleet__slow' did not finish within {TIMEOUT_S:g} seconds"),
}


@dataclass
class Boundary:
    """Counts the results ``run_tool``'s boundary makes, by tool."""

    made: list[tuple[str, str, str]] = field(default_factory=list)

    def hits(self, tool: str) -> list[tuple[str, str]]:
        return [(code, message) for name, code, message in self.made if name == tool]


@pytest.fixture
def boundary(monkeypatch: pytest.MonkeyPatch) -> Boundary:
    seen = Boundary()
    original = error_result  # called by run_tool through its module global

    def counted(error: BaseException, tool: str) -> ToolResult:
        result = original(error, tool)
        assert result.error is not None
        seen.made.append((tool, result.error.code, result.error.message))
        return result

    monkeypatch.setattr(tool_manager_module, "error_result", counted)
    return seen


def failing_manager() -> ToolManager:
    async def boom(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        raise RuntimeError("boom")

    async def slow(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    manager = ToolManager()
    for name, handler, timeout in (("boom", boom, None), ("slow", slow, TIMEOUT_S)):
        spec = ToolSpec(
            name=f"fleet__{name}",
            description=f"A {name} tool.",
            input_schema={"type": "object", "properties": {}},
            permission="read_only",
            source=ToolSource(kind="mcp", server="fleet", original_name=name),
            timeout=timeout,
        )
        manager.register_tool((spec, handler))
    return manager


def assert_one_hit_each(boundary: Boundary) -> None:
    for tool, expected in EXPECTED.items():
        assert boundary.hits(tool) == [expected]


async def test_a_library_call_through_a_tool_proxy_passes_the_boundary_once(
    boundary: Boundary,
) -> None:
    proxy = ToolProxy(failing_manager())
    context = SessionContext(session_id="library", permission_mode="ask")
    with anyio.fail_after(10):
        results = {name: await proxy.run_tool(name, {}, context) for name in EXPECTED}
    assert_one_hit_each(boundary)
    for name, expected in EXPECTED.items():
        error = results[name].error
        assert error is not None
        assert (error.code, error.message) == expected


async def test_a_gateway_call_passes_the_boundary_once(boundary: Boundary) -> None:
    async with (
        Gateway(ToolProxy(failing_manager()), mode="auto") as gateway,
        Client(gateway.server) as client,
    ):
        with anyio.fail_after(10):
            results = {name: await client.call_tool(name, {}) for name in EXPECTED}
    assert_one_hit_each(boundary)
    for name, (code, message) in EXPECTED.items():
        assert results[name].is_error
        block = results[name].content[0]
        assert isinstance(block, mt.TextContent)
        assert message in block.text
        assert code in block.text


async def test_a_script_call_passes_the_boundary_once(boundary: Boundary, tmp_path: Path) -> None:
    runtime: ScriptRuntime = install_runtime(tmp_path / "data")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    code = (
        "from agent_tools import call, ToolError\n"
        "import json\n"
        "for name in ('fleet__boom', 'fleet__slow'):\n"
        "    try:\n"
        "        call(name, {})\n"
        "    except ToolError as exc:\n"
        "        print(json.dumps([name, exc.code, exc.message]))\n"
    )
    async with RunScriptTool(
        tools=ToolProxy(failing_manager(), enforce_mode=False),
        session=SessionContext(session_id="script", permission_mode="auto"),
        sandbox=LocalSandbox(SandboxParams(workspace=str(workspace))),
        runtime=runtime,
        settings=RunScriptSettings(limits=ScriptLimits(timeout_s=60.0)),
    ) as run_script:
        with anyio.fail_after(60):
            result = await run_script.run(code, [], "two failing calls")
    assert not result.is_error, result.text
    printed = [json.loads(line) for line in result.text.splitlines()[1:]]
    assert printed == [[name, code, message] for name, (code, message) in EXPECTED.items()]
    assert_one_hit_each(boundary)


async def test_an_agent_loop_call_passes_the_boundary_once(boundary: Boundary) -> None:
    calls = tuple(ScriptedToolCall(name=name, id=f"c_{name}") for name in EXPECTED)
    async with ScriptedModel([ScriptedReply(tool_calls=calls), reply("done")]) as model:
        agent = SAgent(model=model.chat_model(), max_parallel_tools=1)
        events = await collect(
            agent, [{"role": "user", "content": "go"}], tool_manager=ToolProxy(failing_manager())
        )
    done = done_of(events)
    assert done.reason == "stop"
    assert_one_hit_each(boundary)
    for message, (code, text) in zip(tool_messages(done.messages), EXPECTED.values(), strict=True):
        assert text in message["content"]
        assert code in message["content"]


async def test_an_mcp_tool_failure_and_timeout_pass_the_boundary_once(
    boundary: Boundary, tmp_path: Path
) -> None:
    # The upstream layers raise typed errors and apply no timer of their own: run_tool decides.
    from sagents.mcp import ServerSettings
    from tests.mcp.servers.fault_server import build_server

    settings = ServerSettings(call_timeout=TIMEOUT_S, log_dir=tmp_path / "logs")
    async with ToolManager() as manager:
        await manager.register_mcp_server("fault", build_server(set()), settings)
        with anyio.fail_after(10):
            failed = await manager.run_tool("fault__jsonrpc_error", {})
            timed_out = await manager.run_tool("fault__hang", {})
    assert failed.error is not None
    assert timed_out.error is not None
    assert boundary.hits("fault__jsonrpc_error") == [(failed.error.code, failed.error.message)]
    assert failed.error.code == "upstream_protocol_error"
    assert boundary.hits("fault__hang") == [
        ("timeout", f"tool 'fault__hang' did not finish within {TIMEOUT_S:g} seconds")
    ]


async def test_a_gateway_run_script_whose_host_fails_is_a_result_of_the_boundary(
    boundary: Boundary,
) -> None:
    # The host's run_script runs inside run_tool too: a sandbox that cannot start for the
    # session is the call's result, not a protocol error.
    from sagents.errors import SandboxUnavailableError
    from sagents.script._description import RUN_SCRIPT_INPUT_SCHEMA
    from tests.gateway.fakes import FakeProvider

    class BrokenHost:
        def spec(self, specs: list[ToolSpec], mode: Any) -> ToolSpec:
            return ToolSpec(
                name="run_script", input_schema=RUN_SCRIPT_INPUT_SCHEMA, permission="read_only"
            )

        async def run(self, arguments: dict[str, Any], context: Any, **kwargs: Any) -> ToolResult:
            raise SandboxUnavailableError("bubblewrap is not installed")

    arguments = {"code": "print(1)", "tools": [], "description": "one line"}
    async with (
        Gateway(FakeProvider(), mode="auto", scripts=BrokenHost()) as gateway,
        Client(gateway.server) as client,
    ):
        with anyio.fail_after(10):
            result = await client.call_tool("run_script", arguments)
            invalid = await client.call_tool("run_script", {"code": 1})
    assert result.is_error
    assert invalid.is_error
    [(code, message), (bad, _)] = boundary.hits("run_script")
    assert code == "sandbox_unavailable"
    assert "bubblewrap is not installed" in message
    assert bad == "invalid_arguments"
