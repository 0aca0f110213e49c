"""A gateway on a real PostgreSQL store while the database is down (docs/scale-out.md, "When the
database is down"): a call whose approval or session grant needs the store is answered with a
clear ``store_unavailable`` error (never a JSON-RPC internal error) and does not run; calls that
need no store go on, and once the database is back the same call is asked and runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from sagents.gateway import Gateway
from sagents.gateway._server import APPROVAL_INPUT_KEY
from sagents.store import parse_store_url
from sagents.store._postgres import PostgresStore
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_server import answering, error_code
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.anyio

Elicit = Callable[[ClientRequestContext, mt.ElicitRequestParams], Awaitable[mt.ElicitResult]]
ALLOW: mt.InputResponses = {
    APPROVAL_INPUT_KEY: mt.ElicitResult(action="accept", content={"decision": "allow_once"})
}


@asynccontextmanager
async def gateway_on(server: PostgresServer, provider: FakeProvider) -> AsyncIterator[Gateway]:
    async with (
        PostgresStore(parse_store_url(server.url()), replica_id="a") as store,
        Gateway(provider, progress=provider.progress, store=store) as gateway,
    ):
        yield gateway


async def _answered_by_hand(
    context: ClientRequestContext, params: mt.ElicitRequestParams
) -> mt.ElicitResult:
    raise AssertionError("a 2026-07-28 approval is answered in the retried call")


def _text(result: mt.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, mt.TextContent))


async def test_a_call_that_needs_its_approval_or_grant_while_the_store_is_down_is_refused_clearly(
    own_postgres: PostgresServer,
) -> None:
    provider = FakeProvider()
    asked: list[str] = []
    allow_session: Elicit = answering("allow_session", asked)

    async def store_goes_down_while_asked(
        context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        await anyio.to_thread.run_sync(own_postgres.stop)
        return await allow_session(context, params)

    callbacks: Iterator[Elicit] = iter([store_goes_down_while_asked, allow_session])

    async def elicitation(
        context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        return await next(callbacks)(context, params)

    async with (
        gateway_on(own_postgres, provider) as gateway,
        Client(gateway.server, mode="legacy", elicitation_callback=elicitation) as client,
    ):
        with anyio.fail_after(90):
            granting = await client.call_tool("fleet__configure", {"sn": "A"})  # grant: store down
            asking = await client.call_tool("fleet__configure", {"sn": "B"})  # grants: store down
            reading = await client.call_tool("fleet__status", {})  # needs no store
            await anyio.to_thread.run_sync(own_postgres.start)
            back = await client.call_tool("fleet__configure", {"sn": "C"})
    assert error_code(granting) == "store_unavailable"
    assert error_code(asking) == "store_unavailable"
    assert "cannot reach the store" in _text(asking)
    assert granting.is_error
    assert asking.is_error
    assert error_code(reading) is None
    assert error_code(back) is None
    assert len(asked) == 2  # the first call and, once the store was back, the last
    assert [(name, args) for name, args, _ in provider.calls] == [
        ("fleet__status", {}),
        ("fleet__configure", {"sn": "C"}),
    ]


async def test_a_2026_client_answering_an_approval_while_the_store_is_down_is_refused_clearly(
    own_postgres: PostgresServer,
) -> None:
    provider = FakeProvider()
    async with (
        gateway_on(own_postgres, provider) as gateway,
        Client(gateway.server, mode="auto", elicitation_callback=_answered_by_hand) as client,
    ):
        with anyio.fail_after(90):
            first = await client.session.call_tool(
                "fleet__configure", {"sn": "A"}, allow_input_required=True
            )
            assert isinstance(first, mt.InputRequiredResult)
            await anyio.to_thread.run_sync(own_postgres.stop)
            answered = await client.session.call_tool(
                "fleet__configure",
                {"sn": "A"},
                input_responses=ALLOW,
                request_state=first.request_state,
                allow_input_required=True,
            )
            await anyio.to_thread.run_sync(own_postgres.start)
            again = await client.session.call_tool(
                "fleet__configure",
                {"sn": "A"},
                input_responses=ALLOW,
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert isinstance(answered, mt.CallToolResult)
    assert error_code(answered) == "store_unavailable"
    assert isinstance(again, mt.CallToolResult)  # the approval was not spent by the outage
    assert error_code(again) is None
    assert [name for name, _, _ in provider.calls] == ["fleet__configure"]
