"""Client side of the MCP Tasks extension: long upstream calls as tasks (docs/mcp.md).

:class:`TasksClient` is an ``mcp`` SDK :class:`~mcp.client.extension.ClientExtension`: passed to
a ``ClientSession``, it declares ``io.modelcontextprotocol/tasks`` on 2026-07-28 requests and
claims the ``CreateTaskResult`` (``resultType: "task"``) that a server may answer a
``tools/call`` with. Its resolver polls ``tasks/get`` at the server's ``pollIntervalMs`` until
the task ends and returns the ``CallToolResult``, so the caller's ``call_tool`` keeps its
contract: no request is held open while the upstream works. Cancelling the caller sends
``tasks/cancel`` (SEP-2663: ``notifications/cancelled`` must not be used for tasks).

A task asking for input (``input_required``, SEP-2663 "Task Update Requests") is answered by
the :class:`TaskInput` bound to :data:`TASK_INPUT` (``sagents serve`` binds one that asks its
own client); its answers go back with ``tasks/update``, each key once. When nobody is bound,
or the one bound cannot answer a request, the task is cancelled upstream and the call fails
with ``not_allowed`` saying why: nothing waits for an answer that cannot come.

With a :class:`TaskStatuses` (``sagents serve``'s upstream sessions have one), a task of a
2026-07-28 server is also watched with a ``subscriptions/listen`` stream naming it in
``taskIds`` (SEP-2663, "Task Status Notifications"): each ``notifications/tasks`` the server
sends is used as that poll's answer at once, and once one came, polling drops to a fallback
every :data:`NOTIFIED_POLL_INTERVAL_S` seconds. A server that sends none is polled as before.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Protocol

import anyio
import mcp_types as mt
from mcp.client.extension import (
    ClaimContext,
    ClientExtension,
    NotificationBinding,
    ResultClaim,
    UnexpectedClaimedResult,
)
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from sagents.errors import NotAllowedError, UpstreamProtocolError
from sagents.mcp._ext_types import (
    TASKS_EXTENSION,
    CancelTaskRequest,
    CreateTaskResult,
    DetailedTaskResult,
    GetTaskRequest,
    TaskIdParams,
    TaskStatusNotificationParams,
    UpdateTaskRequest,
    UpdateTaskRequestParams,
)

__all__ = [
    "CANCEL_TIMEOUT_S",
    "MAX_POLL_INTERVAL_S",
    "MIN_POLL_INTERVAL_S",
    "NOTIFIED_POLL_INTERVAL_S",
    "TASK_INPUT",
    "TaskInput",
    "TaskStatuses",
    "TasksClient",
    "call_tool_or_task",
    "resolve_claimed",
    "resolve_task",
]

logger = logging.getLogger(__name__)

MIN_POLL_INTERVAL_S = 0.05
"""Seconds between two polls at least, whatever the server suggests."""
MAX_POLL_INTERVAL_S = 5.0
"""Seconds between two polls at most (a server suggesting more is polled this often)."""
CANCEL_TIMEOUT_S = 5.0
"""Seconds ``tasks/cancel`` may take when the caller gives up on a task."""
NOTIFIED_POLL_INTERVAL_S = 30.0
"""Seconds between two fallback polls of a task whose server sends status notifications."""
_DEFAULT_POLL_S = 1.0


class TaskStatuses:
    """The ``notifications/tasks`` of one session, kept for the tasks being resolved (the
    latest state of each; a notification of any other task is dropped)."""

    def __init__(self) -> None:
        self._latest: dict[str, DetailedTaskResult | None] = {}
        self._heard: set[str] = set()
        self._events: dict[str, anyio.Event] = {}

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        """The binding that feeds this (for ``ClientSession(notification_bindings=...)``)."""
        return (
            NotificationBinding(
                method="notifications/tasks",
                params_type=TaskStatusNotificationParams,
                handler=self.deliver,
            ),
        )

    def watch(self, task_id: str) -> None:
        """Keep the notifications of ``task_id`` from now on."""
        self._latest[task_id] = None
        self._events[task_id] = anyio.Event()

    def unwatch(self, task_id: str) -> None:
        """Stop keeping them."""
        self._latest.pop(task_id, None)
        self._events.pop(task_id, None)
        self._heard.discard(task_id)

    async def deliver(self, params: TaskStatusNotificationParams) -> None:
        """One ``notifications/tasks``: kept when its task is watched."""
        if params.task_id not in self._latest:
            return
        fields = params.model_dump(by_alias=True, exclude={"meta"}, exclude_none=True)
        try:
            state = DetailedTaskResult.model_validate(fields)
        except ValidationError:
            logger.info("dropped an invalid notifications/tasks of %s", params.task_id)
            return
        self._latest[params.task_id] = state
        self._heard.add(params.task_id)
        self._events[params.task_id].set()

    def heard(self, task_id: str) -> bool:
        """Whether the server sent a notification of ``task_id``."""
        return task_id in self._heard

    def take(self, task_id: str) -> DetailedTaskResult | None:
        """The state a notification brought since the last take, if any."""
        state = self._latest.get(task_id)
        if state is not None:
            self._latest[task_id] = None
        return state

    async def wait(self, task_id: str, seconds: float) -> None:
        """Sleep ``seconds``, or less when a notification of ``task_id`` arrives."""
        event = self._events.get(task_id)
        if event is None:
            await anyio.sleep(seconds)
            return
        with anyio.move_on_after(seconds):
            await event.wait()
        self._events[task_id] = anyio.Event()


class TaskInput(Protocol):
    """Answers an upstream task's input requests (elicitation, sampling, roots)."""

    async def answer(
        self, task_id: str, requests: Mapping[str, mt.InputRequest]
    ) -> mt.InputResponses | str:
        """The responses, one per key; or, when they cannot all be answered, a text saying
        why (the task is then cancelled)."""
        ...


