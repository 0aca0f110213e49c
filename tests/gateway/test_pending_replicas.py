"""Console approvals held on a shared PostgreSQL store (docs/console.md, "Approvals";
docs/scale-out.md): an answer recorded through one replica reaches the others at once, through
the store's ``LISTEN``/``NOTIFY``. The replicas are :class:`PendingApprovals` over real
:class:`PostgresStore` replicas of one database; the replica that asked and died is the row it
left (tests/gateway/test_console_approval_restart.py kills a real one)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from sagents.gateway._pending import HeldCards, PendingApproval, PendingApprovals
from sagents.store import parse_store_url
from sagents.store._embedded import call_digest
from sagents.store._held import HeldApproval
from sagents.store._postgres import PostgresStore
from sagents.tool._approval import ApprovalRequest

pytestmark = pytest.mark.anyio

ARGUMENTS = {"sn": "A"}
CALL = call_digest("fleet__configure", ARGUMENTS)  # as the gateway would key it: any string
BINDING = "client-b"


async def gone(asker: str) -> bool:
    return asker.startswith("dead/")


@asynccontextmanager
async def replica(url: str, name: str) -> AsyncIterator[PendingApprovals]:
    """One gateway replica's console approvals, on its own connection to the shared store."""
    async with PostgresStore(parse_store_url(url), replica_id=name) as store:
        held = HeldCards(store=store.approvals, asker=f"{name}/boot", gone=gone)
        yield PendingApprovals(timeout_s=600, held=held)


def card() -> PendingApproval:
    request = ApprovalRequest.for_tool_call(
        "fleet__configure", ARGUMENTS, permission="write", session_id="s1"
    )
    return PendingApproval.for_request(request, owner="alice")


async def left_by_a_dead_replica(url: str, item: PendingApproval) -> None:
    async with PostgresStore(parse_store_url(url), replica_id="dead") as store:
        await store.approvals.hold(
            HeldApproval(
                approval_id=item.approval_id,
                binding=BINDING,
                call=CALL,
                card=json.dumps(item.stored()),
                asker="dead/boot",
                asked_at=item.created,
                expires_at=item.created + 600,
            )
        )


async def test_an_answer_given_through_one_replica_releases_the_call_another_replica_waits_on(
    postgres_url: str,
) -> None:
    """Replica C's client sends the call again and it waits on the restored card; the console
    of replica A answers it: C hears the answer, the call goes on with it, once."""
    item = card()
    answers: list[str] = []
    with anyio.fail_after(60):
        await left_by_a_dead_replica(postgres_url, item)
        async with (
            replica(postgres_url, "a") as on_a,
            replica(postgres_url, "c") as on_c,
            anyio.create_task_group() as tg,
        ):
            await on_a.refresh()
            await on_c.refresh()
            answered = anyio.Event()

            async def again() -> None:
                answers.append(await on_c.ask(card(), binding=BINDING, call=CALL))
                answered.set()

            tg.start_soon(again)
            while on_c.pending()[0].restored:  # the call sent again waits on the card
                await on_c.changed()
            recorded = await on_a.settle(item.approval_id, "allow_once", by="alice")
            await answered.wait()
        async with PostgresStore(parse_store_url(postgres_url), replica_id="later") as store:
            left = await store.approvals.take(BINDING, CALL)
            held = await store.approvals.held()
    assert recorded
    assert answers == ["allow_once"]
    assert (left, held) == (None, [])  # spent by that call: nothing left for a later one


async def test_a_card_answered_through_one_replica_leaves_the_other_replicas_consoles(
    postgres_url: str,
) -> None:
    item = card()
    with anyio.fail_after(60):
        await left_by_a_dead_replica(postgres_url, item)
        async with replica(postgres_url, "a") as on_a, replica(postgres_url, "b") as on_b:
            await on_a.refresh()
            await on_b.refresh()
            shown = [i.approval_id for i in on_b.pending()]
            assert await on_a.settle(item.approval_id, "deny", by=None)
            while on_b.pending():
                await on_b.changed()
            second = await on_b.settle(item.approval_id, "allow_once", by=None)
    assert shown == [item.approval_id]
    assert second is False  # answered already, whichever console shows it
