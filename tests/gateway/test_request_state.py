"""2026-07-28 approvals: ``requestState`` is sealed, bound to the session and call, single use,
and expires (sagents.gateway._request_state)."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from sagents.gateway import Gateway, Profile
from sagents.gateway._request_state import REQUEST_STATE_TTL_S, ApprovalStates
from sagents.gateway._server import APPROVAL_INPUT_KEY
from sagents.gateway._settings import GatewaySettings
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_http import http_gateway

pytestmark = pytest.mark.anyio

ALLOW: mt.InputResponses = {
    APPROVAL_INPUT_KEY: mt.ElicitResult(action="accept", content={"decision": "allow_once"})
}


async def _no_elicitation(context: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    raise AssertionError("driven by hand")


async def _ask(client: Client, arguments: dict[str, Any]) -> str:
    """Call the write tool once; the ``requestState`` of the approval it asks for."""
    first = await client.session.call_tool("fleet__configure", arguments, allow_input_required=True)
    assert isinstance(first, mt.InputRequiredResult)
    assert first.request_state is not None
    return first.request_state


async def _answer(client: Client, arguments: dict[str, Any], state: str) -> object:
    return await client.session.call_tool(
        "fleet__configure",
        arguments,
        input_responses=ALLOW,
        request_state=state,
        allow_input_required=True,
    )


async def test_a_forged_state_is_refused_and_the_call_does_not_run() -> None:
    provider = FakeProvider()
    old_style = hashlib.sha256(
        json.dumps(["fleet__configure", {"sn": "A"}], sort_keys=True).encode()
    ).hexdigest()
    async with (
        Gateway(provider) as gateway,
        Client(gateway.server, mode="auto", elicitation_callback=_no_elicitation) as client,
    ):
        with anyio.fail_after(10):
            state = await _ask(client, {"sn": "A"})
            for forged in (old_style, state[:-2] + "AA", "v1.AAAA"):
                with pytest.raises(MCPError, match="Invalid or expired requestState"):
                    await _answer(client, {"sn": "A"}, forged)
            # A genuine state of another call (other arguments) is refused too.
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await _answer(client, {"sn": "B"}, state)
    assert state != old_style
    assert provider.calls == []


async def test_an_answered_state_cannot_be_replayed() -> None:
    provider = FakeProvider()
    async with (
        Gateway(provider) as gateway,
        Client(gateway.server, mode="auto", elicitation_callback=_no_elicitation) as client,
    ):
        with anyio.fail_after(10):
            state = await _ask(client, {"sn": "A"})
            ran = await _answer(client, {"sn": "A"}, state)
            replayed = await _answer(client, {"sn": "A"}, state)
    assert isinstance(ran, mt.CallToolResult)
    assert ran.is_error is False
    assert isinstance(replayed, mt.InputRequiredResult)  # asked again, not run again
    assert [call[0] for call in provider.calls] == ["fleet__configure"]


async def test_an_expired_state_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    provider = FakeProvider()
    async with (
        Gateway(provider) as gateway,
        Client(gateway.server, mode="auto", elicitation_callback=_no_elicitation) as client,
    ):
        with anyio.fail_after(10):
            state = await _ask(client, {"sn": "A"})
            real = time.time  # the SDK's boundary checks expiry against time.time()
            monkeypatch.setattr(time, "time", lambda: real() + REQUEST_STATE_TTL_S + 1)
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await _answer(client, {"sn": "A"}, state)
    assert provider.calls == []


def test_pending_approvals_expire_are_bound_to_their_session_and_are_spent_once() -> None:
    now = [0.0]
    states = ApprovalStates(clock=lambda: now[0], ttl_s=10)
    state = states.issue("s1", "t", {"a": 1})
    assert not states.redeem(state, "s2", "t", {"a": 1})
    assert not states.redeem(state, "s1", "t", {"a": 2})
    assert states.redeem(state, "s1", "t", {"a": 1})
    assert not states.redeem(state, "s1", "t", {"a": 1})
    late = states.issue("s1", "t", {})
    now[0] = 10.0
    assert not states.redeem(late, "s1", "t", {})
    assert not states.redeem("not json", "s1", "t", {})


def test_one_session_flooding_approvals_never_evicts_another_sessions_pending_one() -> None:
    """A 2026-07-28 session is one per token and profile: one client asking for thousands of
    approvals loses its own oldest states, never another client's."""
    from sagents.store._embedded import (
        MAX_PENDING_APPROVALS,
        MAX_PENDING_APPROVALS_PER_SESSION,
    )

    states = ApprovalStates()
    victim = states.issue("shared:alice:", "fleet__reboot", {"sn": "SN1"})
    flood = [states.issue("shared:mallory:", "t", {"n": n})
             for n in range(2 * MAX_PENDING_APPROVALS)]  # fmt: skip
    assert states.redeem(victim, "shared:alice:", "fleet__reboot", {"sn": "SN1"})
    assert states.redeem(flood[-1], "shared:mallory:", "t", {"n": len(flood) - 1})
    oldest_kept = len(flood) - MAX_PENDING_APPROVALS_PER_SESSION
    assert not states.redeem(flood[oldest_kept - 1], "shared:mallory:", "t",
                             {"n": oldest_kept - 1})  # fmt: skip