TASK_INPUT: ContextVar[TaskInput | None] = ContextVar("sagents_task_input", default=None)
"""Who answers the input requests of upstream tasks polled in this context (None: nobody)."""


class TasksClient(ClientExtension):
    """Declares the Tasks extension and finishes task results by polling.

    Args:
        statuses: Where the session's ``notifications/tasks`` go (None: not observed).
    """

    identifier = TASKS_EXTENSION

    def __init__(self, statuses: TaskStatuses | None = None) -> None:
        self.statuses = statuses

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        """``notifications/tasks``, when a :class:`TaskStatuses` was given."""
        return self.statuses.notifications() if self.statuses is not None else ()

    def claims(self) -> Sequence[ResultClaim[Any]]:
        """The ``task`` result of ``tools/call`` (2026-07-28 connections)."""
        return (ResultClaim(result_type="task", model=CreateTaskResult, resolve=resolve_task),)


async def call_tool_or_task(
    session: ClientSession,
    name: str,
    arguments: dict[str, Any],
    *,
    progress_callback: ProgressFnT | None = None,
    statuses: TaskStatuses | None = None,
) -> mt.CallToolResult:
    """``tools/call`` on ``session``; a task the server makes of it is polled to its end
    (``statuses``: the session's task notifications, see :func:`resolve_task`).

    Raises:
        MCPError: as ``ClientSession.call_tool``, or the task failed.
        UnexpectedClaimedResult: another extension's result shape (none is declared).
    """
    raw = await session.call_tool(
        name, arguments, progress_callback=progress_callback, allow_claimed=True
    )
    if isinstance(raw, mt.CallToolResult):
        return raw
    return await resolve_claimed(raw, session, name, statuses=statuses)


async def resolve_claimed(
    raw: Any, session: ClientSession, name: str, *, statuses: TaskStatuses | None = None
) -> mt.CallToolResult:
    """The end of a ``tools/call`` whose answer is not a ``CallToolResult``: a task is polled
    to its end (:func:`resolve_task`); anything else is refused.

    Raises:
        MCPError: the task failed, or a poll failed.
        UnexpectedClaimedResult: another extension's result shape (none is declared).
    """
    if isinstance(raw, CreateTaskResult):
        context = ClaimContext(session=session, tool_name=name, read_timeout_seconds=None)
        return await resolve_task(raw, context, statuses=statuses)
    if not isinstance(raw, mt.CallToolResult):
        raise UnexpectedClaimedResult(raw)
    return raw


async def resolve_task(
    created: CreateTaskResult, ctx: ClaimContext, *, statuses: TaskStatuses | None = None
) -> mt.CallToolResult:
    """Poll the task until it ends; its ``CallToolResult``.

    With ``statuses`` (a session that observes ``notifications/tasks``) on a 2026-07-28
    session, the task is also watched on a ``subscriptions/listen`` stream, and a notified
    state stands for a poll.

    A task given up on (the caller cancelled, or the server answered a poll with something
    that is not this task's state) is cancelled on the server with ``tasks/cancel``.

    Raises:
        MCPError: the task failed (its JSON-RPC error), or a poll failed.
        UpstreamProtocolError: a ``tasks/get`` answer is not a task state, is the state of
            another task, or completed with something that is not a ``CallToolResult``.
    """
    session = ctx.session
    task_id = created.task_id
    interval = _interval(created.poll_interval_ms)
    answered: set[str] = set()
    watching = statuses is not None and session.protocol_version in MODERN_PROTOCOL_VERSIONS
    try:
        if statuses is None or not watching:
            return await _resolve(session, task_id, interval, answered, None)
        failure: Exception | None = None
        statuses.watch(task_id)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_listen, session, task_id)
                try:
                    result = await _resolve(session, task_id, interval, answered, statuses)
                except Exception as error:  # noqa: BLE001 - re-raised below, outside the group
                    failure = error
                tg.cancel_scope.cancel()  # ends the listen stream
        finally:
            statuses.unwatch(task_id)
        if failure is not None:
            raise failure
        return result
    except (anyio.get_cancelled_exc_class(), UpstreamProtocolError, NotAllowedError):
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT_S):
            try:
                await session.send_request(
                    CancelTaskRequest(params=TaskIdParams(task_id=task_id)), mt.EmptyResult
                )
            except MCPError as error:
                logger.info("tasks/cancel of %s failed: %s", task_id, error)
        raise


