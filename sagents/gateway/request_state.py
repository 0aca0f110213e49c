"""``requestState`` of 2026-07-28 approvals: sealed, bound, single use, expiring.

A 2026-07-28 client is asked for an approval with an ``InputRequiredResult``; it answers by
sending the call again with its ``inputResponses`` and the ``requestState`` it received (MCP
2026-07-28, "Multi round-trip requests"). The spec says servers must treat the echoed state as
attacker-controlled, so:

- the state on the wire is sealed by the ``mcp`` SDK's ``RequestStateBoundary`` (AES-256-GCM
  under a key generated per process, so state from before a restart is refused): it carries an
  expiry (:data:`REQUEST_STATE_TTL_S`), the tool and a digest of its arguments, and the
  caller's credential (:func:`sagents.gateway.http_security.request_credential`); a state that
  fails any of these is refused with JSON-RPC ``-32602`` before the gateway sees it;
- inside, :class:`ApprovalStates` mints a random nonce bound to the gateway session (a profile
  and token) and the call, and accepts it once: a replayed answer is asked again, never run.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from sagents.gateway.http_security import request_credential

__all__ = [
    "MAX_PENDING_APPROVALS",
    "REQUEST_STATE_TTL_S",
    "ApprovalStates",
    "request_state_boundary",
]

REQUEST_STATE_TTL_S = 600.0
"""Seconds an approval's ``requestState`` stays valid (the time a user has to answer)."""
MAX_PENDING_APPROVALS = 1024
"""Approvals asked and not yet answered that are kept; past it the oldest can no longer be
answered (it is asked again), so memory stays bounded."""


def _principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    return request_credential(ctx.request).identity or None


def request_state_boundary(server_name: str) -> RequestStateBoundary:
    """The SDK middleware sealing ``requestState`` under a fresh per-process key."""
    security = RequestStateSecurity(
        keys=[os.urandom(32)], ttl=REQUEST_STATE_TTL_S, bind_principal=_principal
    )
    return RequestStateBoundary(security, default_audience=server_name)


@dataclass(frozen=True)
class _Pending:
    session_id: str
    call: str
    expires_at: float


class ApprovalStates:
    """Nonces of pending approvals: minted for one session and call, redeemed once.

    Args:
        clock: Seconds, monotonic (tests pass their own).
        ttl_s: Seconds a nonce stays redeemable.
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, ttl_s: float = REQUEST_STATE_TTL_S
    ) -> None:
        self._clock = clock
        self._ttl_s = ttl_s
        self._pending: OrderedDict[str, _Pending] = OrderedDict()

    def issue(self, session_id: str, tool: str, arguments: Mapping[str, Any]) -> str:
        """A new state for asking ``session_id`` to approve this call."""
        self._prune()
        while len(self._pending) >= MAX_PENDING_APPROVALS:
            self._pending.popitem(last=False)
        nonce = secrets.token_urlsafe(18)
        self._pending[nonce] = _Pending(
            session_id, _call_digest(tool, arguments), self._clock() + self._ttl_s
        )
        return json.dumps({"nonce": nonce})

    def redeem(
        self, state: str | None, session_id: str, tool: str, arguments: Mapping[str, Any]
    ) -> bool:
        """Whether ``state`` is a pending approval of this session and call (then spent)."""
        self._prune()
        try:
            nonce = json.loads(state or "")["nonce"]
        except (ValueError, KeyError, TypeError):
            return False
        if not isinstance(nonce, str):
            return False
        pending = self._pending.get(nonce)
        if pending is None:
            return False
        if pending.session_id != session_id or pending.call != _call_digest(tool, arguments):
            return False
        del self._pending[nonce]
        return True

    def _prune(self) -> None:
        now = self._clock()
        for nonce in [n for n, p in self._pending.items() if p.expires_at <= now]:
            del self._pending[nonce]


def _call_digest(tool: str, arguments: Mapping[str, Any]) -> str:
    payload = json.dumps([tool, dict(arguments)], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()
