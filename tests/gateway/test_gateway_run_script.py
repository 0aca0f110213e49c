"""run_script through ``sagents serve``: offered with upstream tools, runs in the sandbox, asks
the client once for listed write tools, refuses destructive ones, sends script progress."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from sagents.errors import ConfigError
from sagents.gateway._factory import open_gateway
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._settings import GatewaySettings
from tests.gateway.test_configured import text_of, write_config

pytestmark = pytest.mark.anyio

SCRIPT = """
from agent_tools import call, call_many, progress
sums = call_many("fault__add", [{"a": i, "b": 1} for i in range(20)])
progress(20, 20, "added")
print("total", sum(s["sum"] for s in sums))
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ConfiguredGateway]:
    root = tmp_path_factory.mktemp("scripts")
    settings = GatewaySettings(
        config=write_config(root), mode="ask", transport="http", port=0, workspace=root / "ws"
    )
    async with open_gateway(settings) as shared:
        yield shared


async def allow_once(
    context: ClientRequestContext, params: mt.ElicitRequestParams
) -> mt.ElicitResult:
    return mt.ElicitResult(action="accept", content={"decision": "allow_once"})


async def test_run_script_is_offered_and_runs_many_calls_in_one_turn(
    gateway: ConfiguredGateway,
) -> None:
    updates: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append(progress)

    with anyio.fail_after(60):
        async with Client(gateway.server, mode="legacy") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            result = await client.call_tool(
                "run_script",
                {"code": SCRIPT, "tools": [], "description": "sum twenty numbers"},
                progress_callback=on_progress,
            )
    assert "fault__add" in (tools["run_script"].description or "")
    text = text_of(result)
    assert result.is_error is False, text
    assert text.startswith("run_script ok: 20 calls, 0 failed")
    assert "total 210" in text
    assert updates == sorted(updates)
    sessions = Path(gateway.settings.workspace or "") / "sessions"
    assert any((session / ".agent" / "scripts").is_dir() for session in sessions.iterdir())


async def test_a_listed_write_tool_is_approved_once_through_elicitation(
    gateway: ConfiguredGateway,
) -> None:
    code = "from agent_tools import call\nprint(call('fault__echo', {'text': 'hello'}))"
    arguments = {"code": code, "tools": ["fault__echo"], "description": "echo"}
    with anyio.fail_after(60):
        async with Client(gateway.server, mode="legacy", elicitation_callback=allow_once) as c:
            approved = await c.call_tool("run_script", arguments)
        async with Client(gateway.server, mode="legacy") as client:
            refused = await client.call_tool("run_script", arguments)
    assert approved.is_error is False, text_of(approved)
    assert "hello" in text_of(approved)
    assert refused.is_error is True
    assert "run_script" in text_of(refused)
    assert "nobody was asked" in text_of(refused)  # a client without elicitation: not "denied"
    assert "denied" not in text_of(refused)


async def test_a_destructive_tool_named_in_tools_rejects_the_run(
    gateway: ConfiguredGateway,
) -> None:
    arguments = {"code": "print('never')", "tools": ["fault__die"], "description": "x"}
    with anyio.fail_after(60):
        async with Client(gateway.server, mode="legacy") as client:
            result = await client.call_tool("run_script", arguments)
    text = text_of(result)
    assert result.is_error is True
    assert "fault__die" in text
    assert "never" not in text


async def test_the_built_in_tools_the_config_enables_run_in_the_sandbox(tmp_path: Path) -> None:
    enabled = ["file_write", "file_read", "execute_shell_command"]
    config = write_config(tmp_path, builtinTools={"enabled": enabled})
    workspace = tmp_path / "ws"
    settings = GatewaySettings(
        config=config, mode="auto", transport="http", port=0, workspace=workspace
    )
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="legacy") as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                wrote = await client.call_tool("file_write", {"path": "n.txt", "content": "hi\n"})
                read = await client.call_tool("file_read", {"path": "n.txt"})
                shell = await client.call_tool("execute_shell_command", {"command": "cat n.txt"})
    assert set(enabled) <= names
    assert "file_update" not in names
    assert wrote.is_error is False, text_of(wrote)
    (written,) = (workspace / "sessions").glob("*/n.txt")  # the session's own workspace
    assert written.read_text() == "hi\n"
    assert "hi" in text_of(read)
    assert "hi" in text_of(shell)
    assert shell.is_error is False


async def test_an_unknown_built_in_tool_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, builtinTools={"enabled": ["rm_rf"]})
    settings = GatewaySettings(
        config=config, mode="auto", transport="http", port=0, workspace=tmp_path / "ws"
    )
    with pytest.raises(ConfigError, match=r"builtinTools\.enabled"):
        async with open_gateway(settings):
            pass