async def _listen(session: ClientSession, task_id: str) -> None:
    """A ``subscriptions/listen`` stream for ``task_id`` until cancelled (its notifications
    reach :class:`TaskStatuses` through the session's binding); a server that refuses it
    is polled only."""
    request = mt.SubscriptionsListenRequest(
        params=mt.SubscriptionsListenRequestParams(
            notifications=mt.SubscriptionFilter(taskIds=[task_id])
        )
    )
    try:
        await session.send_request(request, mt.SubscriptionsListenResult)
    except (MCPError, ValidationError) as error:
        logger.info("no status notifications for task %s: %s", task_id, error)


async def _resolve(
    session: ClientSession,
    task_id: str,
    interval: float,
    answered: set[str],
    statuses: TaskStatuses | None,
) -> mt.CallToolResult:
    while True:
        notified = statuses.take(task_id) if statuses is not None else None
        state = notified if notified is not None else await _poll(session, task_id)
        if state.status == "completed":
            return _call_result(state, task_id)
        if state.status == "failed":
            error = state.error or {}
            raise MCPError(
                int(error.get("code", -32603)),
                str(error.get("message") or state.status_message or "the task failed"),
                data=error.get("data"),
            )
        if state.status == "cancelled":
            text = state.status_message or "the task was cancelled by the server"
            return mt.CallToolResult(content=[mt.TextContent(text=text)], is_error=True)
        if state.status == "input_required":
            await _answer(session, task_id, state, answered)
        interval = _interval(state.poll_interval_ms) if state.poll_interval_ms else interval
        if statuses is None:
            await anyio.sleep(interval)  # the server's polling interval (SEP-2663)
            continue
        # a server that notifies is polled only as a fallback
        wait = NOTIFIED_POLL_INTERVAL_S if statuses.heard(task_id) else interval
        await statuses.wait(task_id, wait)


async def _poll(session: ClientSession, task_id: str) -> DetailedTaskResult:
    """One ``tasks/get`` of ``task_id``, checked to be that task's state."""
    try:
        state = await session.send_request(
            GetTaskRequest(params=TaskIdParams(task_id=task_id)), DetailedTaskResult
        )
    except ValidationError as error:
        raise UpstreamProtocolError(
            f"the server answered tasks/get of task {task_id!r} with no task state: {error}",
            details={"task_id": task_id},
        ) from None
    if state.task_id != task_id:
        raise UpstreamProtocolError(
            f"the server answered tasks/get of task {task_id!r} with the state of task "
            f"{state.task_id!r}",
            details={"task_id": task_id, "answered": state.task_id},
        )
    return state


def _call_result(state: DetailedTaskResult, task_id: str) -> mt.CallToolResult:
    try:
        return mt.CallToolResult.model_validate(state.result or {"content": []})
    except ValidationError as error:
        raise UpstreamProtocolError(
            f"task {task_id!r} completed with a result that is not a CallToolResult: {error}",
            details={"task_id": task_id},
        ) from None


async def _answer(
    session: ClientSession, task_id: str, state: DetailedTaskResult, answered: set[str]
) -> None:
    """Answer the task's fresh input requests (each key once, SEP-2663), or fail the call."""
    fresh = {key: req for key, req in (state.input_requests or {}).items() if key not in answered}
    if not fresh:
        return
    handler = TASK_INPUT.get()
    kinds = sorted({request.method for request in fresh.values()})
    outcome: mt.InputResponses | str = "nobody here can answer it"
    if handler is not None:
        outcome = await handler.answer(task_id, fresh)
    if not isinstance(outcome, str) and any(key not in outcome for key in fresh):
        outcome = "some requests were left unanswered"
    if isinstance(outcome, str):
        reason = outcome
        raise NotAllowedError(
            f"the upstream task {task_id!r} asked for input ({', '.join(kinds)}) and "
            f"{reason}; the task was cancelled",
            hint="use a client that can answer (elicitation), or call the tool another way",
            details={"task_id": task_id, "requests": sorted(fresh)},
        )
    responses: mt.InputResponses = {key: outcome[key] for key in fresh}
    answered.update(fresh)
    await session.send_request(
        UpdateTaskRequest(
            params=UpdateTaskRequestParams(task_id=task_id, input_responses=responses)
        ),
        mt.EmptyResult,
    )


def _interval(poll_interval_ms: int | None) -> float:
    seconds = _DEFAULT_POLL_S if poll_interval_ms is None else poll_interval_ms / 1000
    return min(max(seconds, MIN_POLL_INTERVAL_S), MAX_POLL_INTERVAL_S)
