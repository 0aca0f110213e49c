"""Console approvals held in the store (docs/console.md, "Approvals"): a card a gone gateway
process left is shown again, answered once and only by its principal or the operator; a card
of a live process is not taken over; the card written holds no secret the gateway knows; a
2026-07-28 client's call sent again waits on its restored card. The processes are
:class:`PendingApprovals` over one real embedded approvals file; a killed one is the row it
left (what SIGKILL leaves; tests/gateway/test_console_approval_restart.py kills a real one)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import anyio
import pytest

from sagents.core._secrets import Redactor
from sagents.errors import StoreError
from sagents.gateway._pending import HeldCards, PendingApproval, PendingApprovals
from sagents.store._embedded import call_digest
from sagents.store._held import HeldApproval
from sagents.store._sqlite_approvals import SqliteApprovals
from sagents.tool._approval import ApprovalRequest

pytestmark = pytest.mark.anyio

SECRET = "s3cr3t-value-0123456789"
ARGUMENTS = {"sn": "A"}


async def gone(asker: str) -> bool:
    return asker != "local/alive"


def store_of(tmp_path: Path) -> SqliteApprovals:
    return SqliteApprovals(tmp_path / "approvals.sqlite3", ttl_s=600)


def process(tmp_path: Path, asker: str, *, redactor: Redactor | None = None) -> PendingApprovals:
    redact = redactor.redact_json if redactor else None
    held = HeldCards(store=store_of(tmp_path), asker=asker, gone=gone, redact=redact)
    return PendingApprovals(timeout_s=600, held=held)


def card(arguments: Mapping[str, object] = ARGUMENTS) -> PendingApproval:
    request = ApprovalRequest.for_tool_call(
        "fleet__configure", arguments, permission="write", session_id="s1"
    )
    return PendingApproval.for_request(request, owner="alice")


async def left_by_a_killed_process(
    tmp_path: Path, item: PendingApproval, binding: str = ""
) -> None:
    await store_of(tmp_path).hold(
        HeldApproval(
            approval_id=item.approval_id,
            binding=binding,
            call=call_digest("fleet__configure", ARGUMENTS),
            card=json.dumps(item.stored()),
            asker="local/killed",
            asked_at=item.created,
            expires_at=item.created + 600,
        )
    )


async def restarted_after(tmp_path: Path, item: PendingApproval, binding: str) -> PendingApprovals:
    """A process started after one that was killed while ``item`` waited."""
    await left_by_a_killed_process(tmp_path, item, binding=binding)
    restarted = process(tmp_path, "local/new")
    await restarted.refresh()
    return restarted


async def until_pending(pending: PendingApprovals) -> None:
    while not pending.pending():
        await pending.changed()


async def test_a_restored_card_is_answered_once_by_its_principal_or_the_operator(
    tmp_path: Path,
) -> None:
    item = card()
    with anyio.fail_after(20):
        await left_by_a_killed_process(tmp_path, item)
        restarted, other = process(tmp_path, "local/new"), process(tmp_path, "local/other")
        await restarted.refresh()
        await other.refresh()
        shown = restarted.pending(owner="alice")
        hidden = restarted.pending(owner="mallory")
        foreign = await restarted.settle(item.approval_id, "allow_once", by="mallory")
        with pytest.raises(ValueError, match="not offered"):
            await restarted.settle(item.approval_id, "allow_session", by=None)
        first = await restarted.settle(item.approval_id, "allow_once", by="alice")
        second = await other.settle(item.approval_id, "deny", by=None)  # another process
        await restarted.refresh()
        after = restarted.pending()
        taken = await store_of(tmp_path).take("", call_digest("fleet__configure", ARGUMENTS))
    assert [i.approval_id for i in shown] == [item.approval_id]
    assert (shown[0].restored, shown[0].resumable, shown[0].rememberable) == (True, False, False)
    assert hidden == []
    assert (foreign, first, second) == (False, True, False)
    assert after == []
    assert taken is None  # a handshake-era card: nothing can send its call again


async def test_a_card_of_a_live_process_is_not_taken_over_and_is_released_when_answered(
    tmp_path: Path,
) -> None:
    alive = process(tmp_path, "local/alive")
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(alive.ask, card())
            await until_pending(alive)
            held = await store_of(tmp_path).held()
            other = process(tmp_path, "local/other")
            await other.refresh()
            taken = other.pending()
            assert alive.answer(alive.pending()[0].approval_id, "deny", by=None)
        held_after = await store_of(tmp_path).held()
    assert len(held) == 1
    assert taken == []
    assert held_after == []  # the call went on: released from the store


async def test_a_held_card_holds_no_secret_the_gateway_knows(tmp_path: Path) -> None:
    pending = process(tmp_path, "local/alive", redactor=Redactor({"API_KEY": SECRET}))
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(pending.ask, card({"sn": "A", "key": SECRET}))
            await until_pending(pending)
            held = await store_of(tmp_path).held()
            on_disk = (tmp_path / "approvals.sqlite3").read_bytes()
            tg.cancel_scope.cancel()
    assert len(held) == 1
    assert SECRET not in held[0].card
    assert "[redacted:API_KEY]" in held[0].card
    assert SECRET.encode() not in on_disk


async def test_a_2026_call_sent_again_waits_on_its_restored_card_and_its_answer_releases_it(
    tmp_path: Path,
) -> None:
    item = card()
    call = call_digest("fleet__configure", ARGUMENTS)
    answers: list[str] = []
    with anyio.fail_after(20):
        restarted = await restarted_after(tmp_path, item, binding="client-b")
        restored = restarted.pending()
        async with anyio.create_task_group() as tg:

            async def again() -> None:
                answers.append(await restarted.ask(card(), binding="client-b", call=call))

            tg.start_soon(again)
            while restarted.pending()[0].restored:
                await restarted.changed()
            waiting = restarted.pending()
            assert restarted.answer(item.approval_id, "allow_once", by="alice")
        held_after = await store_of(tmp_path).held()
    assert restored[0].resumable
    assert [i.approval_id for i in waiting] == [item.approval_id]  # the same card, no second
    assert answers == ["allow_once"]
    assert held_after == []


async def test_an_answer_recorded_after_a_restart_is_taken_once_by_its_client_and_call(
    tmp_path: Path,
) -> None:
    item = card()
    with anyio.fail_after(20):
        restarted = await restarted_after(tmp_path, item, binding="client-b")
        assert await restarted.settle(item.approval_id, "allow_once", by=None)
        store = store_of(tmp_path)
        foreign = await store.take("client-c", call_digest("fleet__configure", ARGUMENTS))
        other_call = await store.take("client-b", call_digest("fleet__configure", {"sn": "B"}))
        taken = await store.take("client-b", call_digest("fleet__configure", ARGUMENTS))
        replayed = await store.take("client-b", call_digest("fleet__configure", ARGUMENTS))
    assert (foreign, other_call) == (None, None)
    assert (taken, replayed) == ("allow_once", None)


async def test_an_answer_the_store_cannot_record_is_an_error_and_the_card_stays(
    tmp_path: Path,
) -> None:
    item = card()
    with anyio.fail_after(20):
        restarted = await restarted_after(tmp_path, item, binding="client-b")
        (tmp_path / "approvals.sqlite3").write_bytes(b"not a database, " * 256)
        with pytest.raises(StoreError) as raised:
            await restarted.settle(item.approval_id, "allow_once", by=None)
        shown = restarted.pending()
    assert "approvals.sqlite3" in str(raised.value)
    assert [i.approval_id for i in shown] == [item.approval_id]  # it may be answered again


class SlowToSettle(SqliteApprovals):
    """The embedded store, whose recording of an answer waits until ``go`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, ttl_s=600)
        self.settling, self.go = anyio.Event(), anyio.Event()

    async def settle(self, approval_id: str, answer: str) -> bool:
        self.settling.set()
        await self.go.wait()
        return await super().settle(approval_id, answer)


async def test_a_2026_call_sent_again_while_its_answer_is_recorded_takes_that_answer(
    tmp_path: Path,
) -> None:
    """The console answers a restored card; the client sends the call again while the store
    records that answer: the call goes on with it, once (no second card, and nothing left in
    the store for a later sending of the call to run on)."""
    item = card()
    call = call_digest("fleet__configure", ARGUMENTS)
    answers: list[str] = []
    with anyio.fail_after(20):
        await left_by_a_killed_process(tmp_path, item, binding="client-b")
        store = SlowToSettle(tmp_path / "approvals.sqlite3")
        restarted = PendingApprovals(
            timeout_s=600, held=HeldCards(store=store, asker="local/new", gone=gone)
        )
        await restarted.refresh()
        async with anyio.create_task_group() as tg:
            answered, recorded = anyio.Event(), anyio.Event()

            async def again() -> None:
                answers.append(await restarted.ask(card(), binding="client-b", call=call))
                answered.set()

            async def console() -> None:
                assert await restarted.settle(item.approval_id, "allow_once", by="alice")
                recorded.set()

            tg.start_soon(console)
            await store.settling.wait()
            tg.start_soon(again)
            await restarted.changed()  # the call waits (on whichever card)
            store.go.set()
            await recorded.wait()
            second_cards = [i.approval_id for i in restarted.pending()]
            if not second_cards:  # failed before: it waited on a second card
                await answered.wait()
            tg.cancel_scope.cancel()
        left = await store_of(tmp_path).take("client-b", call)
    assert second_cards == []
    assert answers == ["allow_once"]
    assert left is None  # the answer was spent by this call, not kept for a later one


class FailingRelease(SqliteApprovals):
    """The embedded store, whose removal of a held card fails while ``broken`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, ttl_s=600)
        self.broken = False

    async def release(self, approval_id: str) -> None:
        if self.broken:
            raise StoreError("the store refused the removal (test)")
        await super().release(approval_id)


