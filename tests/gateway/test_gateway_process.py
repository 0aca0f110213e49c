"""The gateway process (sagents/gateway/_process.py): made once, before the parts that name
it, so that the call decider and the console's held cards are built complete over one boot id
(docs/architecture.md, "Lifecycles")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagents.gateway._pending import PendingApproval
from sagents.gateway._process import GatewayProcess
from sagents.gateway._server import Gateway
from sagents.store import open_store, parse_store_url
from sagents.store._embedded import call_digest
from sagents.store._held import HeldApproval
from sagents.tool import ToolManager
from sagents.tool._approval import ApprovalRequest

pytestmark = pytest.mark.anyio


async def test_an_earlier_process_of_this_store_is_gone_and_this_one_is_not(
    tmp_path: Path,
) -> None:
    async with open_store(parse_store_url(None), data_dir=tmp_path / "data") as store:
        process = GatewayProcess(store)
        replica = store.replica_id
        assert process.asker == f"{replica}/{process.boot}"
        assert not await process.gone(process.asker)
        assert await process.gone(f"{replica}/an-earlier-boot")
        held = process.held_cards()
        assert held is not None
        assert held.store is store.approvals
        assert held.asker == process.asker


def test_without_a_store_nothing_is_held() -> None:
    assert GatewayProcess().held_cards() is None


async def test_a_gateway_over_a_store_shows_the_cards_its_earlier_process_left(
    tmp_path: Path,
) -> None:
    """Built complete: the pending approvals a gateway makes hold their cards in its store,
    and a card its earlier process (another boot id) left is shown again; one its own
    process holds is not taken over."""
    async with open_store(parse_store_url(None), data_dir=tmp_path / "data") as store:
        process = GatewayProcess(store)
        earlier, own = card("s-earlier"), card("s-own")
        await store.approvals.hold(held(earlier, asker=f"{store.replica_id}/an-earlier-boot"))
        await store.approvals.hold(held(own, asker=process.asker))
        gateway = Gateway(ToolManager(), store=store, process=process)
        await gateway.pending.refresh()
        shown = gateway.pending.pending()
        assert [p.approval_id for p in shown] == [earlier.approval_id]
        assert shown[0].restored


def card(session_id: str) -> PendingApproval:
    request = ApprovalRequest.for_tool_call(
        "fleet__configure", {"sn": "A"}, permission="write", session_id=session_id
    )
    return PendingApproval.for_request(request, owner="alice")


def held(item: PendingApproval, *, asker: str) -> HeldApproval:
    return HeldApproval(
        approval_id=item.approval_id,
        binding="",
        call=call_digest("fleet__configure", {"sn": "A"}),
        card=json.dumps(item.stored()),
        asker=asker,
        asked_at=item.created,
        expires_at=item.created + 600,
    )
