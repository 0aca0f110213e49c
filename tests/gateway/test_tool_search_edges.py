"""``sagents serve --tool-search`` at its edges: hostile queries, a failing ranking, expanding
the gateway's own tools (docs/gateway.md, "Tool search").

Driven with the MCP SDK's own client, in memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import Client

from sagents.core._spec import ToolSpec
from sagents.gateway import Gateway
from sagents.gateway._tool_search import ToolRanker, ToolSearch
from sagents.tool._approval import AllowAllApprover
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_server import error_code
from tests.gateway.test_tool_search import OWN, names, searching, structured


@asynccontextmanager
async def ranked_by(rank: ToolRanker) -> AsyncIterator[Gateway]:
    approver = AllowAllApprover()
    async with Gateway(FakeProvider(), tool_search=ToolSearch(rank), approver=approver) as gateway:
        yield gateway


pytestmark = pytest.mark.anyio


async def test_a_query_with_a_lone_surrogate_is_searched_not_an_internal_error() -> None:
    # JSON's "\ud800" escape arrives as a lone surrogate, which the embeddings' tokenizer refuses
    async with searching(FakeProvider()) as gateway, Client(gateway.server) as client:
        found = structured(await client.call_tool("search_tools", {"query": "fleet \ud800 status"}))
    assert found["tools"][0]["name"] == "fleet__status"


async def test_a_ranking_that_raises_is_an_error_result_of_that_call() -> None:
    def broken(query: str, specs: Sequence[ToolSpec], k: int) -> list[str]:
        raise RuntimeError("index corrupt")

    async with (
        ranked_by(broken) as gateway,
        Client(gateway.server) as client,
    ):
        result = await client.call_tool("search_tools", {"query": "fleet status"})
        listed = await names(client)
    assert result.is_error
    assert error_code(result) == "execution_error"
    assert listed == OWN  # the session goes on


@pytest.mark.parametrize("answer", [None, "fleet__status", 42])
async def test_a_ranking_answer_that_is_not_a_list_finds_nothing_or_fails_clearly(
    answer: Any,
) -> None:
    async with (
        ranked_by(lambda query, specs, k: answer) as gateway,
        Client(gateway.server) as client,
    ):
        result = await client.call_tool("search_tools", {"query": "fleet status"})
    if result.is_error:
        assert error_code(result) == "execution_error"
    else:
        assert structured(result)["tools"] == []


async def test_expanding_the_gateways_own_tools_reports_them_already_selected() -> None:
    async with searching(FakeProvider()) as gateway, Client(gateway.server) as client:
        expansion = structured(
            await client.call_tool("tool_expand_tools", {"tool_names": [*OWN, "fleet__status"]})
        )
        listed = await names(client)
    assert expansion["expanded_tools"] == ["fleet__status"]
    assert expansion["already_selected_tools"] == OWN
    assert expansion["invalid_tools"] == []
    assert not set(OWN) & set(expansion["available_expandable_tools"])
    assert listed == [*OWN, "fleet__status"]
