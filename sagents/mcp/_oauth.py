"""Upstream servers that need an OAuth login (``"auth": "oauth"``; docs/oauth.md).

The gateway is an OAuth client of such a server through the MCP SDK's client support
(:class:`mcp.client.auth.OAuthClientProvider`: discovery from the server's ``401`` and its
Protected Resource Metadata, dynamic client registration or a configured client id,
authorization code + PKCE, refresh). What is ours:

- :class:`LoginVault`: each principal's login to each server (tokens, the registered client,
  the authorization server's metadata) sealed with Fernet (``cryptography``; AES-128-CBC with
  HMAC-SHA256) under the key of ``SAGENTS_SECRET_KEY`` (else one generated and kept 0600 in the
  data directory: :mod:`sagents.mcp._secret_key`) before it reaches the store. A record the
  key cannot open counts as no login (``needs_login``), never as an error, and stays in the
  store for the right key.
- :class:`PrincipalConnections`: one connection per principal and server, each with that
  principal's login only, so that one principal's token never serves another's call. A
  principal without a login gets :class:`~sagents.errors.NeedsLoginError` at once, with how to
  log in; the flow never waits for a person inside a call.
- :func:`login`: the interactive login of ``sagents auth login`` and the console's
  "Authorize": the SDK's flow with the caller's redirect and callback handlers.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import anyio
import httpx2
from cryptography.fernet import InvalidToken, MultiFernet
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.dispatcher import ProgressFnT
from pydantic import AnyUrl, ValidationError

from sagents.core._result import ToolResult
from sagents.errors import NeedsLoginError, StoreError, UpstreamUnavailableError
from sagents.mcp._params import StreamableHttpServerParameters, UpstreamOAuth
from sagents.mcp._secret_key import (
    SECRET_KEY_ENV,
    SECRET_KEY_FILE,
    load_secret_key,
    rotate_secret_key,
)
from sagents.mcp._settings import ServerSettings
from sagents.mcp._supervisor import MCPSupervisor
from sagents.store._protocols import LoginStore

__all__ = [
    "MAX_OPEN_CONNECTIONS",
    "REFRESH_MARGIN_S",
    "SECRET_KEY_ENV",
    "SECRET_KEY_FILE",
    "LoginRecord",
    "LoginVault",
    "PrincipalConnections",
    "load_secret_key",
    "login",
    "login_command",
    "rotate_secret_key",
]

logger = logging.getLogger(__name__)

MAX_OPEN_CONNECTIONS = 256
"""Per-principal connections of one server kept open at most; beyond, the least recently
used idle one is closed (reopened at that principal's next call)."""

REFRESH_MARGIN_S = 60.0
"""An access token is refreshed this many seconds before it expires (at most half its
lifetime before: a token living 30 s is refreshed after 15 s)."""


def _refresh_at(record: LoginRecord) -> float | None:
    """When the record's access token is due for a refresh (None: it says no expiry)."""
    if record.expires_at is None:
        return None
    lifetime = record.tokens.expires_in if record.tokens is not None else None
    margin = REFRESH_MARGIN_S if lifetime is None else min(REFRESH_MARGIN_S, int(lifetime) / 2)
    return record.expires_at - margin


@dataclass
class LoginRecord:
    """What the gateway keeps of one principal's login to one server (sealed in the store).

    Attributes:
        tokens: The tokens, None once they were refused (the login must be given again).
        expires_at: When the access token expires (seconds since the epoch), if it says.
        client: The OAuth client registered for the server (or the configured client id).
        metadata: The authorization server's metadata, as discovered at login.
        resource: The server's Protected Resource Metadata, as discovered at login.
    """

    tokens: OAuthToken | None = None
    expires_at: float | None = None
    client: OAuthClientInformationFull | None = None
    metadata: OAuthMetadata | None = None
    resource: ProtectedResourceMetadata | None = None

    def to_json(self) -> bytes:
        """The record as JSON bytes (what is sealed)."""

        def dumped(model: Any) -> Any:
            return None if model is None else model.model_dump(mode="json", exclude_none=True)

        return json.dumps(
            {
                "tokens": dumped(self.tokens),
                "expires_at": self.expires_at,
                "client": dumped(self.client),
                "metadata": dumped(self.metadata),
                "resource": dumped(self.resource),
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> LoginRecord:
        """The record of :meth:`to_json`'s bytes.

        Raises:
            ValueError: not such a record.
        """
        value = json.loads(data)
        if not isinstance(value, dict):
            raise ValueError("a login record is a JSON object")

        def parsed(model: Any, key: str) -> Any:
            item = value.get(key)
            return None if item is None else model.model_validate(item)

        expires_at = value.get("expires_at")
        return cls(
            tokens=parsed(OAuthToken, "tokens"),
            expires_at=float(expires_at) if expires_at is not None else None,
            client=parsed(OAuthClientInformationFull, "client"),
            metadata=parsed(OAuthMetadata, "metadata"),
            resource=parsed(ProtectedResourceMetadata, "resource"),
        )


class LoginVault:
    """Every principal's login to every ``"auth": "oauth"`` server, sealed in a store.

    Args:
        store: Where sealed records are kept (the gateway's store).
        key: The key that seals them (:func:`load_secret_key`).
        login_hint: How a principal logs in to a server, for the ``needs_login`` error:
            ``login_hint(server, principal)`` (a console URL, or the ``sagents auth login``
            command).
    """

    def __init__(
        self,
        store: LoginStore,
        key: MultiFernet,
        *,
        login_hint: Callable[[str, str], str] | None = None,
    ) -> None:
        self.store = store
        self._key = key
        self._hint = login_hint or login_command

    def login_hint(self, server: str, principal: str) -> str:
        """How ``principal`` logs in to ``server``."""
        return self._hint(server, principal)

    async def load(self, server: str, principal: str) -> LoginRecord | None:
        """``principal``'s login to ``server``; None when there is none or the key cannot
        open it (logged; the record stays for the right key).

        Raises:
            StoreError: the store cannot be used now.
        """
        sealed = await self.store.load(server, principal)
        if sealed is None:
            return None
        try:
            return LoginRecord.from_json(self._key.decrypt(sealed))
        except InvalidToken:
            logger.warning(
                "the login of a principal to MCP server %r cannot be opened with the key of "
                "%s (or %s): it counts as no login until the right key is given",
                server,
                SECRET_KEY_ENV,
                SECRET_KEY_FILE,
            )
        except (ValueError, ValidationError) as error:
            logger.warning(
                "the login of a principal to MCP server %r is unreadable: %s", server, error
            )
        return None

    async def save(self, server: str, principal: str, record: LoginRecord) -> None:
        """Seal and keep ``record``."""
        await self.store.save(server, principal, self._key.encrypt(record.to_json()))

    async def forget(self, server: str, principal: str) -> bool:
        """Drop ``principal``'s login to ``server``; whether there was one."""
        return await self.store.delete(server, principal)

    async def has_login(self, server: str, principal: str) -> bool:
        """Whether ``principal`` holds usable tokens for ``server``."""
        record = await self.load(server, principal)
        return record is not None and record.tokens is not None

    def provider(
        self,
        server: str,
        params: StreamableHttpServerParameters,
        principal: str,
        *,
        redirect_uri: str,
        record: LoginRecord | None,
        redirect_handler: Callable[[str], Awaitable[None]],
        callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]],
        interactive: bool = True,
    ) -> OAuthClientProvider:
        """The SDK's OAuth client for ``principal`` on ``server``, starting from ``record``
        (None: the vault's, read at its first request), keeping what it learns (tokens,
        refreshed tokens, a registered client) in the vault.

        ``interactive``: a person logs in through ``redirect_uri`` (a client registered for
        another redirect URI is registered again); else the login is only used, and the
        client it was given with is kept.
        """
        oauth = params.oauth
        scopes = " ".join(oauth.scopes) if oauth is not None and oauth.scopes else None
        storage = _SealedStorage(
            self, server, principal, record, redirect_uri, oauth, interactive=interactive
        )
        provider = OAuthClientProvider(
            params.url,
            OAuthClientMetadata(
                redirect_uris=[AnyUrl(redirect_uri)],
                client_name="sagents gateway",
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method="none",
                scope=scopes,
            ),
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )
        storage.provider = provider
        if record is not None:
            storage.adopt(record)
        return provider


def login_command(server: str, principal: str) -> str:
    """The command that logs ``principal`` in to ``server`` (``--principal`` for anyone but
    the local operator)."""
    who = "" if not principal else " --principal <your subject>"
    return f"sagents auth login {server}{who}"


class _SealedStorage:
    """The SDK's ``TokenStorage`` for one principal and server, kept sealed in the vault.

    Given no record, it reads the vault's on the SDK's first question (the SDK asks once per
    client, at its first request).
    """

    def __init__(
        self,
        vault: LoginVault,
        server: str,
        principal: str,
        record: LoginRecord | None,
        redirect_uri: str,
        oauth: UpstreamOAuth | None,
        *,
        interactive: bool,
    ) -> None:
        self.vault = vault
        self.interactive = interactive
        self.server = server
        self.principal = principal
        self.record = record
        self.redirect_uri = redirect_uri
        self.oauth = oauth
        self.provider: OAuthClientProvider | None = None
        self.replaced: OAuthToken | None = None  # the tokens the last refresh replaced

    def adopt(self, record: LoginRecord) -> None:
        """Start from ``record``: its client (when usable here) and what the SDK learns only
        from a ``401`` (the authorization server's metadata, the token's expiry). Without
        them a refresh after a restart would go to a guessed token endpoint, and an expired
        token would be sent once before being refreshed."""
        if self.oauth is not None and self.oauth.client_id is not None:
            record.client = OAuthClientInformationFull(
                client_id=self.oauth.client_id,
                redirect_uris=[AnyUrl(self.redirect_uri)],
                token_endpoint_auth_method="none",
                grant_types=["authorization_code", "refresh_token"],
            )
        elif (
            self.interactive
            and record.client is not None
            and self.redirect_uri not in [str(uri) for uri in record.client.redirect_uris or ()]
        ):
            record.client = None  # registered for another redirect URI: register again
        self.record = record
        if self.provider is None:
            return
        context = self.provider.context
        context.oauth_metadata = record.metadata
        context.protected_resource_metadata = record.resource
        if record.resource is not None and record.resource.authorization_servers:
            context.auth_server_url = str(record.resource.authorization_servers[0])
        if record.expires_at is not None:
            context.token_expiry_time = _refresh_at(record)

    async def _held(self) -> LoginRecord:
        if self.record is None:
            self.adopt(await self.vault.load(self.server, self.principal) or LoginRecord())
        assert self.record is not None
        return self.record

    async def get_tokens(self) -> OAuthToken | None:
        return (await self._held()).tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        record = await self._held()
        if not self.interactive and record.tokens is None:
            # Only a login gives first tokens; a connection only refreshes the ones it
            # read. (It never replaces a record it could not open: that one is kept for the
            # right key.)
            return
        # A connection keeps its refreshed tokens only over the ones it read: a login given
        # since (again, or by another replica) or a logout is newer than its refresh.
        keep = self.interactive or await self._still_stored(record.tokens)
        self.replaced = record.tokens
        record.tokens = tokens
        record.expires_at = (
            time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        )
        if self.provider is not None:
            context = self.provider.context
            record.metadata = context.oauth_metadata or record.metadata
            record.resource = context.protected_resource_metadata or record.resource
            if record.expires_at is not None:
                context.token_expiry_time = _refresh_at(record)
        if keep:
            await self.vault.save(self.server, self.principal, record)

    async def _still_stored(self, tokens: OAuthToken | None) -> bool:
        """Whether the vault still holds ``tokens`` (the ones this connection read)."""
        stored = await self.vault.load(self.server, self.principal)
        return stored is not None and stored.tokens is not None and stored.tokens == tokens

    def holds(self, stored: OAuthToken | None) -> bool:
        """Whether ``stored`` (the vault's tokens now) are this connection's: the ones it
        uses, or those its refresh is replacing (a call reading the vault while the refresh
        is being kept); True before it read any."""
        if self.record is None:
            return True
        return stored is not None and stored in (self.record.tokens, self.replaced)

    async def drop_refused(self) -> None:
        """The upstream refused this connection's tokens (revoked, or the refresh failed):
        drop them from the vault. Only them: a login given since (again, or through another
        replica) is not the one refused, and the next connection uses it."""
        held = await self.vault.load(self.server, self.principal)
        used = self.record.tokens if self.record is not None else None
        if held is not None and held.tokens is not None and held.tokens == used:
            held.tokens = None
            await self.vault.save(self.server, self.principal, held)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return (await self._held()).client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        record = await self._held()
        record.client = client_info
        if self.interactive:  # a connection registers nothing it could keep: see set_tokens
            await self.vault.save(self.server, self.principal, record)


class _LoginNeeded(NeedsLoginError):
    """Raised by the SDK's flow instead of waiting for a person inside a connection (the
    authorization URL it would have shown is not kept: it is of no use to anyone else)."""


class _QuietLoginNeeded(logging.Filter):
    """Drops the SDK's traceback of a flow that stopped at :class:`_LoginNeeded`: that is the
    expected answer of a connection without a login, said once by the connection's status."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _LoginNeeded))


logging.getLogger("mcp.client.auth.oauth2").addFilter(_QuietLoginNeeded())


class PrincipalConnections:
    """The connections of one ``"auth": "oauth"`` server, one per principal, each holding only
    that principal's login.

    Args:
        name: The server's configured name.
        params: Where it is (``params.oauth`` set).
        settings: Its settings (timeouts, concurrency...).
        vault: The logins.
        redirect_uri: The redirect URI the logins were given with (a connection never asks
            for a login, but the SDK's client must name one).
        max_open: Connections kept open at most (:data:`MAX_OPEN_CONNECTIONS`): opening one
            more closes the least recently used idle one.
    """

    def __init__(
        self,
        name: str,
        params: StreamableHttpServerParameters,
        settings: ServerSettings,
        vault: LoginVault,
        *,
        redirect_uri: str = "http://127.0.0.1/callback",
        max_open: int = MAX_OPEN_CONNECTIONS,
    ) -> None:
        self.name = name
        self.params = params
        self.settings = settings
        self.vault = vault
        self.redirect_uri = redirect_uri
        self.max_open = max_open
        self._open: OrderedDict[str, MCPSupervisor] = OrderedDict()  # least recent first
        self._calls: Counter[str] = Counter()  # calls running on each connection
        self._locks: dict[str, anyio.Lock] = {}
        self._refused: set[str] = set()
        self._storages: dict[str, _SealedStorage] = {}  # each open connection's login

    def auth(self, principal: str) -> OAuthClientProvider:
        """A new SDK OAuth client of ``principal``'s connection (reading the login from the
        vault at its first request): a login it would need is refused
        (:class:`NeedsLoginError`) rather than waited for."""

        async def refuse(_authorization_url: str) -> None:
            self._refused.add(principal)
            storage = provider.context.storage
            if isinstance(storage, _SealedStorage):
                await storage.drop_refused()
            raise self.needs_login(principal, _LoginNeeded)

        async def no_callback() -> AuthorizationCodeResult:
            raise self.needs_login(principal, _LoginNeeded)

        provider = self.vault.provider(
            self.name,
            self.params,
            principal,
            redirect_uri=self.redirect_uri,
            record=None,
            redirect_handler=refuse,
            callback_handler=no_callback,
            interactive=False,
        )
        if isinstance(provider.context.storage, _SealedStorage):
            self._storages[principal] = provider.context.storage
        return provider

    def needs_login(
        self, principal: str, kind: type[NeedsLoginError] = NeedsLoginError
    ) -> NeedsLoginError:
        """The error of a call of ``principal`` without a usable login."""
        hint = self.vault.login_hint(self.name, principal)
        return kind(
            f"MCP server {self.name!r} needs a login: log in with {hint}",
            hint=hint,
            details={"server": self.name, "login": hint},
        )

    async def call(
        self,
        principal: str,
        tool: str,
        arguments: dict[str, Any],
        progress_callback: ProgressFnT | None = None,
    ) -> ToolResult:
        """Call ``tool`` on ``principal``'s own connection.

        Raises:
            NeedsLoginError: ``principal`` has no usable login (none, refused upstream, or one
                the key cannot open).
            UpstreamUnavailableError, UpstreamProtocolError, ...: as
                :meth:`MCPSupervisor.call_tool_raising`.
        """
        supervisor = await self._connection(principal)  # counted in self._calls
        try:
            return await supervisor.call_tool_raising(
                self.name, tool, arguments, progress_callback=progress_callback
            )
        except UpstreamUnavailableError:
            if principal in self._refused:
                await self._close(principal)
                raise self.needs_login(principal) from None
            raise
        finally:
            self._calls[principal] -= 1
            if not self._calls[principal]:
                del self._calls[principal]

    def connected(self) -> list[str]:
        """The principals whose connection is open, least recently used first."""
        return list(self._open)

    def _use(self, principal: str) -> MCPSupervisor:
        self._open.move_to_end(principal)
        self._calls[principal] += 1
        return self._open[principal]

    async def _release_idle(self) -> None:
        """Close the least recently used idle connections beyond ``max_open``."""
        for principal in list(self._open):
            if len(self._open) <= self.max_open:
                return
            if not self._calls[principal]:
                await self._close(principal)

    async def _connection(self, principal: str) -> MCPSupervisor:
        lock = self._locks.setdefault(principal, anyio.Lock())
        async with lock:
            # The store is read at every call: a logout or a new login given elsewhere
            # (sagents auth from another shell, another replica) ends the open connection.
            # A store that cannot be read now leaves an open connection serving.
            try:
                record = await self.vault.load(self.name, principal)
            except StoreError:
                if principal not in self._open or principal in self._refused:
                    raise
                return self._use(principal)
            tokens = record.tokens if record is not None else None
            # (looked up after the store's answer: another's opening may have closed it)
            supervisor = self._open.get(principal)
            if supervisor is not None and principal not in self._refused:
                storage = self._storages.get(principal)
                if storage is None or storage.holds(tokens):
                    return self._use(principal)
            if supervisor is not None:
                await self._close(principal)
            if record is None or record.tokens is None:
                raise self.needs_login(principal)
            self._refused.discard(principal)
            supervisor = MCPSupervisor(log_dir=self.settings.log_dir)
            params = replace(self.params, auth=partial(self.auth, principal))
            try:
                await supervisor.add_server(self.name, params, self.settings, wait=True)
            except UpstreamUnavailableError:
                await supervisor.aclose()
                if principal in self._refused:
                    raise self.needs_login(principal) from None
                raise
            self._open[principal] = supervisor
            used = self._use(principal)
            await self._release_idle()
            return used

    async def _close(self, principal: str) -> None:
        supervisor = self._open.pop(principal, None)
        self._storages.pop(principal, None)
        if supervisor is not None:
            with anyio.CancelScope(shield=True):
                await supervisor.aclose()

    async def forget(self, principal: str) -> None:
        """Close ``principal``'s connection (after a logout)."""
        await self._close(principal)

    async def aclose(self) -> None:
        """Close every principal's connection."""
        for principal in list(self._open):
            await self._close(principal)


async def login(
    vault: LoginVault,
    server: str,
    params: StreamableHttpServerParameters,
    principal: str,
    *,
    redirect_uri: str,
    show_url: Callable[[str], Awaitable[None]],
    wait_for_redirect: Callable[[], Awaitable[AuthorizationCodeResult]],
) -> list[str]:
    """Log ``principal`` in to ``server`` interactively and keep the login in ``vault``.

    The SDK's flow runs as a client of the server would: its ``401`` and metadata name the
    authorization server, a client is registered there (or the configured one used), and
    ``show_url`` is given the authorization URL for the person to open; ``wait_for_redirect``
    returns the code and state the authorization server sent to ``redirect_uri``.

    Returns:
        The server's tool names, listed with the new login.

    Raises:
        OAuthFlowError (``mcp.client.auth``): the flow failed (state mismatch, refused code...).
        OSError, httpx2.HTTPError, MCPError: the server could not be reached
            (``httpx2.ReadTimeout``: it or its authorization server did not answer within
            three times ``params.timeout``, the person's time apart).
    """
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    # What is not the person's time is bounded as a whole: the SDK sends the discovery,
    # registration and token requests of its flow without the client's timeouts, and an
    # authorization server that never answers would hold the login for ever.
    steps_s = 3 * params.timeout
    scope = anyio.CancelScope(deadline=anyio.current_time() + steps_s)

    async def show(url: str) -> None:
        scope.deadline = math.inf  # the person's time, bounded by wait_for_redirect
        await show_url(url)

    async def redirected() -> AuthorizationCodeResult:
        result = await wait_for_redirect()
        scope.deadline = anyio.current_time() + steps_s
        return result

    held = await vault.load(server, principal)
    provider = vault.provider(
        server,
        params,
        principal,
        redirect_uri=redirect_uri,
        # a new login: new tokens; the client registered before is kept for its redirect URI
        record=LoginRecord(client=held.client if held is not None else None),
        redirect_handler=show,
        callback_handler=redirected,
    )
    http = httpx2.AsyncClient(
        headers=dict(params.headers or {}),
        timeout=httpx2.Timeout(params.timeout, read=None),
        auth=provider,
    )
    tools: list[str] = []
    with scope:
        async with http, Client(streamable_http_client(params.url, http_client=http)) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
    if scope.cancelled_caught:
        raise httpx2.ReadTimeout(
            f"MCP server {server!r} or its authorization server did not answer within {steps_s:g} s"
        )
    return tools
