"""One supervised upstream server: a long-lived session in its own task.

The session (transport, ``ClientSession``, for stdio the process) is entered and exited only by
the connection's worker task, which runs in the supervisor's task group; callers in any other
task send requests through the SDK session object, whose dispatcher correlates the answers. So
registering in one task, calling from another and closing from a third never exits a cancel
scope in a task that did not enter it.

Life of a connection: ``connecting`` → ``ready`` (tools listed) → on death, or when it does not
answer a liveness ``ping``, ``failed`` → after a backoff that doubles per consecutive failure,
in the background → ``restarting`` → ``ready`` or ``failed``.
``notifications/tools/list_changed`` (and, on 2026-07-28, a ``subscriptions/listen`` stream)
makes the worker list the tools again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import anyio.abc
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.session import IncomingMessage
from mcp.client.subscriptions import listen
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagents.core._spec import ToolSpec
from sagents.errors import NeedsLoginError, UpstreamSchemaError, UpstreamUnavailableError
from sagents.mcp._call_scope import CallScope, CallSlot
from sagents.mcp._catalog import CatalogChangedCallback, CatalogKind, ServerCatalog, list_catalog
from sagents.mcp._convert import mcp_tool_name, tool_to_spec
from sagents.mcp._params import ServerParams, describe_params
from sagents.mcp._pins import review_definitions
from sagents.mcp._resource_subscriptions import ResourceUpdatedCallback, UpstreamSubscriptions
from sagents.mcp._session import ToolListFilter, open_session
from sagents.mcp._settings import ServerSettings
from sagents.mcp._status import ServerState, ServerStatus, WithheldTool
from sagents.mcp._stdio import StdioProcess
from sagents.mcp._tasks_client import TaskStatuses

__all__ = ["MAX_TOOL_PAGES", "SERVER_FAILURE_LOG_KEY", "ServerConnection", "ToolsChangedCallback"]

logger = logging.getLogger(__name__)

SERVER_FAILURE_LOG_KEY = "sagents_failed_server"
"""The attribute (the server's name) of the log record that reports a server's failure: a
command that reports failures in its own output (``sagents tools``) leaves these records out."""

MAX_TOOL_PAGES = 1000  # tools/list pages followed before giving up on a paginator that never ends
MIN_RETRY_DELAY = 0.1  # seconds: the floor of repeated retries, so a backoff of 0 cannot spin
EXIT_STATUS_WAIT = 1.0  # seconds a server that hung up is given to be reaped (its exit status)
CATALOG_NOTIFY_TIMEOUT = 10.0  # seconds a catalog listener may take (it tells clients)

ToolsChangedCallback = Callable[[str, tuple[ToolSpec, ...]], Awaitable[None]]
"""``(server, specs)``, awaited by a connection's worker after a listing changed the tools."""


def _first(error: BaseException) -> BaseException:
    """The first error inside exception groups (what a failure is described by)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _describe(error: BaseException) -> str:
    error = _first(error)
    if isinstance(error, NeedsLoginError):
        return error.message
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}" if type(error).__name__ not in text else text


def _list_changes(session: ClientSession) -> dict[str, bool]:
    """Which of its lists the server says it announces changes of."""
    caps = session.server_capabilities
    return {
        "tools": bool(caps and caps.tools and caps.tools.list_changed),
        "prompts": bool(caps and caps.prompts and caps.prompts.list_changed),
        "resources": bool(caps and caps.resources and caps.resources.list_changed),
    }


class ServerConnection:
    """The supervised connection to one server (used through :class:`MCPSupervisor`).

    Args:
        name: The registered server name (already checked).
        params: Where the server is.
        settings: Timeouts, concurrency, permission overrides.
        log_path: The stdio server's stderr log file.
        on_tools_changed: Awaited after a listing changed the server's specs (the first
            listing included).
        on_catalog_changed: Awaited with ``(server, kind)`` after the server's prompts or
            resources changed, and when the server became ready or was lost while it had any
            (a client's lists then change too).
        on_catalog_announced: Awaited with ``(server, kind)`` after the server announced a
            change of its prompts or resources and they were listed again, changed or not.
        on_resource_updated: Awaited with ``(server, uri)`` for each coalesced update of a
            subscribed resource (:attr:`subscriptions`).
    """

    def __init__(
        self,
        name: str,
        params: ServerParams,
        settings: ServerSettings,
        *,
        log_path: Path,
        on_tools_changed: ToolsChangedCallback | None = None,
        on_catalog_changed: CatalogChangedCallback | None = None,
        on_catalog_announced: CatalogChangedCallback | None = None,
        on_resource_updated: ResourceUpdatedCallback | None = None,
    ) -> None:
        self.name = name
        self._on_resource_updated = on_resource_updated
        self.subscriptions = UpstreamSubscriptions(name, on_update=lambda: self._wake.set())
        """The resources subscribed to on this server, kept across restarts."""
        self._on_catalog_changed = on_catalog_changed
        self._on_catalog_announced = on_catalog_announced
        self._catalog = ServerCatalog()
        self._relist_catalog: set[CatalogKind] = set()
        self.params = params
        self.settings = settings
        self.log_path = log_path
        self._on_tools_changed = on_tools_changed
        self._state: ServerState = "connecting"
        self._needs_login = False  # the last start was refused for want of a login
        self._changed = anyio.Event()
        self._wake = anyio.Event()
        self._dead = False
        self._suspect = False  # a call timed out: a ping decides whether the server is frozen
        self._relist = False
        self._liveness_restarts = 0
        self._restart_reason: str | None = None
        self._finished = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._session: ClientSession | None = None
        self._pid: int | None = None
        self._process: StdioProcess | None = None
        self._exit_code: int | None = None
        self._attempts = 0
        self._consecutive_failures = 0
        self._last_error: str | None = None
        self._logged_error: str | None = None  # the failure last logged: logged once
        self._tools: dict[str, types.Tool] = {}
        self._specs: tuple[ToolSpec, ...] = ()  # as offered: after the definitions' review
        self._listed: tuple[ToolSpec, ...] = ()  # as the server listed them
        self._withheld: tuple[WithheldTool, ...] = ()
        self._listed_once = False
        self._closing = False
        self._call_scopes: set[CallScope] = set()
        self._tool_filter: ToolListFilter | None = None
        self.task_statuses: TaskStatuses | None = None
        """The live session's ``notifications/tasks`` (tasks are watched with them)."""
        # A semaphore, not a CapacityLimiter: no per-task borrower bookkeeping on every call
        self.limiter = anyio.Semaphore(settings.max_concurrency, fast_acquire=True)

    # ---- what callers see -------------------------------------------------------------------

    @property
    def state(self) -> ServerState:
        """The current :data:`ServerState`."""
        return self._state

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """Specs of the offered tools, from the last listing."""
        return self._specs

    @property
    def catalog(self) -> ServerCatalog:
        """The server's prompts, resources and templates; empty while it is not ready (one
        server down hides only its own items)."""
        if self._state != "ready" or self._dead:
            return ServerCatalog()
        return self._catalog

    def tool(self, original_name: str) -> types.Tool | None:
        """The last listed MCP ``Tool`` of that name, or None."""
        return self._tools.get(original_name)

    def status(self) -> ServerStatus:
        """A snapshot of the connection's state."""
        session = self._session
        info = session.server_info if session is not None else None
        return ServerStatus(
            name=self.name,
            state="failed" if (self._dead and self._state == "ready") else self._state,
            transport=describe_params(self.params),
            protocol_version=session.protocol_version if session is not None else None,
            server_name=info.name if info is not None else None,
            server_version=info.version if info is not None else None,
            last_error=self._last_error,
            tools=tuple(s.name for s in self._specs),
            withheld=self._withheld,
            restarts=max(0, self._attempts - 1),
            pid=self._pid if self._state == "ready" else None,
            exit_code=self._exit_code,
            liveness_restarts=self._liveness_restarts,
            last_restart_reason=self._restart_reason,
            log_path=str(self.log_path) if isinstance(self.params, StdioServerParameters) else None,
            needs_login=self._needs_login and self._state != "ready",
            sandboxed=isinstance(self.params, StdioServerParameters)
            and self.settings.sandbox is not None,
        )

    async def wait_started(self) -> ServerState:
        """Wait until the first start attempt ended; returns ``ready`` or ``failed``/``closed``."""
        while self._state in ("connecting", "restarting"):
            await self._changed.wait()
        return self._state

    @property
    def first_start_done(self) -> bool:
        """True once the first start attempt ended (however it ended)."""
        return not (self._attempts == 0 or (self._attempts == 1 and self._state == "connecting"))

    async def wait_first_start(self) -> None:
        """Wait until the first start attempt ended (however it ended)."""
        while not self.first_start_done:
            await self._changed.wait()

    @property
    def live_session(self) -> ClientSession | None:
        """The session when a call may use it right now, else None (see :meth:`ready_session`)."""
        if self._state == "ready" and not self._dead and not self._suspect:
            return self._session
        return None

    async def ready_session(self) -> ClientSession:
        """Return the live session, restarting a failed server first (once, with backoff).

        Raises:
            UpstreamUnavailableError: the server is closed, or its restart failed.
        """
        attempts_at_start = self._attempts
        while True:
            if (
                self._state == "ready"
                and self._session is not None
                and not self._dead
                and not self._suspect
            ):
                return self._session
            if self._state == "closed":
                raise self._unavailable("the server was closed")
            if self._state == "failed" and self._attempts > attempts_at_start:
                raise self._unavailable(f"restart failed: {self._last_error}")
            await self._changed.wait()

    def mark_dead(self, reason: str) -> None:
        """Record that the connection is lost; in-flight calls end, the worker tears it down."""
        if not self._dead:
            self._dead = True
            self._last_error = reason
            self._restart_reason = reason
            self._wake.set()
        self._abort_calls()

    def check_liveness(self) -> None:
        """Ask the worker to ``ping`` the server now (a call timed out or was cancelled).

        Until the server answers, new calls wait (at most ``ping_timeout``) instead of joining
        a server that may be frozen; one that does not answer is restarted.
        """
        if self._dead or self._closing or self._state != "ready":
            return
        self._suspect = True
        self._wake.set()

    def call_scope(self) -> CallScope:
        """A cancel scope around one call, cancelled when the connection dies or closes.

        So no call outlives its connection, whatever the transport does with pending requests.
        """
        return CallScope(self._call_scopes)

    def call_slot(self) -> CallSlot:
        """One of the ``max_concurrency`` slots, for the ``async with`` block of one call.

        Like ``async with limiter``, except that a free slot is taken without a trip through
        the event loop (the call itself yields soon enough); a full limiter is waited for.
        """
        return CallSlot(self.limiter)

    async def drain(self, timeout: float) -> bool:  # noqa: ASYNC109 - a bound, not a call
        """Wait until no call is in flight on this connection, at most ``timeout`` seconds.

        Every call holds one of the ``max_concurrency`` slots while it runs; holding them all
        means none runs. They are released on return, so call :meth:`close` next.

        Returns:
            True when every call finished in time.
        """
        held = 0
        try:
            with anyio.move_on_after(timeout):
                for _ in range(self.settings.max_concurrency):
                    await self.limiter.acquire()
                    held += 1
        finally:
            for _ in range(held):
                self.limiter.release()
        return held == self.settings.max_concurrency

    def _abort_calls(self) -> None:
        for scope in list(self._call_scopes):
            scope.cancel()

    @property
    def closing(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closing

    async def close(self) -> None:
        """End the worker (and with it the session and any process) and wait for it."""
        self._closing = True
        self._abort_calls()
        if self._scope is not None:
            self._scope.cancel()
        else:
            self._set_state("closed")
            self._finished.set()
        await self._finished.wait()

    # ---- the worker -------------------------------------------------------------------------

    def _set_state(self, state: ServerState) -> None:
        self._state = state
        self._changed.set()
        self._changed = anyio.Event()

    def _unavailable(self, why: str) -> UpstreamUnavailableError:
        return UpstreamUnavailableError(
            f"MCP server {self.name!r} is unavailable: {why}",
            hint="try again later; the server's log may say why",
            details={"server": self.name, "log": str(self.log_path)},
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The worker: start, serve, and restart on demand until cancelled by :meth:`close`."""
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                task_status.started()
                while True:
                    if self._attempts > 0:
                        # Retried in the background (not only when a call asks): a server
                        # that failed its first start comes up by itself once it can.
                        await anyio.sleep(self._backoff())
                        self._set_state("restarting")
                    self._attempts += 1
                    await self._connect_and_serve()
        finally:
            self._session = None
            self._set_state("closed")
            self._finished.set()

    def _backoff(self) -> float:
        """Seconds before the next start: ``restart_backoff`` doubled per consecutive failure
        after the first (never below :data:`MIN_RETRY_DELAY` then), at most
        ``max_restart_backoff``."""
        failures = self._consecutive_failures
        base = self.settings.restart_backoff
        if failures > 1:
            base = max(base, MIN_RETRY_DELAY) * 2 ** (failures - 1)
        return min(base, self.settings.max_restart_backoff)

    async def _message_handler(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist = True
            self._wake.set()
        elif isinstance(message, types.PromptListChangedNotification):
            self._relist_catalog.add("prompts")
            self._wake.set()
        elif isinstance(message, types.ResourceListChangedNotification):
            self._relist_catalog.add("resources")
            self._wake.set()
        elif isinstance(message, types.ResourceUpdatedNotification) and self.subscriptions.note(
            message.params.uri
        ):
            self._wake.set()

    async def _refresh_catalog(
        self, session: ClientSession, kinds: set[CatalogKind]
    ) -> set[CatalogKind]:
        """List ``kinds`` again; return those that changed."""
        before = self._catalog
        self._catalog = await list_catalog(
            session,
            server=self.name,
            timeout=self.settings.list_timeout,
            kinds=frozenset(kinds),
            previous=before,
        )
        return {
            kind
            for kind in kinds
            if (kind == "prompts" and before.prompts != self._catalog.prompts)
            or (
                kind == "resources"
                and (before.resources, before.templates)
                != (self._catalog.resources, self._catalog.templates)
            )
        }

    async def _catalog_changed(self, kinds: set[CatalogKind], *, announced: bool = False) -> None:
        """Tell the catalog listener (or, with ``announced``, the announcement listener)."""
        listener = self._on_catalog_announced if announced else self._on_catalog_changed
        if listener is None or self._closing:
            return
        for kind in sorted(kinds):
            with anyio.move_on_after(CATALOG_NOTIFY_TIMEOUT):  # a stuck client stalls no worker
                try:
                    await listener(self.name, kind)
                except Exception as error:  # noqa: BLE001 - a listener's failure is not the server's
                    logger.warning("MCP server %r: catalog listener failed: %s", self.name, error)

    def _catalog_kinds(self) -> set[CatalogKind]:
        """The kinds of which the server offers something (what its loss or return changes)."""
        kinds: set[CatalogKind] = set()
        if self._catalog.prompts:
            kinds.add("prompts")
        if self._catalog.resources or self._catalog.templates:
            kinds.add("resources")
        return kinds

    def _on_end(self) -> None:
        self.mark_dead("the connection to the server ended (the server exited or hung up)")

    async def _connect_and_serve(self) -> None:
        self._dead = False
        self._suspect = False
        self._relist = False
        self._wake = anyio.Event()
        # One scope around the whole connection: the deadline covers only the start, and the
        # transports' task groups are entered and exited inside it, as anyio requires.
        with anyio.CancelScope() as connect_scope:
            connect_scope.deadline = anyio.current_time() + self.settings.connect_timeout
            try:
                async with AsyncExitStack() as stack:
                    opened = await open_session(
                        stack,
                        self.params,
                        self.settings,
                        log_path=self.log_path,
                        message_handler=self._message_handler,
                        on_end=self._on_end,
                        on_process=self._on_process,
                        name=self.name,
                    )
                    connect_scope.deadline = math.inf
                    session = opened.session
                    self._tool_filter = opened.tool_filter
                    self.task_statuses = opened.task_statuses
                    await self._list_tools(session)
                    hidden = self._catalog_kinds()  # what the loss of a connection hid
                    changed = await self._refresh_catalog(session, {"prompts", "resources"})
                    async with anyio.create_task_group() as tg:
                        if self._wants_listen(session):
                            # Subscribed before `ready`: events have no replay.
                            await tg.start(self._listen, session)
                        self.subscriptions.task_group = tg
                        await self.subscriptions.restore(session)  # after a restart
                        self._session, self._pid = session, opened.pid
                        self._consecutive_failures = 0
                        self._last_error = None
                        self._logged_error = None
                        self._needs_login = False
                        self._set_state("ready")
                        # New items, or back after a loss: told once the server is ready.
                        await self._catalog_changed(changed | (hidden & self._catalog_kinds()))
                        await self._serve(session)
                        self.subscriptions.lost()
                        tg.cancel_scope.cancel()
            except Exception as error:  # noqa: BLE001 - the supervision boundary of one connection
                self._last_error = _describe(error)
                self._needs_login = isinstance(_first(error), NeedsLoginError)
        if connect_scope.cancelled_caught:
            self._last_error = (
                f"no answer to the handshake within {self.settings.connect_timeout} s"
            )
        with anyio.CancelScope(shield=True):  # bounded: EXIT_STATUS_WAIT
            await self._explain_exit()
        if self._last_error and self._last_error != self._logged_error:
            logger.warning(
                "MCP server %r failed: %s",
                self.name,
                self._last_error,
                extra={SERVER_FAILURE_LOG_KEY: self.name},
            )
            self._logged_error = self._last_error
        elif self._last_error:  # the same failure again, at a restart: its status says so
            logger.debug("MCP server %r failed again: %s", self.name, self._last_error)
        self._abort_calls()
        self.subscriptions.lost()
        self._session = None
        self._pid = None
        self._consecutive_failures += 1
        self._set_state("failed")
        with anyio.CancelScope(shield=True):
            await self._catalog_changed(self._catalog_kinds())  # its items are hidden now

    def _on_process(self, process: StdioProcess) -> None:
        self._process = process
        self._exit_code = None

    async def _explain_exit(self) -> None:
        """Add a stdio server's own exit (status, last stderr lines, log) to the last error."""
        process, self._process = self._process, None
        if process is None or not process.hung_up or self._closing:
            return
        code = await process.reaped(EXIT_STATUS_WAIT)
        self._exit_code = code
        if code is None:
            how = "closed its stdout"
        elif code < 0:
            how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        tail = process.stderr_tail()
        stderr = (" | ".join(tail)) if tail else "(nothing)"
        self._last_error = (
            f"the server {how}: {self._last_error or 'the connection ended'}; "
            f"last stderr lines: {stderr}; log: {str(process.log_path)!r}"
        )

    def _wants_listen(self, session: ClientSession) -> bool:
        return session.protocol_version in MODERN_PROTOCOL_VERSIONS and any(
            _list_changes(session).values()
        )

    async def _listen(
        self,
        session: ClientSession,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            async with AsyncExitStack() as stack:
                try:
                    with anyio.fail_after(self.settings.list_timeout):
                        changes = _list_changes(session)
                        subscription = await stack.enter_async_context(
                            listen(
                                session,
                                tools_list_changed=changes["tools"],
                                prompts_list_changed=changes["prompts"],
                                resources_list_changed=changes["resources"],
                            )
                        )
                except Exception as error:  # noqa: BLE001 - without a subscription, no refreshes
                    logger.info(
                        "MCP server %r: no tools subscription: %s", self.name, _describe(error)
                    )
                    task_status.started()
                    return
                task_status.started()
                async for _event in subscription:
                    self._relist = changes["tools"]  # which list changed: listed anew, each
                    self._relist_catalog.update(
                        kind for kind in ("prompts", "resources") if changes[kind]
                    )
                    self._wake.set()
        except Exception as error:  # noqa: BLE001 - a lost subscription only costs refreshes
            logger.info("MCP server %r: tools subscription ended: %s", self.name, _describe(error))

    async def _serve(self, session: ClientSession) -> None:
        interval = self.settings.ping_interval
        while True:
            with anyio.move_on_after(math.inf if interval is None else interval):
                await self._wake.wait()
            woke = self._wake.is_set()
            self._wake = anyio.Event()
            if self._dead:
                return
            if self._suspect or (not woke and not self._call_scopes):
                if not await self._answers_ping(session):
                    self._liveness_restarts += 1
                    self.mark_dead(
                        f"no answer to ping within {self.settings.ping_timeout:g} s "
                        "(the server is frozen); restarting it"
                    )
                    self._suspect = False
                    if self._process is not None:
                        self._process.kill()  # frozen: a grace period would only be waited out
                    return
                if self._suspect:
                    self._suspect = False
                    self._set_state(self._state)  # wake the calls that waited for the verdict
            if self._relist:
                self._relist = False
                try:
                    await self._list_tools(session)
                except Exception as error:  # noqa: BLE001 - keep the old list on a failed refresh
                    logger.warning(
                        "MCP server %r: refreshing tools failed: %s", self.name, _describe(error)
                    )
            if self._relist_catalog:
                kinds, self._relist_catalog = self._relist_catalog, set()
                await self._catalog_changed(await self._refresh_catalog(session, kinds))
                await self._catalog_changed(kinds, announced=True)
            for uri in self.subscriptions.take():
                await self._resource_updated(uri)

    async def _resource_updated(self, uri: str) -> None:
        if self._on_resource_updated is None or self._closing:
            return
        with anyio.move_on_after(CATALOG_NOTIFY_TIMEOUT):  # a stuck listener stalls no worker
            try:
                await self._on_resource_updated(self.name, uri)
            except Exception as error:  # noqa: BLE001 - a listener's failure is not the server's
                logger.warning("MCP server %r: update listener failed: %s", self.name, error)

    async def subscribe_resource(self, uri: str) -> None:
        """Subscribe to ``uri`` on the server (now if it is ready, else when it is).

        Raises:
            ValueError: the server offers no subscriptions, or too many are open.
            MCPError: the server refused.
        """
        session = self._session if self._state == "ready" and not self._dead else None
        await self.subscriptions.add(session, uri)

    async def unsubscribe_resource(self, uri: str) -> None:
        """Stop hearing about ``uri`` (never raises: the URI is dropped here either way)."""
        session = self._session if self._state == "ready" and not self._dead else None
        await self.subscriptions.remove(session, uri)

    async def _answers_ping(self, session: ClientSession) -> bool:
        """True when the server answers ``ping`` in time (an error answer counts: it lives)."""
        with anyio.move_on_after(self.settings.ping_timeout):
            try:
                await session.send_ping()
            except MCPError as error:
                return error.code != types.CONNECTION_CLOSED
            return True
        logger.warning(
            "MCP server %r did not answer ping within %g s",
            self.name,
            self.settings.ping_timeout,
        )
        return False

    async def _list_tools(self, session: ClientSession) -> None:
        """List every page (a cursor that repeats or is empty ends the walk) and rebuild specs."""
        tools: list[types.Tool] = []
        seen: set[str] = set()
        cursor: str | None = None
        with anyio.fail_after(self.settings.list_timeout):
            for _ in range(MAX_TOOL_PAGES):
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
                if cursor in seen:
                    logger.warning("MCP server %r repeated tools/list cursor %r", self.name, cursor)
                    break
                seen.add(cursor)
        self._apply_listing(tools, session.protocol_version)
        await self.review_definitions()
        self._listed_once = True

    async def review_definitions(self) -> None:
        """Check the last listing against the tools' pinned definitions, when the settings
        name a pin store (:mod:`sagents.mcp._pins`), and publish the specs if they changed
        (an operator accepted a change: the held tool is released)."""
        specs = self._listed
        pins = self.settings.definition_pins
        if pins is not None:
            specs = await review_definitions(
                self.name, specs, pins, self.settings.on_definition_change
            )
        if specs != self._specs:
            self._specs = specs
            if self._on_tools_changed is not None:
                await self._on_tools_changed(self.name, self._specs)

    def _apply_listing(self, tools: list[types.Tool], protocol_version: str | None) -> None:
        by_name: dict[str, types.Tool] = {}
        specs: list[ToolSpec] = []
        withheld: list[WithheldTool] = []
        if self._tool_filter is not None:
            for name, reason in self._tool_filter.rejected.items():
                logger.warning("MCP server %r: withholding tool %r: %s", self.name, name, reason)
                withheld.append(WithheldTool(name=name, reason=reason))
            self._tool_filter.rejected.clear()
        for tool in tools:
            if tool.name in by_name:
                withheld.append(WithheldTool(name=tool.name, reason="listed twice by the server"))
                continue
            try:
                spec = tool_to_spec(
                    self.name, tool, self.settings, protocol_version=protocol_version
                )
            except UpstreamSchemaError as error:
                reason = str(error.details.get("reason", error.message))
                logger.warning(
                    "MCP server %r: withholding tool %r (%s): %s",
                    self.name,
                    tool.name,
                    mcp_tool_name(self.name, tool.name),
                    reason,
                )
                withheld.append(WithheldTool(name=tool.name, reason=reason))
                continue
            by_name[tool.name] = tool
            specs.append(spec)
        self._tools = by_name
        self._listed = tuple(specs)
        self._withheld = tuple(withheld)
