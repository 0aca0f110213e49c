"""Logins to ``"auth": "oauth"`` upstream servers started from the web console's Servers page
(docs/oauth.md, "Logging in"; docs/console.md).

A person presses "Authorize": :meth:`UpstreamLogins.start` runs the MCP SDK's flow
(:func:`sagents.mcp._oauth.login`) in the gateway's task group, for the principal of that
console session, with the console's callback as the redirect URI, and hands back the
authorization URL the browser is sent to. The authorization server sends the browser back
to the callback, which :meth:`UpstreamLogins.finish` gives the code to: only the console
session that started the flow may finish it (its ``state``, single use), so that nobody can
bind their upstream account to someone else's principal (login CSRF, RFC 6749 §10.12).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult
from mcp.shared.exceptions import MCPError

from sagents.errors import StoreError
from sagents.mcp import StreamableHttpServerParameters
from sagents.mcp._oauth import LoginVault, login

__all__ = ["LOGIN_WAIT_S", "UpstreamLogins"]

logger = logging.getLogger(__name__)

LOGIN_WAIT_S = 600.0
"""Seconds a started login waits for the browser to come back."""

_URL_WAIT_S = 30.0  # discovery and registration before the authorization URL is known


@dataclass
class _Flow:
    server: str
    owner: str  # the console session that started it
    arrived: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    result: AuthorizationCodeResult | None = None
    failure: str | None = None


class UpstreamLogins:
    """The ``"auth": "oauth"`` servers of a gateway and the logins in progress for them.

    Args:
        vault: Where the logins are kept.
        servers: The servers, by name.
    """

    def __init__(
        self, vault: LoginVault, servers: Mapping[str, StreamableHttpServerParameters]
    ) -> None:
        self.vault = vault
        self.servers = dict(servers)
        self.wait_s = LOGIN_WAIT_S
        """Seconds a started login waits for the browser to come back."""
        self._flows: dict[str, _Flow] = {}  # by the flow's OAuth state
        self._tg: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[UpstreamLogins]:
        """Run the logins' tasks until the block ends (the gateway's lifetime)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield self
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    async def logged_in(self, server: str, principal: str) -> bool:
        """Whether ``principal`` holds a usable login to ``server`` (False when the store
        cannot be read now)."""
        try:
            return await self.vault.has_login(server, principal)
        except StoreError:
            return False

    async def start(self, server: str, principal: str, redirect_uri: str, owner: str) -> str:
        """Start ``principal``'s login to ``server``; the authorization URL to send the
        browser to.

        Raises:
            KeyError: no such server.
            RuntimeError: the flow failed before an authorization URL (the reason), or the
                gateway is stopping.
        """
        params = self.servers[server]
        if self._tg is None:
            raise RuntimeError("the gateway is stopping")
        flow = _Flow(server=server, owner=owner)
        shown: list[str] = []
        url_ready = anyio.Event()

        async def show(url: str) -> None:
            shown.append(url)
            url_ready.set()

        async def wait() -> AuthorizationCodeResult:
            with anyio.fail_after(self.wait_s):
                await flow.arrived.wait()
            assert flow.result is not None
            return flow.result

        async def run() -> None:
            try:
                await login(
                    self.vault,
                    server,
                    params,
                    principal,
                    redirect_uri=redirect_uri,
                    show_url=show,
                    wait_for_redirect=wait,
                )
            except (OAuthFlowError, OSError, MCPError, StoreError, TimeoutError) as error:
                flow.failure = str(error) or type(error).__name__
                logger.warning("the login to MCP server %r failed: %s", server, flow.failure)
            except Exception as error:  # noqa: BLE001 - the boundary of one person's login
                flow.failure = f"{type(error).__name__}: {error}"
                logger.warning("the login to MCP server %r failed: %s", server, flow.failure)
            finally:
                flow.done.set()
                url_ready.set()
                for state, known in list(self._flows.items()):
                    if known is flow:
                        del self._flows[state]

        self._tg.start_soon(run)
        with anyio.move_on_after(_URL_WAIT_S):
            await url_ready.wait()
        if not shown:
            raise RuntimeError(flow.failure or "no authorization URL in time")
        state = parse_qs(urlsplit(shown[0]).query).get("state", [""])[0]
        self._flows[state] = flow
        return shown[0]

    async def finish(
        self, owner: str, state: str, code: str, iss: str | None, error: str | None
    ) -> tuple[str, str | None]:
        """Hand the browser's redirect to the flow it belongs to and wait for its end.

        Returns:
            ``(server, failure)``: the server logged in to, and None or why it failed.

        Raises:
            LookupError: no flow of this console session has that state (unknown, used,
                expired, or another session's).
        """
        flow = self._flows.get(state)
        if flow is None or flow.owner != owner:
            raise LookupError("no login of this console session is waiting for that answer")
        del self._flows[state]  # single use
        flow.result = AuthorizationCodeResult(
            code=code if error is None else "", state=state, iss=iss
        )
        flow.arrived.set()
        with anyio.move_on_after(_URL_WAIT_S):
            await flow.done.wait()
        if error is not None:
            return flow.server, f"the authorization server answered {error}"
        return flow.server, flow.failure if flow.done.is_set() else "no answer in time"
