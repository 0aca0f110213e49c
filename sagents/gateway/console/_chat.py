"""The AG-UI endpoints of a chat page, shared by the console's Chat page and ``sagents chat
--web`` (docs/chat.md): ``POST`` of a ``RunAgentInput``, and the reader of a thread's
conversation for a (re)loaded page; and who a request acts as on them.

The threads themselves are :class:`sagents.agent.ag_ui.AgUiThreads` (the command composing the
page passes them in: the gateway does not import the agent loop).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sagents.errors import StoreUnavailableError
from sagents.gateway._web_auth import Principal, WebAuth
from sagents.gateway.console._auth import ConsoleAuth

__all__ = ["ChatEndpoints", "ChatThreads", "request_principal"]


class ChatThreads(Protocol):
    """What a chat page needs of the AG-UI threads."""

    async def handle(self, request: Request, owner: str) -> Response:
        """Answer one ``RunAgentInput``."""
        ...

    async def page_state(self, thread_id: str, owner: str) -> dict[str, Any]:
        """What a (re)loaded page shows of a thread."""
        ...


def request_principal(
    web: WebAuth, auth: ConsoleAuth, request: Request, cookie: str, *, state_changing: bool
) -> Principal | None:
    """A verified bearer token's principal, else the logged-in session's behind the cookie
    ``cookie``, with its CSRF token (``X-CSRF-Token``) for a request that changes something."""
    bearer = web.bearer(request)
    if bearer is not None:
        return bearer
    session = auth.session(request.cookies.get(cookie))
    if session is None or session.closed or session.principal is None:
        return None
    if state_changing and not auth.csrf_ok(session, request.headers.get("x-csrf-token")):
        return None
    return session.principal


class ChatEndpoints:
    """The route and the conversation reader, as the identity of the request's principal: a
    thread belongs to the identity that opened it (another gets 404 and sees nothing).

    Args:
        threads: The threads (called per request: they may open after the app is built).
        caller: Who a request is, given whether it changes something; None: 401.
    """

    def __init__(
        self,
        threads: Callable[[], ChatThreads],
        caller: Callable[[Request, bool], Principal | None],
    ) -> None:
        self.threads = threads
        self.caller = caller

    async def run(self, request: Request) -> Response:
        """``POST``: a ``RunAgentInput`` in, AG-UI events out."""
        principal = self.caller(request, True)
        if principal is None:
            return _refused()
        return await self.threads().handle(request, principal.identity)

    async def conversation(self, request: Request) -> Response:
        """``GET ?thread=ID``: the thread's messages, state and waiting requests."""
        principal = self.caller(request, False)
        if principal is None:
            return _refused()
        thread_id = request.query_params.get("thread", "")
        try:
            found = await self.threads().page_state(thread_id, principal.identity)
        except StoreUnavailableError as error:
            return JSONResponse({"error": "store_unavailable", "message": str(error)}, 503)
        return JSONResponse(found)


def _refused() -> JSONResponse:
    return JSONResponse(
        {"error": "unauthorized", "message": "log in (the login URL), with the page's CSRF token"},
        status_code=401,
    )
