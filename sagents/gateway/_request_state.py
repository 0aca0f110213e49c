"""``requestState`` of 2026-07-28 approvals: sealed, bound, single use, expiring.

A 2026-07-28 client is asked for an approval with an ``InputRequiredResult``; it answers by
sending the call again with its ``inputResponses`` and the ``requestState`` it received (MCP
2026-07-28, "Multi round-trip requests"). The spec says servers must treat the echoed state as
attacker-controlled, so:

- the state on the wire is sealed by the ``mcp`` SDK's ``RequestStateBoundary`` (AES-256-GCM
  under a key generated per process, so state from before a restart is refused; replicas on a
  shared store share one key, docs/scale-out.md): it carries an
  expiry (:data:`REQUEST_STATE_TTL_S`), the tool and a digest of its arguments, and the
  caller's credential (:func:`sagents.gateway._http_security.request_credential`); a state that
  fails any of these is refused with JSON-RPC ``-32602`` before the gateway sees it;
- inside, the gateway's approval store (:class:`ApprovalStates` in memory, or the PostgreSQL
  store replicas share, :mod:`sagents.store`) mints a random nonce bound to the gateway session
  (a profile and token) and the call, and accepts it once: a replayed answer is asked again,
  never run.
"""

from __future__ import annotations

import os
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from sagents.gateway._http_security import request_credential
from sagents.store._embedded import MAX_PENDING_APPROVALS, REQUEST_STATE_TTL_S, ApprovalStates

__all__ = [
    "MAX_PENDING_APPROVALS",
    "REQUEST_STATE_TTL_S",
    "ApprovalStates",
    "request_state_boundary",
]


def _principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    return request_credential(ctx.request).identity or None


def request_state_boundary(
    server_name: str, *, key: bytes | None = None, ttl_s: float = REQUEST_STATE_TTL_S
) -> RequestStateBoundary:
    """The SDK middleware sealing ``requestState``.

    Args:
        server_name: The audience the state is bound to.
        key: 32 bytes shared by every replica of a shared store; None draws a fresh
            per-process key (states from before a restart are then refused).
        ttl_s: Seconds a sealed state stays valid (``approvals.timeoutSec``).
    """
    security = RequestStateSecurity(
        keys=[key or os.urandom(32)], ttl=ttl_s, bind_principal=_principal
    )
    return RequestStateBoundary(security, default_audience=server_name)
