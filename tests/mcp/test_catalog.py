"""An upstream's prompts, resources, templates and completion through the supervisor, with an
in-process server (tests/mcp/servers/catalog_server.py) and fake paginators."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp.server import Server

from sagents.errors import UnknownToolError, UpstreamProtocolError
from sagents.mcp import MCPSupervisor
from sagents.mcp._catalog import list_all
from tests.mcp.servers.catalog_server import build_server

pytestmark = pytest.mark.anyio


@pytest.fixture
async def sup(tmp_path: Path) -> AsyncIterator[MCPSupervisor]:
    async with MCPSupervisor(log_dir=tmp_path) as supervisor:
        await supervisor.add_server("notes", build_server("notes"))
        yield supervisor


async def test_a_servers_prompts_resources_and_templates_are_listed(sup: MCPSupervisor) -> None:
    catalog = sup.catalogs()["notes"]
    assert [p.name for p in catalog.prompts] == ["greet", "plain"]
    assert [r.uri for r in catalog.resources] == ["note://hello", "note://logo"]
    assert [t.uri_template for t in catalog.templates] == ["note://items/{id}"]
    assert catalog.completions is True


async def test_prompts_reads_and_completions_are_sent_to_the_server(sup: MCPSupervisor) -> None:
    prompt = await sup.get_prompt("notes", "greet", {"name": "ada"})
    read = await sup.read_resource("notes", "note://items/3")
    done = await sup.complete(
        "notes", mt.PromptReference(name="greet"), {"name": "name", "value": "b"}
    )
    first = prompt.messages[0].content
    assert isinstance(first, mt.TextContent)
    assert first.text == "notes: hello ada"
    assert isinstance(read.contents[0], mt.TextResourceContents)
    assert read.contents[0].text == "notes: note://items/3"
    assert done.completion.values == ["bob"]


async def test_an_upstream_error_is_raised_with_its_jsonrpc_code(sup: MCPSupervisor) -> None:
    with pytest.raises(UpstreamProtocolError) as caught:
        await sup.read_resource("notes", "note://nothing")
    assert caught.value.details["jsonrpc_code"] == -32002
    assert "note://nothing" in caught.value.message
    with pytest.raises(UnknownToolError):
        await sup.get_prompt("nobody", "greet")


async def test_a_changed_list_is_listed_again_and_reported(sup: MCPSupervisor) -> None:
    changes: list[tuple[str, str]] = []
    seen = anyio.Event()

    async def on_change(server: str, kind: str) -> None:
        changes.append((server, kind))
        seen.set()

    sup.on_catalog_changed(on_change)
    await sup.call_tool("notes", "add_prompt")
    with anyio.fail_after(30):
        await seen.wait()
    assert changes == [("notes", "prompts")]
    assert [p.name for p in sup.catalogs()["notes"].prompts] == ["greet", "plain", "extra2"]


async def test_a_failing_list_costs_only_that_list(tmp_path: Path) -> None:
    async def list_prompts(ctx: Any, params: Any) -> mt.ListPromptsResult:
        raise RuntimeError("prompts are broken")

    async def list_tools(ctx: Any, params: Any) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=[mt.Tool(name="t", input_schema={"type": "object"})])

    server: Server[Any] = Server("half", on_list_prompts=list_prompts, on_list_tools=list_tools)
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        specs = await sup.add_server("half", server)
        catalog = sup.catalogs()["half"]
    assert [s.name for s in specs] == ["half__t"]
    assert catalog.prompts == ()


async def test_pages_are_followed_and_a_repeated_cursor_ends_the_walk() -> None:
    pages = {
        None: (["a", "b"], "1"),
        "1": (["c"], "2"),
        "2": (["d"], "1"),  # repeats: the walk stops here
    }
    asked: list[str | None] = []

    async def fetch(params: mt.PaginatedRequestParams | None) -> mt.ListPromptsResult:
        cursor = params.cursor if params is not None else None
        asked.append(cursor)
        names, following = pages[cursor]
        return mt.ListPromptsResult(
            prompts=[mt.Prompt(name=n) for n in names], next_cursor=following
        )

    found = await list_all(fetch, lambda page: page.prompts, server="s", method="prompts/list")  # type: ignore[union-attr]
    assert [p.name for p in found] == ["a", "b", "c", "d"]
    assert asked == [None, "1", "2"]
