"""run_script for one session: the tool a model calls (docs/run_script.md; docs/architecture.md,
"One run_script").

:class:`RunScriptTool` ties the run_script core to a session: its tools (a ``ToolProxy`` or any
``ToolProvider``, called with the session's :class:`~sagents.tool.SessionContext` through
``run_tool`` — the same path as a direct call), its sandbox (the default launcher is
:class:`~sagents.script._sandbox_launcher.SandboxLauncher`), its
:class:`~sagents.tool.Approver`, its audit store, and the progress hub: each run's snapshots
go through a :class:`~sagents.progress.ScriptProgressThrottle` (at most one per second, the
last always delivered) to the hub as ``script.progress`` events.

A run still going after ``background_after_s`` (``backgroundCalls.autoAfterSec``) is handed off:
the caller gets a handle text at once; when it ends, a ``background.done`` event carries the
model-facing text to the session. :attr:`RunScriptTool.background` is the gateway's
:class:`~sagents.tool._background.BackgroundRegistry` (``script_status``/``script_cancel``).
Cancelling a run (the caller's cancellation, or ``cancel``) stops it cleanly: status
``cancelled``, records closed, one audit entry. At start-up (``async with``), runs a previous
process left ``running`` in the workspace are marked ``aborted`` and reported failed with a
``background.done`` event each; they are never resumed.

Use::

    async with RunScriptTool(tools=proxy, session=ctx, sandbox=sandbox, runtime=runtime,
                             approver=approver, hub=hub, settings=settings) as rs:
        if rs.should_offer():
            manager.register_tool(rs.as_tool())
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from sagents.audit._store import AuditStore, ReachableStore
from sagents.core._lifespan import Lifespan, body_errors_apart
from sagents.core._limits import ScriptLimits
from sagents.core._result import ErrorInfo, ToolResult
from sagents.core._spec import ToolSpec
from sagents.core.events import (
    BackgroundDoneEvent,
    BackgroundStatus,
    ScriptProgressEvent,
    ToolProgressEvent,
)
from sagents.errors import NotAllowedError, SandboxError, StoreUnavailableError
from sagents.progress._hub import ProgressHub, default_hub
from sagents.progress._scope import run_beside
from sagents.progress._throttle import ScriptProgressThrottle
from sagents.sandbox._local import LocalSandbox
from sagents.sandbox._protocol import Sandbox
from sagents.script._description import run_script_spec, should_offer_run_script
from sagents.script._dispatcher import CallTool
from sagents.script._launcher import Launcher
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME
from sagents.script._records import mark_interrupted_runs, new_script_id
from sagents.script._runner import CLEANUP_TIMEOUT_S, ScriptRunner
from sagents.script._runtime import ScriptRuntime
from sagents.script._sandbox_launcher import SandboxLauncher
from sagents.script._values import ScriptHandle, ScriptProgressUpdate, ScriptRequest
from sagents.tool._approval import Approver, Decision, check_approver
from sagents.tool._background import BackgroundTasks, TaskInfo, handed_off_result
from sagents.tool._context import SessionContext
from sagents.tool._handler import ToolCall, ToolHandler
from sagents.tool._provider import ToolProvider
from sagents.tool.questions import Questioner

__all__ = [
    "NOT_FROM_SCRIPTS",
    "RunScriptSettings",
    "RunScriptTool",
    "script_callable_specs",
]

NOT_FROM_SCRIPTS = frozenset(
    {RUN_SCRIPT_TOOL_NAME, "script_status", "script_cancel", "tool_expand_tools"}
)
"""Tool names a script can never call, whatever their source."""

_BACKGROUND_STATUS: dict[str, BackgroundStatus] = {
    "ok": "ok",
    "timeout": "timeout",
    "cancelled": "cancelled",
}


def script_callable_specs(specs: Sequence[ToolSpec]) -> list[ToolSpec]:
    """The tools a script may be offered (docs/run_script.md, "Permissions"): the session's
    MCP tools and the local tools the application registered; never built-ins (the shell and
    file tools, the skill tools), run_script itself, the background tools or
    ``tool_expand_tools``. The policy then filters by permission class
    (:func:`sagents.script._policy.plan_script`)."""
    return [
        spec
        for spec in specs
        if spec.source.kind in ("mcp", "local") and spec.name not in NOT_FROM_SCRIPTS
    ]


@dataclass(frozen=True, kw_only=True)
class RunScriptSettings:
    """A session's run_script settings.

    Attributes:
        limits: The ``scripts`` block (calls, concurrency, time, output).
        background_after_s: ``backgroundCalls.autoAfterSec``: seconds after which a run still
            going becomes a background call; None never hands off.
        progress_interval_s: Minimum seconds between two ``script.progress`` events (1 s;
            docs/progress.md).
        session_allowed: Write tools the user already allowed for this session.
    """

    limits: ScriptLimits = field(default_factory=ScriptLimits)
    background_after_s: float | None = None
    progress_interval_s: float = 1.0
    session_allowed: frozenset[str] = frozenset()


class RunScriptTool(Lifespan):
    """The ``run_script`` tool of one session; an async context manager (it owns the runs).

    Args:
        tools: The session's tools (a ``ToolProxy`` or a ``ToolManager``); scripts call them
            with ``run_tool(name, args, session)``.
        session: The calling session (its id scopes progress, approvals and background calls;
            its ``permission_mode`` drives the policy).
        sandbox: The session's sandbox; a ``local`` or ``passthrough`` one (the records are
            written on the host, in its workspace).
        runtime: The installed script runtime (:func:`~sagents.script.install_runtime`).
        approver: Asked once before a run that lists write tools in ``ask`` mode (a
            :class:`sagents.tool.Approver`, given an ``ApprovalRequest.for_script``); None
            denies.
        settings: Limits, hand-off delay, progress interval.
        hub: Where ``script.progress`` and ``background.done`` go; the default hub when None.
        audit: Where each run's one ``gateway_call`` entry goes; none when None.
        launcher: Overrides the sandbox launcher (tests; ``PlainLauncher`` has no isolation).
        background: A registry shared with its owner (entered and closed by the owner);
            a private one, entered with this tool when a run can be handed off
            (``settings.background_after_s``), when None. A run that cannot be handed off
            runs for its caller, through no registry.
        mark_interrupted: On entering, mark runs left ``running`` in the workspace
            ``aborted``; False when the owner sweeps every workspace once at its own start
            (the gateway, :mod:`sagents.gateway._restart`), so that one session starting never
            touches the runs of another live process sharing the folder.

    Raises:
        SandboxError: the sandbox has no host workspace or cannot run scripts.
        TypeError: ``approver`` is no :class:`~sagents.tool.Approver` (no ``approve`` method).
    """

    def __init__(
        self,
        *,
        tools: ToolProvider,
        session: SessionContext,
        sandbox: Sandbox,
        runtime: ScriptRuntime,
        approver: Approver | None = None,
        settings: RunScriptSettings | None = None,
        hub: ProgressHub | None = None,
        audit: AuditStore | None = None,
        launcher: Launcher | None = None,
        background: BackgroundTasks | None = None,
        mark_interrupted: bool = True,
    ) -> None:
        if not isinstance(sandbox, LocalSandbox):
            raise SandboxError(
                "run_script needs a sandbox with a host workspace ('local' or 'passthrough')",
                hint="its records are written on the host",
            )
        self._tools = tools
        self._session = session
        self._settings = settings or RunScriptSettings()
        self._workspace = Path(sandbox.host_workspace)
        self._runtime = runtime
        check_approver(approver, "RunScriptTool")
        self._approver = approver
        self._hub = hub or default_hub()
        self._audit = audit
        limits = self._settings.limits
        # Its own launcher is entered with the tool: it keeps a spare sandbox for the next run
        # and tears finished runs' sandboxes down after their result (docs/run_script.md).
        self._own_launcher: SandboxLauncher | None = None
        if launcher is None:
            self._own_launcher = SandboxLauncher(
                sandbox, timeout_s=limits.timeout_s + CLEANUP_TIMEOUT_S
            )
            launcher = self._own_launcher
        self._launcher: Launcher = launcher
        self._owns_tasks = background is None
        # the hand-off only where it can happen: without a delay, a run is its caller's
        self._hands_off = self._settings.background_after_s is not None
        self._tasks = background if background is not None else BackgroundTasks()
        self._tg: anyio.abc.TaskGroup | None = None
        self._live: dict[str, ScriptHandle] = {}
        self._mark_interrupted = mark_interrupted
        self.interrupted: tuple[str, ...] = ()
        """Runs found ``running`` at start-up and marked ``aborted``."""

    # -- lifecycle ------------------------------------------------------------------------------

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        if self._mark_interrupted:
            self.interrupted = tuple(mark_interrupted_runs(self._workspace))
        for script_id in self.interrupted:
            self._hub.publish(
                self._session.session_id,
                BackgroundDoneEvent(
                    handle=script_id,
                    status="error",
                    text=(
                        f"run_script {script_id} was interrupted by a restart and was not "
                        f"resumed; its records (.agent/scripts/{script_id}/) say 'aborted'"
                    ),
                    ts=self._hub.clock.time(),
                ),
            )
        # One stack owns the spare sandbox launcher (when it is ours), the runs' task group
        # and the background calls (when they are ours and a run can be handed off); leaving
        # closes them in reverse order: the background calls, the live runs, then the
        # launcher (it kills the spare).
        async with AsyncExitStack() as stack:
            if self._own_launcher is not None:
                # left as if the body ended normally: it tears the sandboxes down either way
                await stack.enter_async_context(body_errors_apart(self._own_launcher))
            # The body's own error must come out unchanged, not wrapped in the group's
            # ExceptionGroup (run_beside); leaving it ends the runs' task group.
            self._tg = await stack.enter_async_context(run_beside())
            stack.callback(setattr, self, "_tg", None)
            stack.push_async_callback(self._stop_runs)
            if self._owns_tasks and self._hands_off:
                await stack.enter_async_context(self._tasks)
            yield

    async def _stop_runs(self) -> None:
        """Stop what is left cleanly (status 'cancelled', records closed, audit written)."""
        with anyio.CancelScope(shield=True):
            for handle in list(self._live.values()):
                handle.cancel()
            for handle in list(self._live.values()):
                with anyio.move_on_after(CLEANUP_TIMEOUT_S):
                    await handle.wait()

    # -- what the session sees ------------------------------------------------------------------

    @property
    def session(self) -> SessionContext:
        """The session this tool runs for."""
        return self._session

    @property
    def background(self) -> BackgroundTasks:
        """The background calls (the gateway's ``BackgroundRegistry``): list, get, cancel."""
        return self._tasks

    def callable_specs(self) -> list[ToolSpec]:
        """The session's tools a script may be offered (see :func:`script_callable_specs`)."""
        return script_callable_specs(self._tools.list_specs())

    def should_offer(self) -> bool:
        """True when the session has third-party (MCP) tools, so run_script is worth offering."""
        return should_offer_run_script(self.callable_specs())

    def spec(self, *, list_tools: bool = True, first: Sequence[str] = ()) -> ToolSpec:
        """run_script's spec for this session (its description lists the callable tools,
        those named in ``first`` first; with ``list_tools=False`` it only counts them, see
        ``run_script_description``)."""
        return run_script_spec(
            self.callable_specs(),
            mode=self._session.permission_mode,
            limits=self._settings.limits,
            list_tools=list_tools,
            first=first,
        )

    def as_tool(self, *, list_tools: bool = True) -> tuple[ToolSpec, ToolHandler]:
        """A ``(spec, handler)`` pair for ``ToolManager.register_tool`` (give the call a timeout
        above ``scripts.timeoutSec``, or hand it off)."""
        return self.spec(list_tools=list_tools), _Handler(self)

    # -- running ---------------------------------------------------------------------------------

    async def run(
        self,
        code: str,
        tools: Sequence[str] = (),
        description: str = "",
        *,
        tool_call_id: str | None = None,
        decision: Decision | None = None,
        questioner: Questioner | None = None,
        provider: ToolProvider | None = None,
        granted: Collection[str] = (),
    ) -> ToolResult:
        """Run a script; hand it off to the background past ``background_after_s``.

        Args:
            decision: The caller's decision for the listed write tools (the gateway decided
                before the call); None: the pre-run check asks this tool's approver once.
            questioner: Who the script's tool calls ask: the calling call's
                ``SessionContext.questioner``; None: the session's.
            provider: What this run's script calls (a gateway session's offer for scripts,
                given with each call); None: this tool's ``tools``.
            granted: The tools the session's user allowed for the rest of the session (the
                calling call's ``SessionContext.granted``): listed, they are not asked about
                again.

        Returns:
            The model-facing result (``is_error`` unless the status is ``ok``; ``structured``
            holds the run's summary), or, once handed off, the handle text (``structured``:
            ``{"task_id", "status": "running"}``).

        Raises:
            RuntimeError: outside ``async with``.
        """
        request = ScriptRequest(
            code=code,
            tools=tuple(tools),
            description=description,
            tool_call_id=tool_call_id,
            decision=decision,
            questioner=questioner,
            granted=frozenset(granted),
        )
        offer = provider if provider is not None else self._tools
        if not self._hands_off:  # never handed off: no background registry in the way
            return await self._call(request, offer)
        session_id = self._session.session_id
        task_id = await self._tasks.start(
            session_id, RUN_SCRIPT_TOOL_NAME, lambda: self._call(request, offer)
        )

        async def on_done(info: TaskInfo) -> None:
            self._hub.publish(session_id, _done_event(info, tool_call_id, self._hub.clock.time()))

        result = await self._tasks.wait(
            task_id, hand_off_after=self._settings.background_after_s, on_done=on_done
        )
        if result is None:
            return handed_off_result(RUN_SCRIPT_TOOL_NAME, task_id)
        return result

    async def _call(self, request: ScriptRequest, tools: ToolProvider) -> ToolResult:
        if self._tg is None:
            raise RuntimeError("RunScriptTool is not running; use 'async with RunScriptTool(...)'")
        if isinstance(self._audit, ReachableStore):
            try:  # a store known to be down: refused before anything runs (no audit row)
                await self._audit.ensure_reachable()
            except StoreUnavailableError as error:
                return ToolResult.from_exception(error)
        handle: ScriptHandle = await self._tg.start(self._host, request, tools)
        try:
            result = await handle.wait()
        except anyio.get_cancelled_exc_class():
            handle.cancel()  # a clean stop: status 'cancelled', records closed, audit written
            with anyio.CancelScope(shield=True):
                await handle.wait()
            raise
        error = None
        if result.error_code is not None:  # refused before it ran: the code crosses the wire
            error = ErrorInfo(code=result.error_code, message=result.output)
        return ToolResult(
            content=ToolResult.from_text(result.output).content,
            structured={**result.to_dict(), "output": None},
            is_error=result.status != "ok",
            error=error,
        )

    async def _host(
        self,
        request: ScriptRequest,
        tools: ToolProvider,
        *,
        task_status: anyio.abc.TaskStatus[ScriptHandle] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Own one run (in the tool's task group, beyond any caller's cancellation: the caller
        cancels the handle, which stops the run cleanly). The run's one task group is its
        runner's; the progress throttle's timer runs in the tool's."""
        assert self._tg is not None  # started in it
        session_id = self._session.session_id
        clock = self._hub.clock

        def send(event: ScriptProgressEvent) -> None:
            self._hub.publish(session_id, event)

        async with ScriptProgressThrottle(
            send,
            clock=clock,
            interval_s=self._settings.progress_interval_s,
            task_group=self._tg,
        ) as throttle:

            def on_progress(update: ScriptProgressUpdate) -> None:
                throttle.update(_progress_event(update, clock.time()))

            decoders = {name: codecs.getincrementaldecoder("utf-8")("replace")
                        for name in ("stdout", "stderr")}  # fmt: skip

            def on_output(stream: str, chunk: bytes) -> None:
                # The raw output goes to the hub's watchers only (the web console's panes):
                # never into the client's progress nor the result.
                text = decoders[stream].decode(chunk)
                if text and request.tool_call_id:
                    event = ToolProgressEvent(
                        tool_call_id=request.tool_call_id,
                        text=text,
                        stream="stderr" if stream == "stderr" else "stdout",
                        ts=clock.time(),
                    )
                    self._hub.show_watchers(session_id, event)

            runner = ScriptRunner(
                specs=script_callable_specs(tools.list_specs()),
                call_tool=self._calls_under(None, tools=tools),
                workspace=self._workspace,
                runtime=self._runtime,
                launcher=self._launcher,
                mode=self._session.permission_mode,
                approver=self._approver,
                session_allowed=self._settings.session_allowed,
                limits=self._settings.limits,
                audit=self._audit,
                on_progress=on_progress,
                session_id=session_id,
                on_output=on_output,
                bind_decision=functools.partial(
                    self._calls_under, questioner=request.questioner, tools=tools
                ),
            )
            handle = ScriptHandle(script_id=new_script_id(), request=request)
            self._live[handle.script_id] = handle
            try:
                task_status.started(handle)
                await runner.run_handle(handle)
            finally:
                self._live.pop(handle.script_id, None)

    def _calls_under(
        self,
        decision: Decision | None,
        *,
        tools: ToolProvider,
        questioner: Questioner | None = None,
    ) -> CallTool:
        """The call seam of one run over its ``tools``: the same path as a direct call, its
        context carrying the run's decision (None: the session's own policy step decides), so
        that nothing further down decides again, and the questioner of the call that ran it
        (None: the session's)."""
        context = replace(
            self._session, decision=decision, questioner=questioner or self._session.questioner
        )

        async def call_tool(name: str, arguments: dict[str, Any]) -> ToolResult:
            if name in NOT_FROM_SCRIPTS:  # the policy refuses these first; never reach them
                return ToolResult.from_exception(
                    NotAllowedError(f"{name!r} cannot be called from a script")
                )
            return await tools.run_tool(name, arguments, context)

        return call_tool


@dataclass(frozen=True)
class _Handler:
    """run_script as a registered tool's handler."""

    tool: RunScriptTool

    async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        return await self.tool.run(
            str(arguments.get("code", "")),
            _names(arguments.get("tools")),
            str(arguments.get("description", "")),
            tool_call_id=call.tool_call_id,
            questioner=call.session_context.questioner,
            granted=call.session_context.granted,
        )


def _names(value: object) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(item) for item in value)
    return ()


def _progress_event(update: ScriptProgressUpdate, ts: float) -> ScriptProgressEvent:
    return ScriptProgressEvent(
        script_id=update.script_id,
        tool_call_id=update.tool_call_id,
        calls=update.calls,
        failures=update.failures,
        done=update.done,
        total=update.total,
        message=update.message,
        elapsed_s=update.elapsed_s,
        status=update.status,
        ts=ts,
    )


def _done_event(info: TaskInfo, tool_call_id: str | None, ts: float) -> BackgroundDoneEvent:
    structured = info.result.structured if info.result is not None else None
    script_status = structured.get("status") if isinstance(structured, dict) else None
    if info.status == "cancelled":
        status: BackgroundStatus = "cancelled"
    else:
        status = _BACKGROUND_STATUS.get(str(script_status), "error")
    return BackgroundDoneEvent(
        handle=info.task_id,
        tool_call_id=tool_call_id,
        status=status,
        text=info.result.text if info.result is not None else "",
        ts=ts,
    )