async def test_a_state_minted_for_one_token_is_refused_for_another() -> None:
    ops = Profile(name="ops", mode="ask")
    settings = GatewaySettings(
        transport="http", port=0, bearer_token="main-token", token_profiles={"ops-token": ops}
    )
    provider = FakeProvider()

    def client(url: str, token: str) -> Client:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        return Client(
            streamable_http_client(url, http_client=http),
            mode="auto",
            elicitation_callback=_no_elicitation,
        )

    with anyio.fail_after(20):
        async with (
            http_gateway(provider, settings, token_profiles={"ops-token": ops}) as url,
            client(url, "main-token") as main,
            client(url, "ops-token") as other,
        ):
            state = await _ask(main, {"sn": "A"})
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await _answer(other, {"sn": "A"}, state)
    assert provider.calls == []


async def test_approvals_timeout_bounds_the_sealed_state_and_may_be_hours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``approvals.timeoutSec`` of two hours: an answer an hour later (past the old fixed
    600 s) still runs the call once; one past the two hours is refused."""
    provider = FakeProvider()
    async with (
        Gateway(provider, approval_timeout_s=2 * 3600) as gateway,
        Client(gateway.server, mode="auto", elicitation_callback=_no_elicitation) as client,
    ):
        with anyio.fail_after(10):
            real = time.time  # the SDK's boundary checks expiry against time.time()
            late = await _ask(client, {"sn": "B"})
            monkeypatch.setattr(time, "time", lambda: real() + 2 * 3600 + 1)
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await _answer(client, {"sn": "B"}, late)
            monkeypatch.setattr(time, "time", real)
            state = await _ask(client, {"sn": "A"})
            monkeypatch.setattr(time, "time", lambda: real() + 3600)
            ran = await _answer(client, {"sn": "A"}, state)
    assert isinstance(ran, mt.CallToolResult)
    assert ran.is_error is False
    assert [call[0] for call in provider.calls] == ["fleet__configure"]


class _Seen(logging.Handler):
    """Sets an event when a log record holding ``text`` arrives."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.event = text, anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


async def test_an_idle_expiry_between_the_question_and_the_answer_keeps_the_approval() -> None:
    """``sessionIdleTimeout`` passes while the client's approval waits (nothing in flight):
    the session's sandboxes may go, its pending approval never does; the answer runs the call
    once."""
    provider = FakeProvider()
    seen = _Seen("is idle: its sandboxes are released")
    lifetime_log = logging.getLogger("sagents.gateway._lifetime")
    lifetime_log.addHandler(seen)
    level, lifetime_log.level = lifetime_log.level, logging.INFO
    try:
        async with (
            Gateway(provider, session_idle_timeout_s=0.05) as gateway,
            Client(gateway.server, mode="auto", elicitation_callback=_no_elicitation) as client,
        ):
            with anyio.fail_after(30):
                state = await _ask(client, {"sn": "A"})
                await seen.event.wait()  # the idle sweep took the session
                ran = await _answer(client, {"sn": "A"}, state)
    finally:
        lifetime_log.removeHandler(seen)
        lifetime_log.setLevel(level)
    assert isinstance(ran, mt.CallToolResult)
    assert ran.is_error is False
    assert [call[0] for call in provider.calls] == ["fleet__configure"]
