"""One gateway ``tools/call``, from the session's offer to its result (docs/gateway.md,
"Tools"; docs/architecture.md, "One tool call").

:meth:`CallPipeline.call` takes a call of a known session through three steps:

- **offer**: the gateway's own tools (``script_status`` / ``script_cancel``, tool search) are
  answered here; any other name must be one the session's
  :class:`~sagents.gateway._offer.SessionOffer` offers (and lists: a tool withheld from
  ``tools/list`` is not callable either);
- **decision**: :class:`~sagents.gateway._decision.CallDecider` decides once, asking the user
  when the session's mode says so; the :class:`~sagents.tool.Decision` travels with the call in
  its :class:`~sagents.tool.ToolRequest`;
- **hand-off**: the offer runs the request, with its progress forwarded as
  ``notifications/progress`` (values strictly increasing, nothing after the result); past
  ``background_after_s`` (or at once for a Tasks client's run_script) the call goes on as a
  background call and the client gets its handle (or a ``CreateTaskResult``).
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

import anyio
import mcp_types as mt
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagents.core._result import ToolResult
from sagents.core._secrets import Redactor
from sagents.core._spec import ToolSpec
from sagents.errors import StoreError, UnknownToolError, UpstreamSchemaError
from sagents.gateway._approval import ClientAsker
from sagents.gateway._convert import check_servable, to_call_tool_result
from sagents.gateway._decision import CallDecider
from sagents.gateway._ext_tasks import TaskInputs, TaskRequest, TasksExtension
from sagents.gateway._principals import PRINCIPAL_KEY
from sagents.gateway._progress import ProgressForwarder, progress_listened
from sagents.gateway._questions import ElicitationQuestioner
from sagents.gateway._seams import ProgressSource
from sagents.gateway._sessions import GatewaySession, ServingRules, request_connection
from sagents.gateway._task_input import ForwardedTaskInput
from sagents.gateway._tasks import GatewayTasks
from sagents.gateway._tool_search import ToolSearch
from sagents.gateway._workspaces import Workspaces
from sagents.mcp._tasks_client import TASK_INPUT
from sagents.progress import default_hub
from sagents.progress._binding import LazyToolCall
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME
from sagents.tool._approval import Decision
from sagents.tool._background import (
    CANCEL_TOOL,
    STATUS_TOOL,
    TASK_URI_PREFIX,
    TaskInfo,
    handed_off_result,
)
from sagents.tool._call import ToolRequest
from sagents.tool._context import SessionContext

__all__ = ["CallPipeline"]

logger = logging.getLogger(__name__)


class CallPipeline:
    """The ``tools/call`` of the gateway's sessions: offer, decision, hand-off.

    Args:
        rules: The rules in force (``background_after_s`` is read at each call).
        decider: The one policy step.
        tasks: The gateway's background calls.
        task_ext: The MCP Tasks extension (a Tasks client's call may become a task).
        changes: Where 2026-07-28 listeners hear that a background call ended.
        progress: Where each call's progress comes from; None forwards none.
        workspace: One directory, or the per-session workspaces, for each call's context.
        tool_search: The tool-search mode, or None.
        redactor: Secrets redacted from each result before a background call's store keeps
            it; None: nothing is.
    """

    def __init__(
        self,
        *,
        rules: ServingRules,
        decider: CallDecider,
        tasks: GatewayTasks,
        task_ext: TasksExtension,
        changes: InMemorySubscriptionBus,
        progress: ProgressSource | None,
        workspace: str | Workspaces | None,
        tool_search: ToolSearch | None,
        redactor: Redactor | None,
    ) -> None:
        self._rules = rules
        self._decider = decider
        self._tasks = tasks
        self._task_ext = task_ext
        self._changes = changes
        self._progress = progress
        self._workspace = workspace
        self._tool_search = tool_search
        self._redactor = redactor

    async def call(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: GatewaySession,
        params: mt.CallToolRequestParams,
        task: TaskRequest | None,
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        """Answer one ``tools/call`` of ``session``; ``task``: the call of a client that
        negotiated the Tasks extension (it may become a task), else None."""
        arguments: dict[str, Any] = dict(params.arguments or {})
        background = self._rules.background_after_s is not None
        if background and params.name in (STATUS_TOOL, CANCEL_TOOL):
            return to_call_tool_result(
                await self._tasks.tool(session.scope, params.name, arguments)
            )
        search = self._tool_search
        if search is not None and search.is_own(params.name):
            return to_call_tool_result(await self._search(ctx, session, params.name, arguments))
        spec = session.offer.get(params.name)
        if spec is None:
            error = UnknownToolError(
                f"no tool {params.name!r} is offered to this session",
                hint="call tools/list for the tools this session may call",
                details={"tool": params.name},
            )
            return to_call_tool_result(ToolResult.from_exception(error))
        try:
            check_servable(spec)  # a tool withheld from tools/list is not callable either
        except UpstreamSchemaError as schema_error:
            return to_call_tool_result(ToolResult.from_exception(schema_error))
        if search is not None:  # offered but not listed: expand it first
            refusal = search.refusal(session.search_state(), spec.name)
            if refusal is not None:
                return to_call_tool_result(refusal)
        try:
            decision = await self._decider.decide(ctx, params, session, spec, arguments)
        except StoreError as error:  # grants and approval nonces live in the store: not run
            logger.warning("call of %r refused, its approval needs the store: %s", spec.name, error)
            return to_call_tool_result(ToolResult.from_exception(error))
        if not isinstance(decision, Decision):
            return decision  # a refusal, or an InputRequiredResult asking a 2026-07-28 client
        # the call's channel to its client; a Tasks client's asks through the task
        asker, task_input = (
            self._task_ext.asker(ctx)
            if task is not None
            else (self._decider.client_asker(ctx), None)
        )
        self._decider.counting(asker)
        request = ToolRequest(
            spec.name,
            arguments,
            self._context(session, spec, decision, asker),
            tool_call_id=f"call_{os.urandom(8).hex()}",
        )
        return to_call_tool_result(
            await self._run(ctx, session, spec, request, asker, task, task_input)
        )

    async def _search(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: GatewaySession,
        name: str,
        arguments: dict[str, Any],
    ) -> ToolResult:
        """``search_tools`` / ``tool_expand_tools``; after an expansion the client is told that
        its list changed (handshake-era connections; others see it on their next list)."""
        assert self._tool_search is not None
        result, changed = await self._tool_search.call(
            session.search_state(), name, arguments, session.offer.list_specs()
        )
        if changed and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            try:
                await ctx.session.send_tool_list_changed()
            except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
                logger.info("could not tell the client its tools changed: %s", error)
        return result

    def _context(
        self, session: GatewaySession, spec: ToolSpec, decision: Decision, asker: ClientAsker
    ) -> SessionContext:
        """The call's session context, carrying its decision (the session's ``ToolProxy`` and
        run_script's pre-run check hold the call to it and never decide again) and its
        questioner (the questionnaire tool asks this call's client)."""
        workspace = self._workspace
        if isinstance(workspace, Workspaces):
            # created on the first call that runs here (docs/gateway.md, "Sessions and
            # workspaces"): an upstream MCP tool never uses the session's folder
            if spec.source.kind != "mcp" or spec.name == RUN_SCRIPT_TOOL_NAME:
                workspace = str(workspace.for_session(session.session_id))
            else:
                if session.workspace_path is None:
                    session.workspace_path = str(workspace.path_for(session.session_id))
                workspace = session.workspace_path
        return SessionContext(
            session_id=session.session_id,
            workspace=workspace,
            permission_mode=session.mode,
            trusted={PRINCIPAL_KEY: session.identity},  # whose quota it uses (quotas)
            decision=decision,
            questioner=ElicitationQuestioner(asker),
        )

    async def _run(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: GatewaySession,
        spec: ToolSpec,
        request: ToolRequest,
        asker: ClientAsker,
        task: TaskRequest | None,
        task_input: TaskInputs | None,
    ) -> ToolResult:
        """Run the call with its progress forwarded; hand it off after ``background_after_s``."""
        name = request.name
        server = spec.source.server or name

        async def call() -> ToolResult:
            # The call is bound with its context, so that what asks the client mid-call and
            # has no call value (run_script's approver, current_client_asker()) finds this
            # call's asker in it, whatever provider runs it (a ToolManager binds its own).
            bound = LazyToolCall(
                default_hub(), session.session_id, request.tool_call_id, request.session_context
            )
            # an upstream task's own questions go to this call's client
            input_token = TASK_INPUT.set(ForwardedTaskInput(asker, server))
            try:
                with bound:
                    # A failed call is already its result (ToolManager.call, the one
                    # boundary); a provider that raises broke its contract, and the SDK
                    # answers the request with a JSON-RPC internal error.
                    result = await session.offer.call(request)
                # before a background call's store, and the console, keep it
                return self._redactor.result(result) if self._redactor else result
            finally:
                TASK_INPUT.reset(input_token)

        hand_off_after = self._rules.background_after_s
        if task is not None and name == RUN_SCRIPT_TOOL_NAME:
            hand_off_after = 0.0  # a run_script of a Tasks client is a task
        # a Tasks client's call becomes a task early when it asks for input
        early = task_input.hand_off if task_input is not None else None

        async def in_background() -> ToolResult:
            """The call as a background call: its result if it ends in time, else its
            handle (or, for a Tasks client, the task made of it)."""
            task_id = await self._tasks.start(session.session_id, name, call)
            done = await self._tasks.wait(
                task_id,
                hand_off_after=hand_off_after,
                on_done=self._notifier(ctx),
                hand_off_now=early,
            )
            if done is None:
                refused = await self._tasks.handed_off(session.scope, task_id, name)
                if refused is not None:  # not recorded, so stopped (docs/scale-out.md)
                    return refused
                if task is not None and task_input is not None:
                    self._task_ext.created(task, task_id, task_input)
            return done if done is not None else handed_off_result(name, task_id)

        # the hand-off only where it can happen: a call that is never handed off runs here
        direct = (hand_off_after is None and early is None) or _asks_the_user(spec)
        run = call if direct else in_background
        if self._progress is None or not _progress_wanted(ctx, session, spec):
            # Nobody would see the call's progress: no subscription, so the provider's call
            # is not listened to either (an upstream is then not asked for progress).
            return await run()
        forwarder = ProgressForwarder(ctx, log_level=session.log_level)
        events: MemoryObjectReceiveStream[object] | None = None
        stop = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                events = await tg.start(self._subscribe, session.session_id, request, stop)
                tg.start_soon(forwarder.forward, events)
                try:
                    result = await run()
                finally:
                    # Ending the subscription ends the forwarder once it has sent what was
                    # emitted (cancelling it could lose an event it is in the middle of sending).
                    stop.set()
            if events is not None:
                await forwarder.drain(events)  # before the result: nothing is sent after it
        finally:
            if events is not None:
                events.close()
        return result

    async def _subscribe(
        self,
        session_id: str,
        request: ToolRequest,
        stop: anyio.Event,
        *,
        task_status: anyio.abc.TaskStatus[MemoryObjectReceiveStream[object]],
    ) -> None:
        assert self._progress is not None
        assert request.tool_call_id is not None  # given by the pipeline
        async with self._progress.subscribe(session_id, request.tool_call_id) as events:
            task_status.started(events.clone())
            await stop.wait()

    def _notifier(self, ctx: ServerRequestContext[Any, Any]) -> Any:
        connection = request_connection(ctx)  # its standalone channel, after the request

        async def on_done(info: TaskInfo) -> None:
            await self._tasks.finished(info)
            self._task_ext.finished(info)
            await self._changes.publish(ResourcesListChanged())  # 2026-07-28 listeners
            try:
                await connection.send_resource_list_changed()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await connection.log(
                        "info",
                        {
                            "event": "background.done",
                            "task_id": info.task_id,
                            "tool": info.tool,
                            "status": info.status,
                            "uri": TASK_URI_PREFIX + info.task_id,
                        },
                        logger="sagents.gateway",
                    )
            except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
                logger.info("could not notify the client of task %s: %s", info.task_id, error)

        return on_done


def _progress_wanted(
    ctx: ServerRequestContext[Any, Any], session: GatewaySession, spec: ToolSpec
) -> bool:
    """Whether the call's progress is subscribed to (docs/gateway.md, "Progress").

    The gateway's own tools (``run_script``, built-ins, local tools) report in process, so
    their progress is always followed. A forwarded upstream tool is followed only when the
    client would see it (:func:`~sagents.gateway._progress.progress_listened`): otherwise the
    upstream is not asked for progress at all, which keeps the forwarded call at its cost.
    """
    if spec.source.kind != "mcp":
        return True
    return progress_listened(ctx, logs_requested=session.logs_requested)


def _asks_the_user(spec: ToolSpec) -> bool:
    """The built-in ``questionnaire`` waits for the user through this very request (an
    elicitation): it is never handed off to the background."""
    return spec.source.kind == "builtin" and spec.name == "questionnaire"
