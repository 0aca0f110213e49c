"""``--approvals``: the gateway asks the console, or the client and the console at once."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from sagents.gateway._pending import PendingApprovals
from sagents.gateway._server import Gateway
from tests.gateway.fakes import FakeProvider

pytestmark = pytest.mark.anyio


async def until_pending(pending: PendingApprovals) -> None:
    while not pending.pending():
        await pending.changed()


async def test_with_both_the_clients_answer_releases_the_call_and_clears_the_card() -> None:
    provider = FakeProvider()

    async def allow(context: ClientRequestContext, params: mt.ElicitRequestParams) -> Any:
        return mt.ElicitResult(action="accept", content={"decision": "allow_once"})

    with anyio.fail_after(20):
        async with (
            Gateway(provider, progress=provider.progress, approvals="both") as gateway,
            Client(gateway.server, mode="legacy", elicitation_callback=allow) as client,
        ):
            result = await client.call_tool("fleet__configure", {"value": 1})
            left = gateway.pending.pending()
    assert result.is_error is False
    assert left == []


async def test_with_both_a_console_answer_releases_a_call_whose_client_never_answers() -> None:
    provider = FakeProvider()
    never = anyio.Event()

    async def silent(context: ClientRequestContext, params: mt.ElicitRequestParams) -> Any:
        await never.wait()  # a client that shows the form and never gets an answer

    with anyio.fail_after(20):
        async with (
            Gateway(provider, progress=provider.progress, approvals="both") as gateway,
            Client(gateway.server, mode="legacy", elicitation_callback=silent) as client,
            anyio.create_task_group() as tg,
        ):
            results: list[mt.CallToolResult] = []
            done = anyio.Event()

            async def call() -> None:
                results.append(await client.call_tool("fleet__configure", {"value": 1}))
                done.set()

            tg.start_soon(call)
            await until_pending(gateway.pending)
            (item,) = gateway.pending.pending()
            assert item.rememberable is True
            assert gateway.pending.answer(item.approval_id, "allow_session", by=None)
            await done.wait()
            again = await client.call_tool("fleet__configure", {"value": 2})
    assert results[0].is_error is False
    assert again.is_error is False  # allowed for this session: not asked again
    assert gateway.pending.pending() == []


async def test_with_console_a_client_without_elicitation_waits_for_the_console() -> None:
    provider = FakeProvider()
    with anyio.fail_after(20):
        async with (
            Gateway(provider, progress=provider.progress, approvals="console") as gateway,
            Client(gateway.server, mode="legacy") as client,
            anyio.create_task_group() as tg,
        ):
            done = anyio.Event()
            results: list[mt.CallToolResult] = []

            async def call() -> None:
                results.append(await client.call_tool("fleet__reboot", {}))
                done.set()

            tg.start_soon(call)
            await until_pending(gateway.pending)
            (item,) = gateway.pending.pending()
            assert item.rememberable is False  # destructive: one call at a time
            assert item.permissions == ("destructive",)
            gateway.pending.answer(item.approval_id, "deny", by=None)
            await done.wait()
    assert results[0].is_error is True
    assert "was not approved" in str(results[0].content)
