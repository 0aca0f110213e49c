"""Handshake-era (2025) sessions behind a load balancer: each lives on one replica.

A 2026-07-28 request is self-contained, so any replica of a shared store serves it; a session
of the handshake protocols (2025-06-18, 2025-11-25) is an ``Mcp-Session-Id`` that exists on the
replica that answered its ``initialize`` only. The load balancer must route each session id to
one replica (docs/scale-out.md, "Load balancer"). When it does not, a request of a session this
replica never opened gets HTTP 404 (as the MCP spec's streamable HTTP transport says for an
unknown session, so the client may initialize again) with a JSON-RPC error that says what is
wrong and what to change, instead of the transport's bare "Session not found".
"""

from __future__ import annotations

import json
from collections import OrderedDict

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MAX_KNOWN_SESSIONS", "SESSION_HEADER", "SessionAffinityCheck", "wrong_replica_text"]

SESSION_HEADER = b"mcp-session-id"
MAX_KNOWN_SESSIONS = 100_000
"""Session ids remembered per replica (the oldest are forgotten first; a forgotten session
that is still open is refused like one of another replica)."""
_INVALID_REQUEST = -32600  # JSON-RPC 2.0, "Error object"; the code the SDK uses for a 404


def wrong_replica_text(session_id: str, replica_id: str) -> str:
    """The error message for a session this replica does not hold."""
    return (
        f"session {session_id[:64]!r} is not open on this gateway replica ({replica_id!r}): "
        "a session of the 2025 protocols (opened with initialize) lives on the replica that "
        "opened it. Configure session affinity on the load balancer (route by the "
        "Mcp-Session-Id header, docs/scale-out.md), or use protocol 2026-07-28, which any "
        "replica serves"
    )


class SessionAffinityCheck:
    """ASGI middleware: refuse, clearly, the session ids this replica did not issue.

    Args:
        app: The MCP streamable HTTP app.
        replica_id: This replica's name (shown in the error).
    """

    def __init__(self, app: ASGIApp, *, replica_id: str) -> None:
        self.app = app
        self.replica_id = replica_id
        self._known: OrderedDict[str, None] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asked = dict(scope["headers"]).get(SESSION_HEADER)
        if asked is not None:
            session_id = asked.decode("latin-1")
            if session_id not in self._known:
                await _refuse(send, wrong_replica_text(session_id, self.replica_id))
                return
            await self.app(scope, receive, send)
            if scope["method"] == "DELETE":
                self._known.pop(session_id, None)
            return

        async def note_session(message: Message) -> None:
            if message["type"] == "http.response.start":
                issued = dict(message.get("headers", [])).get(SESSION_HEADER)
                if issued is not None:
                    self._known[issued.decode("latin-1")] = None
                    while len(self._known) > MAX_KNOWN_SESSIONS:
                        self._known.popitem(last=False)
            await send(message)

        await self.app(scope, receive, note_session)


async def _refuse(send: Send, message: str) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": _INVALID_REQUEST, "message": message}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 404,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
