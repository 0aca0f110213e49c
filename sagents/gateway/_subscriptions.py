"""Resource subscriptions and ``subscriptions/listen`` in ``sagents serve`` (docs/gateway.md,
"Resource subscriptions").

- :class:`ResourceRelay` keeps who subscribed to which forwarded resource
  (``sagents://upstream/<server>/<uri>``): the first subscriber of an upstream URI subscribes
  upstream, the last one to leave unsubscribes. An upstream's update reaches exactly the
  subscribers of that URI (or of a resource it is a sub-resource of) whose offer still covers
  it, under the gateway's URI; deliveries are coalesced per subscriber and URI, bounded
  (:data:`MAX_PENDING_DELIVERIES`), and sent by one worker task, so a slow client stalls
  neither the upstream nor another client.
- Handshake-era clients subscribe with ``resources/subscribe`` (MCP spec 2025-11-25,
  "Resources", "Subscriptions"); their subscriptions end with their session.
- 2026-07-28 clients open ``subscriptions/listen`` streams (2026-07-28, "Subscriptions"):
  :class:`GatewayListen` serves them with the list-changed events of the gateway's bus, the
  ``resourceSubscriptions`` their session is offered, and, for the Tasks extension, the
  ``taskIds`` of their own tasks (``notifications/tasks``, SEP-2663 "Task Status
  Notifications"); a stream's subscriptions end with it. The acknowledgment lists what is
  honored: a URI that is not offered, or whose server offers no subscriptions, is left out.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import anyio
import anyio.abc
import mcp_types as mt
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
    event_to_notification,
)

from sagents.core._lifespan import Lifespan
from sagents.errors import SagentsError
from sagents.gateway._forwarding import (
    UpstreamForwarding,
    forwarded_error,
    split_upstream_uri,
    upstream_uri,
)
from sagents.gateway._policy import Profile
from sagents.gateway._sessions import request_connection
from sagents.mcp._ext_types import TaskStatusNotification, TaskStatusNotificationParams
from sagents.mcp._resource_subscriptions import covers

__all__ = [
    "MAX_LISTEN_STREAMS",
    "MAX_PENDING_DELIVERIES",
    "MAX_STREAM_BACKLOG",
    "MAX_SUBSCRIPTIONS_PER_CLIENT",
    "SEND_TIMEOUT_S",
    "GatewayListen",
    "ResourceRelay",
    "Subscriber",
    "TaskWatch",
    "session_subscriber",
    "subscription_handlers",
]

logger = logging.getLogger(__name__)

MAX_SUBSCRIPTIONS_PER_CLIENT = 256
"""Resource subscriptions one session (or one listen stream) holds at most."""
MAX_PENDING_DELIVERIES = 4096
"""Undelivered ``(subscriber, URI)`` updates at most; past it, updates are dropped (logged)."""
MAX_LISTEN_STREAMS = 1024
"""Open ``subscriptions/listen`` streams at most, as the SDK's own handler."""
MAX_STREAM_BACKLOG = 1024
"""Events waiting on one listen stream at most; a stream whose client stops reading is ended
(the client listens again and refetches: events are level triggers without replay)."""
SEND_TIMEOUT_S = 5.0
"""Seconds one notification to one client may take before that client is skipped."""
_INVALID_PARAMS = -32602
_MISSING_CAPABILITY = -32021  # SEP-2663: task notifications without the extension declared


@dataclass(eq=False, kw_only=True)
class Subscriber:
    """One client's resource subscriptions (a handshake session, or a listen stream).

    Attributes:
        key: Unique among the relay's subscribers.
        profile: The offer the subscriptions are checked against, at subscribe time and at
            every delivery.
        send: Delivers ``notifications/resources/updated`` of a gateway URI; raising
            ``anyio.ClosedResourceError`` (or ``BrokenResourceError``, ``MCPError``) ends the
            subscriber.
        uris: The gateway URIs subscribed to.
    """

    key: str
    profile: Profile | None
    send: Callable[[str], Awaitable[None]]
    uris: set[str] = field(default_factory=set)


