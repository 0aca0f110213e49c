"""An upstream server's resource subscriptions (docs/mcp.md, "Resource subscriptions").

One :class:`UpstreamSubscriptions` per connection keeps the URIs someone wants to hear about,
and subscribes to them on the server in the way its protocol era has:

- handshake era (2025-06-18, 2025-11-25): ``resources/subscribe`` / ``resources/unsubscribe``
  when the server announced ``resources.subscribe`` (MCP spec 2025-11-25, "Resources",
  "Subscriptions"); ``notifications/resources/updated`` then arrive on the session;
- 2026-07-28: one ``subscriptions/listen`` stream per URI with ``resourceSubscriptions``
  (2026-07-28, "Subscriptions"; ``resources/subscribe`` was removed).

The wanted set outlives the session: after a restart the connection subscribes again
(:meth:`UpstreamSubscriptions.restore`). Updates are level triggers ("this changed, read it
again"), so they are coalesced per URI; an update for a URI nobody subscribed to (nor a
sub-resource of one) is dropped, and at most :data:`MAX_PENDING_UPDATES` distinct URIs wait,
so a flooding server costs a bounded amount of memory.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import anyio
import anyio.abc
from mcp import ClientSession
from mcp.client.subscriptions import listen
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = [
    "LISTEN_ACK_TIMEOUT",
    "MAX_PENDING_UPDATES",
    "MAX_UPSTREAM_SUBSCRIPTIONS",
    "ResourceUpdatedCallback",
    "UpstreamSubscriptions",
    "covers",
    "supports_subscribe",
]

logger = logging.getLogger(__name__)

MAX_UPSTREAM_SUBSCRIPTIONS = 256
"""Distinct URIs one connection subscribes to at most (each is a stream on 2026-07-28)."""
MAX_PENDING_UPDATES = 1024
"""Distinct updated URIs waiting to be delivered at most; more are dropped (logged once)."""
LISTEN_ACK_TIMEOUT = 10.0
"""Seconds a 2026-07-28 server may take to acknowledge a resource subscription."""

ResourceUpdatedCallback = Callable[[str, str], Awaitable[None]]
"""``(server, upstream URI)``, awaited for each coalesced ``notifications/resources/updated``."""


def covers(subscribed: str, uri: str) -> bool:
    """Whether an update of ``uri`` belongs to a subscription of ``subscribed``: the same URI,
    or a sub-resource of it (MCP spec: the updated URI "might be a sub-resource of the one
    that the client actually subscribed to")."""
    if uri == subscribed:
        return True
    return uri.startswith(subscribed) and (
        subscribed.endswith("/") or uri[len(subscribed)] in "/?#"
    )


def supports_subscribe(session: ClientSession) -> bool:
    """Whether the server announced ``resources.subscribe`` (on 2026-07-28 the SDK derives it
    from ``subscriptions/listen`` being served)."""
    caps = session.server_capabilities
    return bool(caps and caps.resources and caps.resources.subscribe)


class UpstreamSubscriptions:
    """What one connection is subscribed to, and the updates waiting to be delivered.

    Args:
        server: The server's name (for logs).
        on_update: Called when an update of a 2026-07-28 stream was queued (the connection's
            worker then delivers it; handshake-era updates come through its message handler).
    """

    def __init__(self, server: str, on_update: Callable[[], None]) -> None:
        self.server = server
        self._on_update = on_update
        self.wanted: set[str] = set()
        self._pending: dict[str, None] = {}
        self._overflowed = False
        self._streams: dict[str, anyio.CancelScope] = {}
        self.task_group: anyio.abc.TaskGroup | None = None
        """The live session's task group (2026-07-28 streams run there); None when down."""

    # ---- updates ----------------------------------------------------------------------------

    def note(self, uri: str) -> bool:
        """Record an update of ``uri``; False when it is dropped (nobody subscribed to it, or
        too many are waiting)."""
        if uri in self._pending:
            return True
        if not any(covers(subscribed, uri) for subscribed in self.wanted):
            logger.debug("MCP server %r: update of unsubscribed %r dropped", self.server, uri)
            return False
        if len(self._pending) >= MAX_PENDING_UPDATES:
            if not self._overflowed:
                logger.warning(
                    "MCP server %r sends resource updates faster than they are delivered; "
                    "dropping some",
                    self.server,
                )
                self._overflowed = True
            return False
        self._pending[uri] = None
        return True

    def take(self) -> list[str]:
        """The waiting updates, oldest first; the queue is left empty."""
        taken, self._pending = list(self._pending), {}
        self._overflowed = False
        return taken

    # ---- subscribing ------------------------------------------------------------------------

    async def add(self, session: ClientSession | None, uri: str) -> None:
        """Subscribe to ``uri`` (on the server now when ``session`` is live, else at the next
        :meth:`restore`).

        Raises:
            ValueError: too many subscriptions, or the server does not offer them.
            MCPError: the server refused the subscription.
        """
        if uri in self.wanted:
            return
        if len(self.wanted) >= MAX_UPSTREAM_SUBSCRIPTIONS:
            raise ValueError(
                f"MCP server {self.server!r} has {MAX_UPSTREAM_SUBSCRIPTIONS} resource "
                "subscriptions already; unsubscribe from one first"
            )
        if session is not None:
            if not supports_subscribe(session):
                raise ValueError(
                    f"MCP server {self.server!r} does not offer resource subscriptions"
                )
            await self._subscribe(session, uri)
        self.wanted.add(uri)

    async def remove(self, session: ClientSession | None, uri: str) -> None:
        """Unsubscribe from ``uri`` (a failure upstream is logged: the URI is no longer
        wanted either way, and its updates are dropped from now on)."""
        if uri not in self.wanted:
            return
        self.wanted.discard(uri)
        self._pending.pop(uri, None)
        scope = self._streams.pop(uri, None)
        if scope is not None:
            scope.cancel()
            return
        if session is None or session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        try:
            with anyio.fail_after(LISTEN_ACK_TIMEOUT), warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await session.unsubscribe_resource(uri)
        except Exception as error:  # noqa: BLE001 - the URI is dropped here whatever it says
            logger.info("MCP server %r: resources/unsubscribe %r: %s", self.server, uri, error)

    async def restore(self, session: ClientSession) -> None:
        """Subscribe again to every wanted URI on a new session (after a restart); one that
        fails is logged and stays wanted."""
        self._streams.clear()
        if self.wanted and not supports_subscribe(session):
            logger.warning(
                "MCP server %r no longer offers resource subscriptions; %d are kept for later",
                self.server,
                len(self.wanted),
            )
            return
        for uri in sorted(self.wanted):
            try:
                await self._subscribe(session, uri)
            except Exception as error:  # noqa: BLE001 - one refused subscription costs only it
                logger.warning(
                    "MCP server %r: re-subscribing to %r failed: %s", self.server, uri, error
                )

    def lost(self) -> None:
        """The session ended: its streams went with it (the wanted set stays)."""
        self._streams.clear()
        self.task_group = None

    async def _subscribe(self, session: ClientSession, uri: str) -> None:
        if session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            with anyio.fail_after(LISTEN_ACK_TIMEOUT), warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await session.subscribe_resource(uri)
            return
        if self.task_group is None:
            raise ValueError(f"MCP server {self.server!r} is not connected")
        await self.task_group.start(self._stream, session, uri)

    async def _stream(
        self,
        session: ClientSession,
        uri: str,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """One ``subscriptions/listen`` stream for ``uri`` (2026-07-28), until unsubscribed or
        the session ends."""
        with anyio.CancelScope() as scope:
            async with AsyncExitStack() as stack:
                with anyio.fail_after(LISTEN_ACK_TIMEOUT):
                    subscription = await stack.enter_async_context(
                        listen(session, resource_subscriptions=[uri])
                    )
                if uri not in (subscription.honored.resource_subscriptions or ()):
                    raise ValueError(
                        f"MCP server {self.server!r} did not acknowledge a subscription to {uri!r}"
                    )
                self._streams[uri] = scope
                task_status.started()
                try:
                    async for event in subscription:
                        updated = getattr(event, "uri", None)
                        if isinstance(updated, str) and self.note(updated):
                            self._on_update()
                except Exception as error:  # noqa: BLE001 - a lost stream costs only its updates
                    logger.info(
                        "MCP server %r: subscription to %r ended: %s", self.server, uri, error
                    )
                finally:
                    if self._streams.get(uri) is scope:
                        del self._streams[uri]