async def test_an_answer_whose_card_cannot_be_removed_is_refused_and_never_shown_again_answered(
    tmp_path: Path,
) -> None:
    """The card's removal from the store is the answer's record: while the store cannot remove
    it, the answer is refused (the card stays, the call still waits), so a card shown again
    after a restart is always one whose call did not go on; once removed, nothing comes back."""
    store = FailingRelease(tmp_path / "approvals.sqlite3")
    asked = PendingApprovals(
        timeout_s=600, held=HeldCards(store=store, asker="local/killed", gone=gone)
    )
    answers: list[str] = []
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                answers.append(await asked.ask(card()))

            tg.start_soon(call)
            await until_pending(asked)
            item = asked.pending()[0]
            store.broken = True
            refused: StoreError | None = None
            try:
                await asked.settle(item.approval_id, "allow_once", by="alice")
            except StoreError as error:
                refused = error
            still_waiting = [i.approval_id for i in asked.pending()]
            answers_while_broken = list(answers)
            restarted = process(tmp_path, "local/new")  # were it killed now
            await restarted.refresh()
            shown_meanwhile = [i.approval_id for i in restarted.pending()]
            store.broken = False
            recorded = await asked.settle(item.approval_id, "allow_once", by="alice")
            store.broken = True  # the call goes on whatever the store does now
        after_restart = process(tmp_path, "local/later")
        await after_restart.refresh()
    assert refused is not None
    assert (answers_while_broken, still_waiting) == ([], [item.approval_id])
    assert recorded
    assert shown_meanwhile == [item.approval_id]  # its call never went on: truthfully shown
    assert answers == ["allow_once"]
    assert after_restart.pending() == []