class ResourceRelay(Lifespan):
    """Forwarded resources' subscriptions, refcounted upstream; an async context manager (its
    worker delivers the updates; leaving ends it).

    Args:
        forwarding: The upstream forwarding (its source subscribes upstream).
    """

    def __init__(self, forwarding: UpstreamForwarding) -> None:
        self._forwarding = forwarding
        self._subscribers: dict[str, Subscriber] = {}
        self._upstream: dict[tuple[str, str], set[str]] = {}
        self._lock = anyio.Lock()
        self._pending: dict[tuple[str, str], None] = {}
        self._release: set[tuple[str, str]] = set()
        self._wake = anyio.Event()
        self._listening: object = None
        self._dropped_updates = 0

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._worker)
            yield
            tg.cancel_scope.cancel()  # the worker runs until the relay is left

    def subscriber(self, key: str) -> Subscriber | None:
        """The subscriber ``key``, while it holds a subscription."""
        return self._subscribers.get(key)

    def subscriptions(self, key: str) -> frozenset[str]:
        """The gateway URIs ``key`` is subscribed to."""
        found = self._subscribers.get(key)
        return frozenset(found.uris) if found is not None else frozenset()

    def upstream(self) -> dict[tuple[str, str], frozenset[str]]:
        """``(server, upstream URI)`` -> subscriber keys, for every upstream subscription."""
        return {where: frozenset(keys) for where, keys in self._upstream.items()}

    async def subscribe(self, subscriber: Subscriber, uri: str) -> None:
        """Subscribe ``subscriber`` to the gateway URI ``uri`` (subscribing upstream first
        when nobody else is).

        Raises:
            MCPError: ``-32002`` for a URI the subscriber is not offered; ``-32602`` past
                :data:`MAX_SUBSCRIPTIONS_PER_CLIENT`; the upstream's error (a server without
                subscriptions is ``-32603``).
        """
        server, original = self._forwarding.offered_resource(subscriber.profile, uri)
        known = self._subscribers.setdefault(subscriber.key, subscriber)
        if uri in known.uris:
            return
        if len(known.uris) >= MAX_SUBSCRIPTIONS_PER_CLIENT:
            raise MCPError(
                _INVALID_PARAMS,
                f"this client holds {MAX_SUBSCRIPTIONS_PER_CLIENT} resource subscriptions "
                "already; unsubscribe from one first",
            )
        source = self._forwarding.source
        assert source is not None  # offered_resource refuses without one
        if self._listening is not source:
            source.on_resource_updated(self._updated)
            self._listening = source
        async with self._lock:
            keys = self._upstream.get((server, original))
            if not keys:
                try:
                    await source.subscribe_resource(server, original)
                except SagentsError as error:
                    if not known.uris:
                        self._subscribers.pop(known.key, None)
                    raise forwarded_error(error) from error
                self._release.discard((server, original))
            self._upstream.setdefault((server, original), set()).add(known.key)
            known.uris.add(uri)

    async def unsubscribe(self, key: str, uri: str) -> None:
        """End ``key``'s subscription to ``uri`` (nothing happens for one it does not hold)."""
        known = self._subscribers.get(key)
        if known is None or uri not in known.uris:
            return
        known.uris.discard(uri)
        if not known.uris:
            self._subscribers.pop(key, None)
        self._leave(key, uri)
        await self._release_now()

    def drop(self, key: str) -> None:
        """End every subscription of ``key`` (its session or stream ended); upstream
        subscriptions nobody holds any more are ended by the worker."""
        known = self._subscribers.pop(key, None)
        if known is None:
            return
        for uri in known.uris:
            self._leave(key, uri)
        known.uris.clear()
        self._wake.set()

    def _leave(self, key: str, uri: str) -> None:
        split = split_upstream_uri(uri)
        if split is None:
            return
        keys = self._upstream.get(split)
        if keys is None:
            return
        keys.discard(key)
        if not keys:
            del self._upstream[split]
            self._release.add(split)

    async def _release_now(self) -> None:
        source = self._forwarding.source
        async with self._lock:
            released, self._release = self._release, set()
            for server, original in sorted(released):
                if (server, original) in self._upstream or source is None:
                    continue  # subscribed again meanwhile
                await source.unsubscribe_resource(server, original)

    async def _updated(self, server: str, uri: str) -> None:
        """An upstream's update of ``uri``: queued for each subscriber it concerns."""
        gateway_uri = upstream_uri(server, uri)
        for (subscribed_server, subscribed), keys in list(self._upstream.items()):
            if subscribed_server != server or not covers(subscribed, uri):
                continue
            for key in sorted(keys):
                known = self._subscribers.get(key)
                if known is None or not self._forwarding.resource_offered(
                    known.profile, gateway_uri
                ):
                    continue  # a sub-resource outside this client's offer
                if (key, gateway_uri) in self._pending:
                    continue
                if len(self._pending) >= MAX_PENDING_DELIVERIES:
                    self._dropped_updates += 1
                    if self._dropped_updates == 1:
                        logger.warning("resource updates arrive faster than clients read them")
                    continue
                self._pending[(key, gateway_uri)] = None
        self._wake.set()

    async def _worker(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            pending, self._pending = list(self._pending), {}
            self._dropped_updates = 0
            for key, uri in pending:
                known = self._subscribers.get(key)
                if known is None or not self._covered(known, uri):  # unsubscribed meanwhile
                    continue
                with anyio.move_on_after(SEND_TIMEOUT_S) as timed:
                    try:
                        await known.send(uri)
                    except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                        self.drop(key)  # the client is gone
                if timed.cancelled_caught:
                    logger.info("a client did not take a resource update in time: skipped")
            if self._release:
                await self._release_now()

    @staticmethod
    def _covered(known: Subscriber, uri: str) -> bool:
        return any(covers(subscribed, uri) for subscribed in known.uris)


def session_subscriber(
    key: str, profile: Profile | None, connection: Connection, relay: ResourceRelay
) -> Subscriber:
    """A handshake-era session's subscriber: updates go to its connection, held weakly, so
    that the session's end (its connection collected) ends its subscriptions."""
    ref = weakref.ref(connection)

    async def send(uri: str) -> None:
        live = ref()
        if live is None:
            raise anyio.ClosedResourceError
        await live.send_resource_updated(uri)

    ended = weakref.finalize(connection, relay.drop, key)
    ended.atexit = False  # at interpreter exit there is no loop to wake
    return Subscriber(key=key, profile=profile, send=send)


class TaskWatch(Protocol):
    """Task status notifications for a listen stream (the Tasks extension)."""

    def negotiated(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether the request declared the Tasks extension."""
        ...

    def watch(
        self,
        ctx: ServerRequestContext[Any, Any],
        task_ids: Sequence[str],
        deliver: Callable[[dict[str, Any]], None],
    ) -> tuple[list[str], Callable[[], None]]:
        """Deliver the ``notifications/tasks`` params of the caller's tasks among
        ``task_ids``; returns the ids honored and a function that ends the watch."""
        ...


@dataclass(frozen=True)
class _TaskStatus:
    params: dict[str, Any]


class GatewayListen:
    """Serves ``subscriptions/listen`` for 2026-07-28 clients (as the SDK's ``ListenHandler``,
    plus the session's resource subscriptions and task status notifications).

    Args:
        bus: The gateway's list-changed events.
        relay: Forwarded resources' subscriptions; None honors no ``resourceSubscriptions``.
        profile_of: The profile of a request's session.
        tasks: Task status notifications; None honors no ``taskIds``.
    """

    def __init__(
        self,
        bus: SubscriptionBus,
        relay: ResourceRelay | None,
        profile_of: Callable[[ServerRequestContext[Any, Any]], Profile | None],
        tasks: TaskWatch | None = None,
    ) -> None:
        self._bus = bus
        self.relay = relay
        self._profile_of = profile_of
        self.tasks = tasks
        self._streams: set[MemoryObjectSendStream[ServerEvent | _TaskStatus]] = set()

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: mt.SubscriptionsListenRequestParams
    ) -> mt.SubscriptionsListenResult:
        """Serve one listen stream until the client ends it or :meth:`close`."""
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(mt.INVALID_REQUEST, "subscriptions/listen requires a request id")
        if len(self._streams) >= MAX_LISTEN_STREAMS:
            raise MCPError(mt.INTERNAL_ERROR, "Subscription limit reached")
        requested = params.notifications
        extra = requested.model_extra or {}
        task_ids = extra.get("taskIds")
        if task_ids is not None:
            if self.tasks is None or not self.tasks.negotiated(ctx):
                raise MCPError(
                    _MISSING_CAPABILITY,
                    "Missing required client capability",
                    data={
                        "requiredCapabilities": {
                            "extensions": {"io.modelcontextprotocol/tasks": {}}
                        }
                    },
                )
            if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
                raise MCPError(_INVALID_PARAMS, "notifications.taskIds must be a list of strings")
        profile = self._profile_of(ctx)
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        send, recv = anyio.create_memory_object_stream[ServerEvent | _TaskStatus](
            MAX_STREAM_BACKLOG
        )

        def deliver(event: ServerEvent | _TaskStatus) -> None:
            try:
                send.send_nowait(event)
            except anyio.ClosedResourceError:
                pass
            except anyio.WouldBlock:
                logger.warning("listen stream %r backlog full; ending it", subscription_id)
                self._streams.discard(send)
                send.close()

        kinds: tuple[type[ServerEvent], ...] = tuple(
            kind
            for kind, wanted in (
                (ToolsListChanged, requested.tools_list_changed),
                (PromptsListChanged, requested.prompts_list_changed),
                (ResourcesListChanged, requested.resources_list_changed),
            )
            if wanted
        )
        key = f"listen:{uuid.uuid4().hex}"
        stop_tasks: Callable[[], None] | None = None
        unsubscribe = self._bus.subscribe(
            lambda event: deliver(event) if isinstance(event, kinds) else None
        )
        self._streams.add(send)
        try:
            honored_uris = await self._subscribe_uris(
                key, profile, requested.resource_subscriptions or [], deliver
            )
            honored_tasks: list[str] | None = None
            if task_ids is not None and self.tasks is not None:
                honored_tasks, stop_tasks = self.tasks.watch(
                    ctx, task_ids, lambda state: deliver(_TaskStatus(state))
                )
            honored = mt.SubscriptionFilter(
                tools_list_changed=True if requested.tools_list_changed else None,
                prompts_list_changed=True if requested.prompts_list_changed else None,
                resources_list_changed=True if requested.resources_list_changed else None,
                resource_subscriptions=honored_uris or None,
                **({"taskIds": honored_tasks} if honored_tasks else {}),
            )
            await ctx.session.send_notification(
                mt.SubscriptionsAcknowledgedNotification(
                    params=mt.SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                ),
                related_request_id=subscription_id,
            )
            async for event in recv:
                if isinstance(event, _TaskStatus):
                    notification: Any = TaskStatusNotification(
                        params=TaskStatusNotificationParams.model_validate(
                            {**event.params, "_meta": meta}
                        )
                    )
                else:
                    notification = event_to_notification(event, meta)
                await ctx.session.send_notification(
                    cast("mt.ServerNotification", notification),
                    related_request_id=subscription_id,
                )
        finally:
            unsubscribe()
            if stop_tasks is not None:
                stop_tasks()
            if self.relay is not None:
                self.relay.drop(key)
            self._streams.discard(send)
            send.close()
            recv.close()
        return mt.SubscriptionsListenResult(_meta=meta)

    async def _subscribe_uris(
        self,
        key: str,
        profile: Profile | None,
        uris: Sequence[str],
        deliver: Callable[[ServerEvent | _TaskStatus], None],
    ) -> list[str]:
        if self.relay is None or not uris:
            return []

        async def send(uri: str) -> None:
            deliver(ResourceUpdated(uri=uri))

        subscriber = Subscriber(key=key, profile=profile, send=send)
        honored: list[str] = []
        for uri in list(dict.fromkeys(uris))[:MAX_SUBSCRIPTIONS_PER_CLIENT]:
            try:
                await self.relay.subscribe(subscriber, uri)
            except MCPError as error:  # left out of the acknowledgment
                logger.info("listen: resource subscription %r not honored: %s", uri, error)
                continue
            honored.append(uri)
        return honored

    def close(self) -> None:
        """End every open stream gracefully (each sends its final result)."""
        for stream in list(self._streams):
            stream.close()


SessionOf = Callable[[ServerRequestContext[Any, Any]], tuple[str, Profile | None]]
"""A handshake-era request's session: its subscriber key and its profile."""


def subscription_handlers(relay: ResourceRelay, session_of: SessionOf) -> dict[str, Any]:
    """The low-level server's ``resources/subscribe`` and ``resources/unsubscribe`` handlers
    (handshake era; registering them makes the SDK announce ``resources.subscribe``).

    Returns:
        Keyword arguments for :class:`mcp.server.lowlevel.server.Server`.
    """

    async def on_subscribe(
        ctx: ServerRequestContext[Any, Any], params: mt.SubscribeRequestParams
    ) -> mt.EmptyResult:
        key, profile = session_of(ctx)
        subscriber = relay.subscriber(key)
        if subscriber is None:
            subscriber = session_subscriber(key, profile, request_connection(ctx), relay)
        await relay.subscribe(subscriber, str(params.uri))
        return mt.EmptyResult()

    async def on_unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: mt.UnsubscribeRequestParams
    ) -> mt.EmptyResult:
        key, _profile = session_of(ctx)
        await relay.unsubscribe(key, str(params.uri))
        return mt.EmptyResult()

    return {"on_subscribe_resource": on_subscribe, "on_unsubscribe_resource": on_unsubscribe}
