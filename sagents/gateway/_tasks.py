"""The gateway's background calls: the live registry, the store behind it, and their tools.

:class:`GatewayTasks` answers ``script_status`` / ``script_cancel`` and the task resources
(``sagents://tasks/<id>``) for one session's :class:`TaskScope`, from the live registry
(:class:`~sagents.tool._background.BackgroundTasks`) first and then from the task store
(a :class:`~sagents.store._protocols.TaskStore`: SQLite for one process, PostgreSQL shared by
replicas), which keeps handed-off calls across restarts (docs/gateway.md, "Background calls";
docs/scale-out.md):

- a session sees its own live calls; its owner (a token and profile, or the one local client)
  also sees the calls of earlier processes, those a restart ended as ``failed`` included;
- a session without identity (2026-07-28 over HTTP without a token) lists nothing: each call
  is reached only through its handle, 128 random bits that only its starter received;
- entering sweeps what a previous process left ``running`` (:mod:`sagents.gateway._restart`),
  when no other gateway shares the store; a shared store sweeps the calls of dead replicas
  by lease instead;
- a finished call is kept in the store, not in memory: once its end is written, the live
  registry forgets it (its result is read back from the store), and ``script_status`` lists
  a session's calls in pages of :data:`STATUS_PAGE_SIZE` (``cursor`` / ``next_cursor``);
  without a store, finished calls stay in memory until their session ends;
- on a shared store, ``script_cancel`` of a call another replica runs asks that replica
  (:meth:`~sagents.store._protocols.TaskStore.request_cancel`) and waits for its end, and this
  replica cancels its own calls when another asks;
- when the store fails (:class:`~sagents.errors.StoreError`; docs/scale-out.md, "When the
  database is down"): a hand-off that cannot be recorded does not go on (the call is stopped
  and the answer says so: no JSON-RPC error for a call that would then run anyway); an end
  that cannot be written is written again, with backoff, until it is; an end the store already
  holds (a sweep marked the call ``failed``) is not overwritten, and the call is shown as the
  store says.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, replace
from typing import Any

import anyio

from sagents.audit._tasks import SqliteTaskStore, StoredTask
from sagents.core._lifespan import Lifespan
from sagents.core._result import ToolResult
from sagents.errors import StoreError, StoreUnavailableError, TaskNotFoundError
from sagents.gateway._restart import StartupLock, sweep_tasks
from sagents.store._embedded import SqliteTasks
from sagents.store._protocols import TaskStore
from sagents.tool._background import CANCEL_TOOL, BackgroundTasks, TaskInfo, task_json

__all__ = [
    "RECENT_FINISHED",
    "REMOTE_CANCEL_WAIT_S",
    "STATUS_PAGE_SIZE",
    "STOP_REASON",
    "SUMMARY_CHARS",
    "GatewayTasks",
    "ResultCharge",
    "TaskScope",
    "stored_task_json",
]

logger = logging.getLogger(__name__)

REMOTE_CANCEL_WAIT_S = 10.0
"""Seconds ``script_cancel`` waits for another replica to end a call it runs (then it answers
with the call as the store shows it, ``running`` if that replica did not answer)."""
RECENT_FINISHED = 200
"""Finished calls whose summary (the first :data:`SUMMARY_CHARS` of the result) stays in
memory for the operator's view (the web console's background page); the store keeps them all."""
SUMMARY_CHARS = 500
STATUS_PAGE_SIZE = 10
"""Background calls one ``script_status`` listing answers at most; ``next_cursor`` (passed
back as ``cursor``) gives the next ones."""
_REMOTE_POLL_S = 0.1  # seconds between reads of the store while a remote cancel is awaited
STOP_REASON = "gateway stopped"
"""The ``reason`` kept with a call that was still running when the gateway stopped (it is
``cancelled``, by the gateway rather than by a client)."""
END_RETRY_S = (1.0, 30.0)  # first and longest wait between tries of writing a call's end


@dataclass(frozen=True, kw_only=True)
class _End:
    """How a handed-off call ended, as written to the store."""

    task_id: str
    status: str
    result: str
    is_error: bool
    reason: str | None


@dataclass(frozen=True, kw_only=True)
class TaskScope:
    """Whose background calls a request may see.

    Attributes:
        session_id: The gateway session (its live calls).
        owner: The owner key of the session's calls in the store ("" when nothing identifies
            the client).
        anonymous: The session may be shared by clients without identity: list nothing.
        principal: Whose quota the session's stored results use (``quotas.principalBytes``;
            "" for every client without a token).
    """

    session_id: str
    owner: str = ""
    anonymous: bool = False
    principal: str = ""


ResultCharge = Callable[[str, str, int], Awaitable[str | None]]
"""``charge(session id, principal, bytes)``: charges a result the store is to keep to its
session's quotas; returns None when charged, else the setting it would pass
(``quotas.workspaceBytes``, ``quotas.principalBytes``) and charges nothing."""


class GatewayTasks(Lifespan):
    """Live background calls and their store; an async context manager.

    Args:
        store: Where handed-off calls are kept across restarts; None keeps them in memory.
        charge: Charges each result the store is to keep (docs/configuration.md, "quotas"):
            one that does not fit is kept as a ``quota_exceeded`` error naming the setting
            instead; None charges nothing.
    """

    def __init__(
        self,
        store: TaskStore | SqliteTaskStore | None = None,
        *,
        charge: ResultCharge | None = None,
    ) -> None:
        self.charge = charge
        self._principal: dict[str, str] = {}  # handed-off ids -> their session's principal
        self.live = BackgroundTasks()
        self.store: TaskStore | None = (
            SqliteTasks(store) if isinstance(store, SqliteTaskStore) else store
        )
        self._own: dict[str, str] = {}  # ids this process runs in the background -> session
        # the finished calls of each live session that the store keeps: (started at, id)
        self._ended: dict[str, list[tuple[float, str]]] = {}
        self._recent: deque[TaskInfo] = deque(maxlen=RECENT_FINISHED)
        self._recorded: dict[str, anyio.Event] = {}  # set once the hand-off row is written
        self._lock: StartupLock | None = None
        self._stopping = False
        self._superseded: set[str] = set()  # ended in the store before they ended here
        self._unrecorded: set[str] = set()  # hand-offs the store did not record (stopped)
        self._unwritten: dict[str, _End] = {}  # ends the store did not take yet
        self._end_waiting = anyio.Event()

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        # One stack owns what is taken here; leaving (or a failure while entering) gives it
        # back in reverse order: the live calls end, then the listener and the lock go.
        async with AsyncExitStack() as stack:
            store = self.store
            if store is not None and store.shared:
                store.on_cancel(self._cancel_requested)  # a dead replica's calls: swept by lease
                stack.callback(store.on_cancel, None)
            elif isinstance(store, SqliteTasks):
                lock = self._lock = StartupLock(store.path.parent)
                stack.callback(lock.release)
                if lock.acquire():
                    try:
                        await sweep_tasks(store)
                    except StoreUnavailableError as error:  # a full disk: swept next start
                        logger.warning("interrupted background calls not swept: %s", error)
            if store is not None:
                retries = await stack.enter_async_context(anyio.create_task_group())
                retries.start_soon(self._write_unwritten_ends)
                stack.callback(retries.cancel_scope.cancel)  # after the live calls ended
            await stack.enter_async_context(self.live)
            stack.callback(self._stop)  # first on leaving
            yield

    def _stop(self) -> None:
        self._stopping = True  # what ends from now on was cancelled by the stop

    async def _cancel_requested(self, task_id: str) -> None:
        """Another replica's ``script_cancel``: cancel the call if this process runs it."""
        session_id = self._own.get(task_id)
        if session_id is None:
            return
        with anyio.move_on_after(REMOTE_CANCEL_WAIT_S), suppress(TaskNotFoundError):
            await self.live.cancel(session_id, task_id)  # not found: it ended meanwhile

    async def start(
        self, session_id: str, tool: str, call: Callable[[], Awaitable[ToolResult]]
    ) -> str:
        """Start a call in the live registry (see ``BackgroundTasks.start``)."""
        return await self.live.start(session_id, tool, call)

    async def wait(
        self,
        task_id: str,
        *,
        hand_off_after: float | None,
        on_done: Callable[[TaskInfo], Awaitable[None]] | None = None,
        hand_off_now: anyio.Event | None = None,
    ) -> ToolResult | None:
        """Wait for a call or hand it off (see ``BackgroundTasks.wait``)."""
        return await self.live.wait(
            task_id, hand_off_after=hand_off_after, on_done=on_done, hand_off_now=hand_off_now
        )

    async def handed_off(self, scope: TaskScope, task_id: str, tool: str) -> ToolResult | None:
        """Keep a handed-off call in the store (its end is written only after this row).

        Returns:
            None once recorded. When the store cannot record it, the hand-off does not go on:
            the call is stopped (and waited for), and this is the answer to give instead, a
            ``store_unavailable`` error (a client that retries does not run it twice).
        """
        self._own[task_id] = scope.session_id
        if self.store is None:
            return None
        self._principal[task_id] = scope.principal
        recorded = self._recorded[task_id] = anyio.Event()
        try:
            await self.store.started(task_id, owner=scope.owner, tool=tool, started_at=time.time())
        except StoreError as error:
            self._recorded.pop(task_id, None)
            self._own.pop(task_id, None)
            self._unrecorded.add(task_id)
            logger.warning("background call %s not recorded, so stopped: %s", task_id, error)
            with anyio.CancelScope(shield=True), suppress(TaskNotFoundError):
                await self.live.cancel(scope.session_id, task_id)
            return ToolResult.from_error(
                error.code,
                f"the call of {tool!r} ran past the time a call is waited on, and could not be "
                f"handed off to the background: {error.message}; it was stopped",
                hint="try again once the store is back (see the gateway's log)",
                details=dict(error.details),
            )
        finally:
            recorded.set()
        return None

    async def finished(self, info: TaskInfo) -> None:
        """Record how a handed-off call ended (with :data:`STOP_REASON` when the gateway
        stopping cancelled it). An end the store cannot take now is written later; an end it
        already holds (a sweep's) is kept, and the call is shown as the store says."""
        if self.store is None or info.result is None:
            return
        stopped = self._stopping and info.status == "cancelled"
        recorded = self._recorded.pop(info.task_id, None)
        if recorded is not None:
            await recorded.wait()
        principal = self._principal.pop(info.task_id, "")
        if info.task_id in self._unrecorded:
            self._unrecorded.discard(info.task_id)
            return  # its hand-off was never recorded: no row to end
        end = _End(
            task_id=info.task_id,
            status=info.status,
            result=info.result.text,
            is_error=info.result.is_error,
            reason=STOP_REASON if stopped else None,
        )
        end = await self._charged(end, info.session_id, principal)
        try:
            await self._write_end(end)
        except StoreError as error:
            logger.warning(
                "background call %s ended %s; the store did not take its end (%s): it is "
                "written again when the store is back",
                end.task_id,
                end.status,
                error,
            )
            self._unwritten[end.task_id] = end
            self._end_waiting.set()
        else:
            # written: the store keeps it, memory only its id for the session's listing
            self._own.pop(info.task_id, None)
            self.live.forget(info.task_id)
            self._ended.setdefault(info.session_id, []).append((info.started_at, info.task_id))
            self._keep_recent(info)

    async def _charged(self, end: _End, session_id: str, principal: str) -> _End:
        """``end`` once its result is charged to the session's quotas; when it does not fit,
        a ``quota_exceeded`` error naming the setting is kept instead of the result."""
        if self.charge is None:
            return end
        size = len(end.result.encode())
        setting = await self.charge(session_id, principal, size)
        if setting is None:
            return end
        refused = ToolResult.from_error(
            "quota_exceeded",
            f"the result of background call {end.task_id} ({size} bytes) is not kept: it "
            f"would pass {setting}",
            hint=f"free some of the session's space, or raise {setting}",
            details={"limit": setting, "bytes": size},
        )
        logger.warning("background call %s: result not kept, over %s", end.task_id, setting)
        return replace(end, status="error", result=refused.text, is_error=True)

    def _keep_recent(self, info: TaskInfo) -> None:
        """Keep a finished call's summary for the operator's view (bounded)."""
        result = info.result
        if result is not None:
            result = ToolResult(
                content=ToolResult.from_text(result.text[:SUMMARY_CHARS]).content,
                is_error=result.is_error,
            )
        self._recent.append(replace(info, result=result))

    def operator_view(self) -> list[TaskInfo]:
        """Every session's background calls, oldest first: those running and those that
        ended lately (their results cut to :data:`SUMMARY_CHARS` once in the store)."""
        live = self.live.list_all()
        shown = {info.task_id for info in live}
        recent = [info for info in self._recent if info.task_id not in shown]
        return sorted([*recent, *live], key=lambda info: info.started_at)

    def forget_session(self, session_id: str) -> None:
        """Drop what memory holds of an ended session's finished calls (the store keeps
        them: their owner still lists and reads them)."""
        self._ended.pop(session_id, None)
        kept = {info.task_id for info in self._recent}
        for info in self.live.list(session_id):
            if info.status != "running":
                if info.task_id not in kept:
                    self._keep_recent(info)  # without a store, this is all the operator sees
                self.live.forget(info.task_id)
                self._own.pop(info.task_id, None)

    def superseded(self, task_id: str) -> bool:
        """Whether the store ended ``task_id`` before it ended here (a sweep marked it
        ``failed``): the store's status is the call's."""
        return task_id in self._superseded

    async def _write_end(self, end: _End) -> None:
        assert self.store is not None
        written = await self.store.finished(
            end.task_id,
            status=end.status,
            result=end.result,
            is_error=end.is_error,
            reason=end.reason,
        )
        if not written:
            self._superseded.add(end.task_id)

    async def _write_unwritten_ends(self) -> None:
        """Write the ends the store did not take, again and again (with backoff) until it
        takes them; what is left when the gateway stops is swept at the next start."""
        delay = END_RETRY_S[0]
        while True:
            if not self._unwritten:
                self._end_waiting = anyio.Event()
                await self._end_waiting.wait()
            await anyio.sleep(delay)
            try:
                for end in list(self._unwritten.values()):
                    await self._write_end(end)
                    del self._unwritten[end.task_id]
                    logger.warning("the end of background call %s is written", end.task_id)
            except StoreError:
                delay = min(delay * 2, END_RETRY_S[1])
            else:
                delay = END_RETRY_S[0]

    async def unannounced(self, owner: str) -> list[StoredTask]:
        """The owner's calls a restart ended that it was not told of yet (then told); none
        while the store fails (they stay untold in it, for the owner's next session)."""
        if self.store is None:
            return []
        try:
            return await self.store.take_unannounced(owner)
        except StoreError as error:
            logger.warning("calls a restart ended are not announced now: %s", error)
            return []

    def listed(self, scope: TaskScope) -> list[TaskInfo]:
        """The session's live background calls, as listed (none for an anonymous session)."""
        return [] if scope.anonymous else self.live.list(scope.session_id)

    async def tool(self, scope: TaskScope, name: str, arguments: dict[str, Any]) -> ToolResult:
        """``script_status(id?)`` or ``script_cancel(id)`` for the session."""
        task_id = arguments.get("id")
        if task_id is not None and not isinstance(task_id, str):
            return ToolResult.from_error("invalid_arguments", "'id' must be a string")
        cursor = arguments.get("cursor")
        offset = _offset(cursor)
        if offset is None:
            return ToolResult.from_error(
                "invalid_arguments",
                f"'cursor' must be a next_cursor an earlier script_status returned, got {cursor!r}",
                hint="call script_status without 'cursor' for the first page",
            )
        try:
            if name == CANCEL_TOOL:
                if task_id is None:
                    return ToolResult.from_error("invalid_arguments", "'id' is required")
                try:
                    info = await self.live.cancel(scope.session_id, task_id)
                except TaskNotFoundError:
                    if task_id in self._own:  # another live session's: not this one's
                        raise
                    return ToolResult.from_structured(await self.cancel_elsewhere(scope, task_id))
                return ToolResult.from_structured(task_json(info))
            if task_id is None:
                if scope.anonymous:
                    return ToolResult.from_error(
                        "invalid_arguments",
                        "background calls are not listed on a connection without a bearer "
                        "token (other clients may share it); pass the id the call returned",
                        hint="call script_status(id=...) with the task id of the handed-off call",
                    )
                return ToolResult.from_structured(await self._listing(scope, offset))
            return ToolResult.from_structured(await self.view(scope, task_id))
        except (TaskNotFoundError, StoreError) as error:
            return ToolResult.from_exception(error)

    async def view(self, scope: TaskScope, task_id: str) -> dict[str, Any]:
        """One call as JSON: a live one of the session, else one the store holds for it.

        Raises:
            TaskNotFoundError: neither.
        """
        if task_id in self._superseded:
            return await self._stored(scope, task_id)
        try:
            return task_json(self.live.get(scope.session_id, task_id), full=True)
        except TaskNotFoundError:
            return await self._stored(scope, task_id)

    def runs_in_another_session(self, scope: TaskScope, task_id: str) -> bool:
        """Whether this process handed off ``task_id`` for another session than ``scope``'s."""
        session = self._own.get(task_id)
        return session is not None and session != scope.session_id

    async def cancel_elsewhere(self, scope: TaskScope, task_id: str) -> dict[str, Any]:
        """Cancel a call another replica runs (through the store), and wait for its end.

        Raises:
            TaskNotFoundError: the store has no such call for this session.
        """
        view = await self._stored(scope, task_id)
        if view["status"] != "running" or self.store is None:
            return view
        if not await self.store.request_cancel(task_id):
            return view  # nobody else shares the store: a call left by an earlier process
        with anyio.move_on_after(REMOTE_CANCEL_WAIT_S):
            while view["status"] == "running":
                await anyio.sleep(_REMOTE_POLL_S)
                view = await self._stored(scope, task_id)
        return view

    async def _stored(self, scope: TaskScope, task_id: str) -> dict[str, Any]:
        """A call of an earlier process (or of this one, once it ended): its owner sees it; a
        call without owner is reached by its handle alone.

        Raises:
            TaskNotFoundError: the store has no such call for this session.
        """
        stored = await self.store.get(task_id) if self.store is not None else None
        if stored is None or (stored.owner and stored.owner != scope.owner):
            raise TaskNotFoundError(
                f"no background task {task_id!r} in this session",
                hint="call script_status without an id to list this session's tasks",
                details={"task_id": task_id},
            )
        return stored_task_json(stored)

    async def _listing(self, scope: TaskScope, offset: int) -> dict[str, Any]:
        """One page of the session's calls, oldest first: its owner's calls in the store
        (earlier processes', and this one's finished), the session's other finished calls,
        then what runs now."""
        earlier = await self._earlier(scope)
        listed = {row["id"] for row in earlier}
        rows: list[tuple[float, str, dict[str, Any] | None]] = [
            (float(row["started_at"] or 0.0), row["id"], row) for row in earlier
        ]
        rows.extend(
            (started, task_id, None)  # read from the store if it is on the page
            for started, task_id in self._ended.get(scope.session_id, [])
            if task_id not in listed
        )
        rows.extend(
            # a call whose end the store holds from a sweep is shown as the store says
            (i.started_at, i.task_id, None if i.task_id in self._superseded else task_json(i))
            for i in self.live.list(scope.session_id)
        )
        rows.sort(key=lambda row: row[0])
        tasks: list[dict[str, Any]] = []
        for _, task_id, row in rows[offset : offset + STATUS_PAGE_SIZE]:
            if row is None:
                stored = await self.store.get(task_id) if self.store is not None else None
                if stored is None:
                    continue
                row = stored_task_json(stored, full=False)
            tasks.append(row)
        page: dict[str, Any] = {"tasks": tasks}
        if offset + STATUS_PAGE_SIZE < len(rows):
            page["next_cursor"] = str(offset + STATUS_PAGE_SIZE)
        return page

    async def _earlier(self, scope: TaskScope) -> list[dict[str, Any]]:
        """The owner's calls of earlier processes (this process's are listed live)."""
        if self.store is None or not scope.owner:
            return []
        return [
            stored_task_json(stored, full=False)
            for stored in await self.store.owned(scope.owner)
            if stored.task_id not in self._own
        ]


def _offset(cursor: object) -> int | None:
    """The listing offset a ``cursor`` names (0 without one); None for a cursor that is not
    one this module gave."""
    if cursor is None:
        return 0
    if isinstance(cursor, str) and cursor.isdigit() and len(cursor) < 10:
        return int(cursor)
    return None


def stored_task_json(stored: StoredTask, *, full: bool = True) -> dict[str, Any]:
    """A stored call in the shape of :func:`~sagents.tool._background.task_json` (plus
    ``reason`` when a restart ended it)."""
    data: dict[str, Any] = {
        "id": stored.task_id,
        "tool": stored.tool,
        "status": stored.status,
        "started_at": stored.started_at,
        "finished_at": stored.finished_at,
    }
    if stored.reason is not None:
        data["reason"] = stored.reason
    if stored.result is not None:
        data["result"] = stored.result if full else stored.result[:200]
    if stored.is_error is not None:
        data["is_error"] = stored.is_error
    return data
