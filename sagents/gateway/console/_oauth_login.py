"""Logging into the console through the gateway's OAuth authorization server.

With an ``oauth`` section that names the gateway's client (``clientId``, ``clientSecretEnv``),
the console's login page offers the authorization server besides the operator secret and the
static tokens (docs/console.md, "Security"): authorization code with PKCE (S256) and the RFC
8707 ``resource`` of ``/mcp``, as the MCP authorization specification has clients do
(2025-11-25 "Authorization", "Authorization Code Protection"). The ``state`` is random, kept
on the server for :data:`PENDING_S` and bound to the browser by a cookie (``SameSite=Lax``, so
that the redirect back from the authorization server carries it); a present ``iss`` must be the
issuer (RFC 9207 §2.4). The access token the code is exchanged for is checked exactly as
``/mcp`` checks one (:class:`~sagents.gateway._oauth.AccessTokenVerifier`, the required
scopes included), and its subject becomes the console session's principal: the same principal
its MCP sessions have, so it sees and answers their approvals and nobody else's.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

import httpx2
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from sagents.gateway._http_security import Credential
from sagents.gateway._oauth import FETCH_TIMEOUT_S, AuthorizationServerUnavailable, TokenRejected
from sagents.gateway._protected_resource import ProtectedResource
from sagents.gateway._web_auth import Principal

__all__ = [
    "CALLBACK_PATH",
    "LOGIN_PATH",
    "PENDING_S",
    "STATE_COOKIE",
    "ConsoleOAuthLogin",
    "LoginFailed",
]

LOGIN_PATH = "/console/oauth/login"
CALLBACK_PATH = "/console/oauth/callback"
STATE_COOKIE = "sagents_oauth_state"
PENDING_S = 600  # seconds a started login may take
_PENDING_MAX = 1024  # started logins kept, oldest dropped


class LoginFailed(Exception):
    """A login through the authorization server did not succeed; ``str()`` says why."""


class ConsoleOAuthLogin:
    """The console's login through the authorization server of ``resource``.

    Args:
        resource: ``/mcp``'s protected resource (its issuer, verifier, required scopes).
        client_id: The gateway's client at the authorization server.
        client_secret: Its secret.
        redirect_uri: ``<public URL>/console/oauth/callback``.
        secure_cookies: Send the state cookie with ``Secure`` (TLS, or a TLS proxy in front).
    """

    def __init__(
        self,
        resource: ProtectedResource,
        *,
        client_id: str,
        client_secret: str,
        redirect_uri: str,
        secure_cookies: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.resource = resource
        self.client_id = client_id
        self._secret = client_secret
        self.redirect_uri = redirect_uri
        self.secure_cookies = secure_cookies
        self._monotonic = monotonic
        self._pending: OrderedDict[str, tuple[str, float]] = OrderedDict()  # state: verifier

    async def start(self) -> tuple[str, str]:
        """A new login: the authorization URL to send the browser to, and its ``state``.

        Raises:
            AuthorizationServerUnavailable: the issuer's metadata cannot be had.
        """
        metadata = await self.resource.verifier.issuer_metadata()
        endpoint = metadata.get("authorization_endpoint")
        if not isinstance(endpoint, str):
            raise AuthorizationServerUnavailable("its metadata has no authorization_endpoint")
        state = secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48)
        self._pending[state] = (verifier, self._monotonic() + PENDING_S)
        while len(self._pending) > _PENDING_MAX:
            self._pending.popitem(last=False)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": " ".join(self.resource.required_scopes),
            "resource": self.resource.resource,
            "code_challenge": challenge.decode().rstrip("="),
            "code_challenge_method": "S256",
            "state": state,
        }
        return f"{endpoint}?{urlencode({k: v for k, v in query.items() if v})}", state

    async def finish(self, request: Request) -> Principal:
        """The principal of a callback request (``code``, ``state``, ``iss``).

        Raises:
            LoginFailed: an unknown or expired state, one not of this browser, an error or
                another issuer in the answer, a code the server does not exchange, or a
                token ``/mcp`` would refuse.
            AuthorizationServerUnavailable: the authorization server cannot be reached.
        """
        query = request.query_params
        state = query.get("state") or ""
        pending = self._pending.pop(state, None)
        if pending is None or self._monotonic() > pending[1]:
            raise LoginFailed("that login expired or was not started here: log in again")
        if not secrets.compare_digest(request.cookies.get(STATE_COOKIE, ""), state):
            raise LoginFailed("that login was started in another browser: log in again")
        issuer = self.resource.verifier.config.issuer
        if "iss" in query and query["iss"] != issuer:
            raise LoginFailed("the answer came from another authorization server")
        if "error" in query or "code" not in query:
            raise LoginFailed(f"the authorization server said {query.get('error', 'no code')!r}")
        token = await self._exchange(query["code"], pending[0])
        try:
            info = await self.resource.verifier.verify(token)
        except TokenRejected as error:
            raise LoginFailed(f"the token is not accepted: {error}") from None
        missing = [s for s in self.resource.required_scopes if s not in info.scopes]
        if missing:
            raise LoginFailed(f"the token lacks the scopes {' '.join(missing)}")
        credential = Credential(token, subject=info.subject, issuer=info.issuer, scopes=info.scopes)
        return Principal(operator=False, identity=credential.identity)

    async def _exchange(self, code: str, verifier: str) -> str:
        endpoint = (await self.resource.verifier.issuer_metadata()).get("token_endpoint")
        if not isinstance(endpoint, str):
            raise AuthorizationServerUnavailable("its metadata has no token_endpoint")
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
            "resource": self.resource.resource,
        }
        try:
            async with httpx2.AsyncClient(timeout=FETCH_TIMEOUT_S) as http:
                answer = await http.post(endpoint, data=data, auth=(self.client_id, self._secret))
        except httpx2.HTTPError as error:
            raise AuthorizationServerUnavailable(
                f"{endpoint} cannot be reached ({type(error).__name__})"
            ) from None
        try:
            body = answer.json()
        except ValueError:
            body = None
        token = body.get("access_token") if isinstance(body, dict) else None
        if answer.status_code != 200 or not isinstance(token, str):
            reason = body.get("error") if isinstance(body, dict) else None
            raise LoginFailed(
                f"the code was not exchanged for a token ({reason or answer.status_code})"
            )
        return token

    def routes(
        self,
        logged_in: Callable[[Request, Principal], Response],
        failed: Callable[[Request, str], Response],
    ) -> list[Route]:
        """The two console routes: ``LOGIN_PATH`` (sends the browser to the authorization
        server) and ``CALLBACK_PATH`` (``logged_in`` with the principal, or ``failed`` with
        the reason)."""

        async def login(request: Request) -> Response:
            try:
                url, state = await self.start()
            except AuthorizationServerUnavailable:
                return failed(request, "the authorization server cannot be reached: try later")
            response = RedirectResponse(url, 303)
            response.set_cookie(
                STATE_COOKIE,
                state,
                max_age=PENDING_S,
                path=CALLBACK_PATH,
                httponly=True,
                samesite="lax",  # sent on the redirect back from the authorization server
                secure=self.secure_cookies or request.url.scheme == "https",
            )
            return response

        async def callback(request: Request) -> Response:
            try:
                principal = await self.finish(request)
            except LoginFailed as error:
                return failed(request, f"Not logged in: {error}.")
            except AuthorizationServerUnavailable:
                return failed(request, "the authorization server cannot be reached: try later")
            response = logged_in(request, principal)
            response.delete_cookie(STATE_COOKIE, path=CALLBACK_PATH)
            return response

        handlers: list[tuple[str, Callable[[Request], Awaitable[Response]]]] = [
            (LOGIN_PATH, login),
            (CALLBACK_PATH, callback),
        ]
        return [Route(path, handler, methods=["GET"]) for path, handler in handlers]
