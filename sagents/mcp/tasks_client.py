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
    ResultClaim,
    UnexpectedClaimedResult,
)
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from sagents.errors import NotAllowedError, UpstreamProtocolError
from sagents.mcp.ext_types import (
    TASKS_EXTENSION,
    CancelTaskRequest,
    CreateTaskResult,
    DetailedTaskResult,
    GetTaskRequest,
    TaskIdParams,
    UpdateTaskRequest,
    UpdateTaskRequestParams,
)

__all__ = [
    "CANCEL_TIMEOUT_S",
    "MAX_POLL_INTERVAL_S",
    "MIN_POLL_INTERVAL_S",
    "TASK_INPUT",
    "TaskInput",
    "TasksClient",
    "call_tool_or_task",
    "resolve_task",
]

logger = logging.getLogger(__name__)

MIN_POLL_INTERVAL_S = 0.05
"""Seconds between two polls at least, whatever the server suggests."""
MAX_POLL_INTERVAL_S = 5.0
"""Seconds between two polls at most (a server suggesting more is polled this often)."""
CANCEL_TIMEOUT_S = 5.0
"""Seconds ``tasks/cancel`` may take when the caller gives up on a task."""
_DEFAULT_POLL_S = 1.0


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
    """Declares the Tasks extension and finishes task results by polling."""

    identifier = TASKS_EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        """The ``task`` result of ``tools/call`` (2026-07-28 connections)."""
        return (ResultClaim(result_type="task", model=CreateTaskResult, resolve=resolve_task),)


async def call_tool_or_task(
    session: ClientSession,
    name: str,
    arguments: dict[str, Any],
    *,
    progress_callback: ProgressFnT | None = None,
) -> mt.CallToolResult:
    """``tools/call`` on ``session``; a task the server makes of it is polled to its end.

    Raises:
        MCPError: as ``ClientSession.call_tool``, or the task failed.
        UnexpectedClaimedResult: another extension's result shape (none is declared).
    """
    raw = await session.call_tool(
        name, arguments, progress_callback=progress_callback, allow_claimed=True
    )
    if isinstance(raw, CreateTaskResult):
        context = ClaimContext(session=session, tool_name=name, read_timeout_seconds=None)
        return await resolve_task(raw, context)
    if not isinstance(raw, mt.CallToolResult):
        raise UnexpectedClaimedResult(raw)
    return raw


async def resolve_task(created: CreateTaskResult, ctx: ClaimContext) -> mt.CallToolResult:
    """Poll the task until it ends; its ``CallToolResult``.

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
    try:
        while True:
            state = await _poll(session, task_id)
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
            await anyio.sleep(interval)  # the server's polling interval (SEP-2663)
    except (anyio.get_cancelled_exc_class(), UpstreamProtocolError, NotAllowedError):
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT_S):
            try:
                await session.send_request(
                    CancelTaskRequest(params=TaskIdParams(task_id=task_id)), mt.EmptyResult
                )
            except MCPError as error:
                logger.info("tasks/cancel of %s failed: %s", task_id, error)
        raise


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
