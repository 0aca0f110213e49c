"""``sagents serve --config``: real upstream MCP servers, skills and progress behind the gateway.

The upstream is ``tests/mcp/servers/fault_server.py`` (a stdio MCP server on the SDK), started by
the gateway's tool core; clients are the ``mcp`` SDK's, in-process, over stdio (``sagents serve``
as a subprocess) and over streamable HTTP.
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
import httpx2
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from sagents.config.tools import build_tool_manager
from sagents.core._permissions import PermissionMode
from sagents.errors import ConfigError
from sagents.gateway import _runtime as runtime_module
from sagents.gateway import build_gateway, serve_http
from sagents.gateway._factory import open_gateway
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._settings import GatewaySettings, load_profiles
from sagents.tool import ToolManager, ToolProxy

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
FAULT_SERVER = ROOT / "tests" / "mcp" / "servers" / "fault_server.py"
SKILLS = Path(__file__).parent / "fixtures" / "skills"
PERMISSIONS = {
    "echo": "write",
    "progress": "read_only",
    "hang": "read_only",
    "was_cancelled": "read_only",
    "add_tool": "write",
}


def write_config(tmp_path: Path, **extra: Any) -> Path:
    upstream = {
        "command": sys.executable,
        "args": [str(FAULT_SERVER)],
        "env": {"PYTHONPATH": str(ROOT)},
        "toolPermissions": PERMISSIONS,
    }
    document: dict[str, Any] = {
        "mcpServers": {"fault": upstream, "spare": {**upstream, "toolPermissions": {}}},
        "skills": {"directories": [str(SKILLS)]},
        "profiles": {
            "ops": {"servers": ["spare"], "skills": ["triage"]},
            "viewer": {"mode": "read-only"},
        },
        **extra,
    }
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def settings_for(
    config: Path, *, mode: PermissionMode = "ask", profile: str | None = None
) -> GatewaySettings:
    chosen = load_profiles(config)[profile] if profile else None
    if chosen is not None and chosen.mode is not None:
        mode = chosen.mode
    return GatewaySettings(config=config, mode=mode, profile=chosen, transport="http", port=0)


async def allow_once(
    context: ClientRequestContext, params: mt.ElicitRequestParams
) -> mt.ElicitResult:
    return mt.ElicitResult(action="accept", content={"decision": "allow_once"})


async def deny(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    return mt.ElicitResult(action="accept", content={"decision": "deny"})


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ConfiguredGateway]:
    """One gateway in ``ask`` mode for the module (starting upstream servers takes seconds)."""
    config = write_config(tmp_path_factory.mktemp("shared"))
    async with open_gateway(settings_for(config)) as shared:
        yield shared


def text_of(result: mt.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, mt.TextContent))


async def test_upstream_tools_are_listed_with_prefix_and_annotations_and_called(
    gateway: ConfiguredGateway,
) -> None:
    with anyio.fail_after(30):
        async with Client(gateway.server, mode="legacy") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            added = await client.call_tool("fault__add", {"a": 2, "b": 3})
            bad = await client.call_tool("fault__add", {"a": "two"})
    assert {"fault__add", "fault__echo", "spare__add", "load_skill", "read_skill_file"} <= set(
        tools
    )
    annotations = tools["fault__add"].annotations
    assert annotations is not None
    assert annotations.read_only_hint is True
    assert added.structured_content == {"sum": 5}
    assert bad.is_error is True


async def test_upstream_progress_reaches_the_client_as_progress_notifications(
    gateway: ConfiguredGateway,
) -> None:
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    with anyio.fail_after(30):
        async with Client(gateway.server, mode="legacy") as client:
            result = await client.call_tool("fault__progress", {}, progress_callback=on_progress)
    assert text_of(result) == "done"
    joined = "".join(messages)
    assert "progress 1/3: step 1" in joined
    assert "progress 3/3: step 3" in joined


async def test_a_write_tool_is_approved_or_denied_through_elicitation(
    gateway: ConfiguredGateway,
) -> None:
    with anyio.fail_after(30):
        async with Client(gateway.server, mode="legacy", elicitation_callback=allow_once) as c:
            approved = await c.call_tool("fault__echo", {"text": "hi"})
        async with Client(gateway.server, mode="legacy", elicitation_callback=deny) as c:
            denied = await c.call_tool("fault__echo", {"text": "hi"})
        async with Client(gateway.server, mode="legacy") as c:
            refused = await c.call_tool("fault__echo", {"text": "hi"})
    assert approved.is_error is False
    assert text_of(approved) == "hi"
    assert denied.is_error is True
    assert "not approved" in text_of(denied)
    assert refused.is_error is True


async def test_cancelling_a_call_cancels_the_upstream_call(gateway: ConfiguredGateway) -> None:
    scope = anyio.CancelScope()

    async def cancel_once_hanging(
        progress: float, total: float | None, message: str | None
    ) -> None:
        scope.cancel()  # the upstream has the call: it reported progress from inside it

    with anyio.fail_after(30):
        async with Client(gateway.server, mode="legacy") as client:
            with scope:
                await client.call_tool("fault__hang", {}, progress_callback=cancel_once_hanging)
            reached = await client.call_tool("fault__was_cancelled", {})
    assert scope.cancelled_caught
    assert text_of(reached) == "True"


async def test_read_only_mode_hides_write_tools_and_a_broken_upstream_stops_nothing(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path)
    document = json.loads(config.read_text())
    document["mcpServers"]["broken"] = {"command": str(tmp_path / "missing"), "connectTimeout": 2}
    config.write_text(json.dumps(document))
    async with open_gateway(settings_for(config, profile="viewer")) as gateway:
        with anyio.fail_after(30):
            async with Client(gateway.server, mode="legacy") as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                hidden = await client.call_tool("fault__echo", {"text": "x"})
    assert {"fault__add", "fault__progress", "load_skill"} <= names
    assert "fault__echo" not in names
    assert "fault__add_tool" not in names
    assert not any(name.startswith("broken__") for name in names)
    assert hidden.is_error is True


async def test_a_profile_selects_servers_and_skills(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    async with open_gateway(settings_for(config, mode="auto", profile="ops")) as gateway:
        with anyio.fail_after(30):
            async with Client(gateway.server, mode="legacy") as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                uris = {str(r.uri) for r in (await client.list_resources()).resources}
                loaded = await client.call_tool("load_skill", {"name": "triage"})
                other = await client.call_tool("load_skill", {"name": "other"})
    assert "spare__add" in names
    assert not any(name.startswith("fault__") for name in names)
    assert "skill://triage/SKILL.md" in uris
    assert not any(uri.startswith("skill://other/") for uri in uris)
    assert "Triage" in text_of(loaded)
    assert other.is_error is True


async def test_skill_files_are_resources_that_can_be_read(gateway: ConfiguredGateway) -> None:
    with anyio.fail_after(30):
        async with Client(gateway.server, mode="legacy") as client:
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
            read = await client.read_resource("skill://triage/references/checklist.md")
            with pytest.raises(Exception, match="no skill"):
                await client.read_resource("skill://missing/SKILL.md")
            with pytest.raises(Exception, match="not a path inside"):
                await client.read_resource("skill://triage/../other/SKILL.md")
    assert listed[:3] == [
        "skill://other/SKILL.md",
        "skill://other/references/notes.md",
        "skill://triage/SKILL.md",
    ]
    content = read.contents[0]
    assert isinstance(content, mt.TextResourceContents)
    assert "- network" in content.text


async def test_an_upstream_tool_list_change_is_passed_on_to_the_client(
    gateway: ConfiguredGateway,
) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            changed.set()

    with anyio.fail_after(30):
        async with Client(
            gateway.server,
            mode="legacy",
            message_handler=on_message,
            elicitation_callback=allow_once,
        ) as c:
            before = {tool.name for tool in (await c.list_tools()).tools}
            added = await c.call_tool("fault__add_tool", {})
            await changed.wait()
            after = {tool.name for tool in (await c.list_tools()).tools}
    assert added.is_error is False
    assert "fault__extra0" not in before
    assert "fault__extra0" in after


async def test_a_missing_skill_directory_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, skills={"directories": ["no-such-dir"]})
    with pytest.raises(ConfigError, match=r"skills\.directories\.0"):
        build_gateway(settings_for(config))


async def test_an_unknown_key_in_the_skills_section_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, skills={"dirs": [str(SKILLS)]})
    with pytest.raises(ConfigError, match=r"skills\.dirs"):
        build_gateway(settings_for(config))


# Over real transports ---------------------------------------------------------------------------


@asynccontextmanager
async def http_serve(settings: GatewaySettings) -> AsyncIterator[str]:
    async with build_gateway(settings) as gateway, anyio.create_task_group() as tg:
        port = await tg.start(serve_http, gateway, settings)
        yield f"http://127.0.0.1:{port}/mcp"
        tg.cancel_scope.cancel()


async def test_serve_over_http_lists_calls_approves_and_reports_progress(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    seen: dict[str, Any] = {}
    with anyio.fail_after(60):
        async with http_serve(settings_for(config)) as url:
            for era in ("legacy", "auto"):
                messages: list[str] = []

                async def on_progress(
                    progress: float, total: float | None, message: str | None
                ) -> None:
                    messages.append(message or "")  # noqa: B023 - used within the iteration

                transport = streamable_http_client(url, http_client=httpx2.AsyncClient())
                async with Client(transport, mode=era, elicitation_callback=allow_once) as client:
                    names = {tool.name for tool in (await client.list_tools()).tools}
                    added = await client.call_tool("fault__add", {"a": 1, "b": 1})
                    echoed = await client.call_tool("fault__echo", {"text": era})
                    progressed = await client.call_tool(
                        "fault__progress", {}, progress_callback=on_progress
                    )
                seen[era] = (names, added, echoed, progressed, "".join(messages))
    for era, (names, added, echoed, progressed, messages) in seen.items():
        assert "fault__echo" in names
        assert added.structured_content == {"sum": 2}
        assert text_of(echoed) == era
        assert text_of(progressed) == "done"
        assert "step 3" in messages


async def test_sagents_serve_with_a_config_speaks_mcp_over_stdio(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    code = "from sagents.cli.main import main; main()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ["-c", code, "serve", "--config", str(config), "--profile", "ops"]
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))
    with anyio.fail_after(40):
        async with Client(params, mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            added = await client.call_tool("spare__add", {"a": 4, "b": 5})
    assert "spare__add" in names
    assert "fault__add" not in names
    assert added.structured_content == {"sum": 9}


def test_a_local_tools_module_that_cannot_be_imported_is_a_config_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, localTools={"modules": ["tests.gateway.fixtures.nowhere"]})
    with pytest.raises(ConfigError, match=r"localTools\.modules\.0"):
        build_gateway(settings_for(config))


def test_a_module_without_a_tools_list_is_a_config_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, localTools={"modules": ["json"]})
    with pytest.raises(ConfigError, match="no TOOLS list"):
        build_gateway(settings_for(config))


async def test_a_local_tool_registered_twice_is_refused(tmp_path: Path) -> None:
    module = "tests.gateway.fixtures.conformance_tools"
    config = write_config(tmp_path, localTools={"modules": [module, module]}, mcpServers={})
    with anyio.fail_after(30), pytest.raises(ConfigError, match=r"localTools\.modules\.1"):
        async with open_gateway(settings_for(config)):
            pass


async def test_a_gateway_that_fails_to_open_closes_what_it_had_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = "tests.gateway.fixtures.conformance_tools"
    config = write_config(tmp_path, localTools={"modules": [module, module]}, mcpServers={})
    opened: list[ToolManager] = []
    build = build_tool_manager

    async def recorded(*args: Any, **kwargs: Any) -> ToolManager:
        opened.append(await build(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(runtime_module, "build_tool_manager", recorded)
    with anyio.fail_after(30), pytest.raises(ConfigError):
        async with open_gateway(settings_for(config)):
            pass
    assert len(opened) == 1
    assert opened[0].closed


async def test_the_gateway_is_built_over_parts_already_open(tmp_path: Path) -> None:
    module = "tests.gateway.fixtures.conformance_tools"
    config = write_config(tmp_path, localTools={"modules": [module]}, mcpServers={})
    async with open_gateway(settings_for(config)) as gateway:
        assert isinstance(gateway.provider, ToolProxy)
        assert gateway.provider.tool_managers == (gateway.manager,)
        assert gateway.provider.list_specs()
        assert not gateway.manager.closed
    assert gateway.manager.closed
    closed = await gateway.provider.run_tool("test_simple_text", {})
    assert closed.error is not None
    assert closed.error.code == "manager_closed"


async def test_local_tools_are_served_under_their_plain_names(tmp_path: Path) -> None:
    module = "tests.gateway.fixtures.conformance_tools"
    config = write_config(tmp_path, localTools={"modules": [module]}, mcpServers={})
    async with open_gateway(settings_for(config)) as served:
        with anyio.fail_after(30):
            async with Client(served.server, mode="legacy") as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                failed = await client.call_tool("test_error_handling", {})
    assert "test_simple_text" in names
    assert failed.is_error is True
    assert "intentionally" in text_of(failed)


async def test_a_local_tool_that_clashes_with_an_upstream_tool_is_refused(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, localTools={"modules": ["tests.gateway.fixtures.clashing_tools"]}
    )
    with anyio.fail_after(30), pytest.raises(ConfigError, match=r"localTools\.modules\.0"):
        async with open_gateway(settings_for(config)):
            pass