async def test_an_answer_recorded_by_another_process_unheard_is_found_at_the_next_refresh(
    tmp_path: Path,
) -> None:
    """An answer another process recorded without this one hearing of it (the embedded store
    tells nobody; a replica's listener may be reconnecting): the next refresh (a load of the
    approvals page) drops the answered card from this console, and the call waiting here on
    it takes the answer."""
    item = card()
    call = call_digest("fleet__configure", ARGUMENTS)
    answers: list[str] = []
    with anyio.fail_after(20):
        waits_here = await restarted_after(tmp_path, item, binding="client-b")
        shows_it = process(tmp_path, "local/shows")
        await shows_it.refresh()
        shown = [i.approval_id for i in shows_it.pending()]
        answered_elsewhere = process(tmp_path, "local/other")
        await answered_elsewhere.refresh()
        async with anyio.create_task_group() as tg:

            async def again() -> None:
                answers.append(await waits_here.ask(card(), binding="client-b", call=call))

            tg.start_soon(again)
            while waits_here.pending()[0].restored:  # the call sent again waits on the card
                await waits_here.changed()
            assert await answered_elsewhere.settle(item.approval_id, "allow_once", by="alice")
            await waits_here.refresh()
            await shows_it.refresh()
    assert shown == [item.approval_id]
    assert answers == ["allow_once"]
    assert shows_it.pending() == []
