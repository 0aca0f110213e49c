"""The MCP Tasks extension (``io.modelcontextprotocol/tasks``) in ``sagents serve``.

For a 2026-07-28 client that declares the extension in its request capabilities, a
``run_script`` call, and any call still running after ``--background-after``, is answered
with a ``CreateTaskResult`` (``resultType: "task"``) instead of the gateway's handed-off text;
the call goes on as one of the gateway's background calls (:mod:`sagents.gateway._tasks`), so
the rules of those hold: scoped to the caller (the same :class:`~sagents.gateway._tasks.TaskScope`
as ``script_status``), kept in the task store, never resumed after a restart.

- ``tasks/get``: ``working`` (``input_required`` with the pending ``inputRequests`` while the
  call waits for an approval), then ``completed`` with the ``CallToolResult`` (a tool error is
  ``completed`` with ``isError``), ``cancelled``, or ``failed`` with a JSON-RPC error when the
  gateway stopped or restarted during the call (status message ``aborted: gateway stopped``
  or ``aborted: gateway restarted``).
- ``tasks/update``: answers the pending input requests (run_script's approval is an
  elicitation form, as on every other connection); unknown or answered keys are ignored.
- ``tasks/cancel``: cancels the call (its whole process tree for run_script) and answers once
  it has ended; a finished task is left as it is (the same empty answer).
- ``notifications/tasks`` (SEP-2663, "Task Status Notifications"): a ``subscriptions/listen``
  stream of the task's owner that names it in ``taskIds`` gets the task's whole state (what
  ``tasks/get`` would answer) each time its status changes: ``input_required`` and back to
  ``working``, and its end (:meth:`TasksExtension.watch`).

Over HTTP the client must send ``Mcp-Name: <taskId>`` with the three methods (SEP-2663,
"Streamable HTTP: Routing Headers"); the SDK checks ``Mcp-Name`` only for its core methods,
so this module checks it. Clients without the extension keep ``script_status`` /
``script_cancel``. Source: SEP-2663 and github.com/modelcontextprotocol/ext-tasks.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from sagents.errors import TaskNotFoundError
from sagents.gateway._approval import APPROVAL_TIMEOUT_S, ClientAsker
from sagents.gateway._convert import to_call_tool_result
from sagents.gateway._extensions import request_extensions
from sagents.gateway._tasks import GatewayTasks, TaskScope
from sagents.mcp._ext_types import (
    TASKS_EXTENSION,
    CreateTaskResult,
    DetailedTaskResult,
    TaskIdParams,
)
from sagents.tool._background import TaskInfo

__all__ = [
    "POLL_INTERVAL_MS",
    "TASK_TTL_MS",
    "TaskAsker",
    "TaskInputs",
    "TaskRequest",
    "TasksExtension",
]

logger = logging.getLogger(__name__)

TASK_TTL_MS = 24 * 3600 * 1000
"""Milliseconds a task is promised to stay readable (the store keeps it longer)."""
POLL_INTERVAL_MS = 1000
"""Suggested milliseconds between two ``tasks/get`` of a working task."""

_INVALID_PARAMS = -32602  # SEP-2663, "Error Handling": unknown taskId
_INTERNAL_ERROR = -32603
_HEADER_MISMATCH = -32020  # 2026-07-28, Streamable HTTP routing headers
_MISSING_CAPABILITY = -32021  # SEP-2663: tasks/* from a client that did not declare it


class _UpdateParams(TaskIdParams):
    """``tasks/update`` params as received: a response is validated only for a pending key
    (responses to unknown keys are ignored, whatever they hold)."""

    input_responses: dict[str, Any]


_ELICIT_RESULT: TypeAdapter[mt.ElicitResult] = TypeAdapter(mt.ElicitResult)


@dataclass(kw_only=True)
class TaskRequest:
    """One ``tools/call`` of a client that negotiated Tasks (:meth:`TasksExtension.request_for`),
    carried with the call through the gateway's call pipeline.

    The gateway fills ``created`` when it turns the call into a task: the client is answered
    with it instead of the call's result.
    """

    ctx: ServerRequestContext[Any, Any]
    created: CreateTaskResult | None = None


@dataclass(kw_only=True)
class _Pending:
    request: mt.ElicitRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    response: mt.ElicitResult | None = None


@dataclass(kw_only=True)
class TaskInputs:
    """The input requests of one task: what ``tasks/get`` shows and ``tasks/update`` answers."""

    pending: dict[str, _Pending] = field(default_factory=dict)
    keys: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    updated_at: float | None = None
    hand_off: anyio.Event = field(default_factory=anyio.Event)
    """Set when the call asks for input: it becomes a task at once, so that the client sees
    the question on ``tasks/get``."""
    changed: Callable[[], None] | None = None
    """Called when the pending requests change (status notifications), once a task."""


class TaskAsker(ClientAsker):
    """Asks through the task (``input_required`` until ``tasks/update`` answers).

    The asker of a task's call, so that what the call asks (a tool's question) reaches the
    client of the task.
    """

    def __init__(
        self,
        ctx: ServerRequestContext[Any, Any],
        task_input: TaskInputs,
        *,
        timeout_s: float = APPROVAL_TIMEOUT_S,
    ) -> None:
        super().__init__(ctx, timeout_s=timeout_s)
        self._input = task_input
        self._can = ctx.session.check_client_capability(
            mt.ClientCapabilities(elicitation=mt.ElicitationCapability())
        )

    @property
    def can_ask(self) -> bool:
        """Whether the client declared elicitation (its answers travel on ``tasks/update``)."""
        return self._can

    async def choose(self, message: str, schema: mt.ElicitRequestedSchema) -> mt.ElicitResult:
        """Publish the form as an input request and wait for its answer (a timeout of
        :attr:`timeout_s`, ``approvals.timeoutSec``, is a cancel)."""
        key = f"sagents_input_{next(self._input.keys)}"  # never reused within a task
        pending = _Pending(
            request=mt.ElicitRequest(
                params=mt.ElicitRequestFormParams(message=message, requested_schema=schema)
            )
        )
        self._input.pending[key] = pending
        self._input.updated_at = datetime.now(UTC).timestamp()
        self._input.hand_off.set()
        if self._input.changed is not None:
            self._input.changed()  # input_required
        try:
            with anyio.move_on_after(self.timeout_s):
                await pending.answered.wait()
        finally:
            self._input.pending.pop(key, None)
            self._input.updated_at = datetime.now(UTC).timestamp()
            if self._input.changed is not None:
                self._input.changed()  # working again
        return pending.response or mt.ElicitResult(action="cancel")


class TasksExtension(Extension):
    """``tasks/get`` / ``tasks/update`` / ``tasks/cancel`` over the gateway's background calls.

    Args:
        tasks: The gateway's background calls.
        scope_of: The caller's task scope for a request (as ``script_status`` uses).
    """

    identifier = TASKS_EXTENSION

    def __init__(
        self,
        tasks: GatewayTasks,
        scope_of: Callable[[ServerRequestContext[Any, Any]], TaskScope],
        *,
        approval_timeout_s: float = APPROVAL_TIMEOUT_S,
    ) -> None:
        self._tasks = tasks
        self._scope_of = scope_of
        self._approval_timeout_s = approval_timeout_s
        self._inputs: dict[str, TaskInputs] = {}
        self._watchers: dict[str, dict[object, Callable[[dict[str, Any]], None]]] = {}

    def methods(self) -> Sequence[MethodBinding]:
        """The three task methods, on 2026-07-28 connections only (the extension's base)."""
        versions = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (
            MethodBinding("tasks/get", TaskIdParams, self._get, protocol_versions=versions),
            MethodBinding("tasks/update", _UpdateParams, self._update, protocol_versions=versions),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel, protocol_versions=versions),
        )

    @staticmethod
    def negotiated(ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether this request may be answered with a task (2026-07-28, extension declared)."""
        return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and (
            TASKS_EXTENSION in request_extensions(ctx)
        )

    def request_for(self, ctx: ServerRequestContext[Any, Any]) -> TaskRequest | None:
        """The :class:`TaskRequest` of a ``tools/call`` that may become a task (a client that
        negotiated the extension), or None."""
        return TaskRequest(ctx=ctx) if self.negotiated(ctx) else None

    # The gateway's side -------------------------------------------------------------------

    def asker(self, ctx: ServerRequestContext[Any, Any]) -> tuple[TaskAsker, TaskInputs]:
        """A fresh asker for a call that may become a task (see :meth:`created`)."""
        task_input = TaskInputs()
        return TaskAsker(ctx, task_input, timeout_s=self._approval_timeout_s), task_input

    def created(self, request: TaskRequest, task_id: str, task_input: TaskInputs) -> None:
        """Record that the call ``task_id`` became a task; its ``CreateTaskResult`` is what
        the client receives (the task is in the registry and the store already)."""
        self._inputs[task_id] = task_input
        session_id = self._scope_of(request.ctx).session_id
        task_input.changed = lambda: self._publish(session_id, task_id)
        if task_input.pending:
            self._publish(session_id, task_id)  # asked before it was a task: input_required already
        now = _iso(datetime.now(UTC).timestamp())
        request.created = CreateTaskResult(
            task_id=task_id,
            status="working",
            status_message="the call runs in the background; poll tasks/get",
            created_at=now,
            last_updated_at=now,
            ttl_ms=TASK_TTL_MS,
            poll_interval_ms=POLL_INTERVAL_MS,
        )

    def finished(self, info: TaskInfo) -> None:
        """Tell the task's watchers how it ended; forget its input requests."""
        watchers = self._watchers.pop(info.task_id, {})
        if watchers:
            state = _notification_params(self._live(info))
            for deliver in list(watchers.values()):
                deliver(state)
        self._inputs.pop(info.task_id, None)

    # Status notifications -----------------------------------------------------------------

    def watch(
        self,
        ctx: ServerRequestContext[Any, Any],
        task_ids: Sequence[str],
        deliver: Callable[[dict[str, Any]], None],
    ) -> tuple[list[str], Callable[[], None]]:
        """Deliver ``notifications/tasks`` params for the caller's running tasks among
        ``task_ids`` (a listen stream's ``taskIds``): their state at once, then at each
        status change; another caller's, unknown and finished tasks are not honored.

        Returns:
            The task ids honored, and a function that ends the watch.
        """
        scope = self._scope_of(ctx)
        token = object()
        honored: list[str] = []
        for task_id in dict.fromkeys(task_ids):
            try:
                info = self._tasks.live.get(scope.session_id, task_id)
            except TaskNotFoundError:
                continue
            if info.status != "running":
                continue
            self._watchers.setdefault(task_id, {})[token] = deliver
            honored.append(task_id)
            deliver(_notification_params(self._live(info)))  # sent after the acknowledgment

        def stop() -> None:
            for task_id in honored:
                watchers = self._watchers.get(task_id)
                if watchers is not None:
                    watchers.pop(token, None)
                    if not watchers:
                        del self._watchers[task_id]

        return honored, stop

    def _publish(self, session_id: str, task_id: str) -> None:
        watchers = self._watchers.get(task_id)
        if not watchers:
            return
        try:
            info = self._tasks.live.get(session_id, task_id)
        except TaskNotFoundError:
            return
        state = _notification_params(self._live(info))
        for deliver in list(watchers.values()):
            deliver(state)

    # Methods ------------------------------------------------------------------------------

    async def _get(
        self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams
    ) -> DetailedTaskResult:
        self._check(ctx, params.task_id)
        scope = self._scope_of(ctx)
        if self._tasks.superseded(params.task_id):  # a sweep ended it: as the store says
            return await self._stored(scope, params.task_id)
        try:
            info = self._tasks.live.get(scope.session_id, params.task_id)
        except TaskNotFoundError:
            return await self._stored(scope, params.task_id)
        return self._live(info)

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: _UpdateParams
    ) -> mt.EmptyResult:
        await self._get(ctx, TaskIdParams(task_id=params.task_id))  # checked, and the caller's
        task_input = self._inputs.get(params.task_id)
        for key, response in params.input_responses.items():
            pending = task_input.pending.get(key) if task_input is not None else None
            if pending is None or pending.answered.is_set():
                continue  # unknown or answered keys are ignored (SEP-2663)
            try:
                pending.response = _ELICIT_RESULT.validate_python(response)
            except ValidationError as error:
                raise MCPError(
                    _INVALID_PARAMS,
                    f"inputResponses[{key!r}] is not an elicitation result: {error}",
                ) from None
            pending.answered.set()
        return mt.EmptyResult(result_type="complete")

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams
    ) -> mt.EmptyResult:
        self._check(ctx, params.task_id)
        scope = self._scope_of(ctx)
        try:
            await self._tasks.live.cancel(scope.session_id, params.task_id)
        except TaskNotFoundError:
            # ended already: acknowledged; unknown: refused (by _stored)
            state = await self._stored(scope, params.task_id)
            if state.status == "working" and self._tasks.runs_in_another_session(
                scope, params.task_id
            ):
                # the owner's, but run by another session of this process: this one cannot
                # end it, so it must not answer as if it had
                raise MCPError(
                    _INVALID_PARAMS,
                    f"task {params.task_id!r} runs in another session of this client; cancel "
                    "it from that session (script_cancel)",
                    data={"taskId": params.task_id},
                ) from None
            # running on another replica of a shared store: asked there (docs/scale-out.md)
            await self._tasks.cancel_elsewhere(scope, params.task_id)
        return mt.EmptyResult(result_type="complete")

    # Views --------------------------------------------------------------------------------

    def _live(self, info: TaskInfo) -> DetailedTaskResult:
        task_input = self._inputs.get(info.task_id)
        updated = info.finished_at or info.started_at
        if task_input is not None and task_input.updated_at is not None:
            updated = max(updated, task_input.updated_at)
        base: dict[str, Any] = {
            "task_id": info.task_id,
            "created_at": _iso(info.started_at),
            "last_updated_at": _iso(updated),
            "ttl_ms": TASK_TTL_MS,
        }
        if info.status == "running":
            pending = {
                key: p.request
                for key, p in (task_input.pending if task_input is not None else {}).items()
                if not p.answered.is_set()
            }
            if pending:
                return DetailedTaskResult(
                    status="input_required",
                    status_message="waiting for the user's answer",
                    input_requests=dict(pending),
                    poll_interval_ms=POLL_INTERVAL_MS,
                    **base,
                )
            return DetailedTaskResult(status="working", poll_interval_ms=POLL_INTERVAL_MS, **base)
        if info.status == "cancelled":
            return DetailedTaskResult(status="cancelled", status_message="cancelled", **base)
        if info.result is None:  # ended without a result: only a restart does that
            return DetailedTaskResult(status="failed", error=_aborted(), **base)
        result = to_call_tool_result(info.result).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
        return DetailedTaskResult(status="completed", result=result, **base)

    async def _stored(self, scope: TaskScope, task_id: str) -> DetailedTaskResult:
        try:
            view = await self._tasks.view(scope, task_id)
        except TaskNotFoundError:
            raise MCPError(
                _INVALID_PARAMS,
                "Failed to retrieve task: Task not found",
                data={"taskId": task_id},
            ) from None
        started = float(view.get("started_at") or 0.0)
        finished = view.get("finished_at")
        base: dict[str, Any] = {
            "task_id": task_id,
            "created_at": _iso(started),
            "last_updated_at": _iso(float(finished) if finished is not None else started),
            "ttl_ms": TASK_TTL_MS,
        }
        status = str(view.get("status"))
        if status == "running":  # live in another session of the same owner
            return DetailedTaskResult(status="working", poll_interval_ms=POLL_INTERVAL_MS, **base)
        if status == "cancelled" and view.get("reason"):
            status = "failed"  # the gateway stopped during the call: aborted, not cancelled
        if status == "cancelled":
            return DetailedTaskResult(status="cancelled", status_message="cancelled", **base)
        if status in ("ok", "error"):
            result = mt.CallToolResult(
                content=[mt.TextContent(text=str(view.get("result") or ""))],
                is_error=bool(view.get("is_error")),
            ).model_dump(by_alias=True, mode="json", exclude_none=True)
            return DetailedTaskResult(status="completed", result=result, **base)
        reason = str(view.get("reason") or "the call ended without a result")
        return DetailedTaskResult(
            status="failed", status_message=f"aborted: {reason}", error=_aborted(reason), **base
        )

    @staticmethod
    def _check(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
        """The client declared the extension on this request, and over HTTP its ``Mcp-Name``
        names the task (SEP-2663, "Error Handling" and "Streamable HTTP: Routing Headers")."""
        if TASKS_EXTENSION not in request_extensions(ctx):
            raise MCPError(
                _MISSING_CAPABILITY,
                f"Missing required client capability: declare {TASKS_EXTENSION!r} in the "
                "request's client capabilities to use tasks",
                data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        request = ctx.request
        headers = getattr(request, "headers", None)
        if headers is None:
            return  # stdio or in memory: no routing headers
        if decode_header_value(headers.get(MCP_NAME_HEADER)) != task_id:
            raise MCPError(
                _HEADER_MISMATCH,
                f"{MCP_NAME_HEADER} header does not match the request's taskId",
            )


def _notification_params(state: DetailedTaskResult) -> dict[str, Any]:
    """A ``DetailedTask`` as ``notifications/tasks`` params (no ``resultType``)."""
    params = state.model_dump(by_alias=True, mode="json", exclude_none=True)
    params.pop("resultType", None)
    return params


def _aborted(reason: str = "gateway restarted") -> dict[str, Any]:
    return {
        "code": _INTERNAL_ERROR,
        "message": f"aborted: {reason}; the call was not resumed (call the tool again)",
    }


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")
