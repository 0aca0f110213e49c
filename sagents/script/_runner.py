"""One run_script run, start to end (docs/architecture.md, "One run_script").

policy check → pre-flight check (docs/run_script.md) → approval → records → launch with fds
3/4 → dispatcher + output drain → exit, timeout, output cap or cancel (whole tree killed, calls
in flight cancelled) → records complete → one audit entry → the model-facing text; then, after
the result, the records made durable (``fsync``): :meth:`ScriptRunner.run` returns after it, an
entered runner waits for it.

:meth:`ScriptRunner.run` waits for the result; :meth:`ScriptRunner.run_handle` runs a handle
made by its caller, who keeps it to cancel the run cleanly from another task (a session's
``RunScriptTool``). Inside ``async with runner:``, :meth:`ScriptRunner.start` returns a
:class:`ScriptHandle` at once, to be awaited or cancelled later. Either way a run opens one task
group of its own while the script runs (the dispatcher's aside).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio
from anyio.abc import ByteReceiveStream, TaskGroup
from opentelemetry.trace import StatusCode

from sagents.audit._store import AuditEntry, AuditStore
from sagents.core._lifespan import Lifespan
from sagents.core._limits import ScriptLimits
from sagents.core._permissions import PermissionMode
from sagents.core._spec import ToolSpec
from sagents.core._tracing import span
from sagents.errors import (
    NotAllowedError,
    PreflightError,
    QuotaExceededError,
    SagentsError,
    SandboxError,
    ScriptRejectedError,
    StoreError,
)
from sagents.sandbox._local import LocalSandbox
from sagents.sandbox._types import SandboxParams
from sagents.script._dispatcher import MAX_TRACED_CALLS, CallTool, ScriptDispatcher
from sagents.script._launcher import Launcher, LaunchSpec, ScriptProcess
from sagents.script._output import OutputCapture, RunSummary, format_model_text
from sagents.script._policy import ScriptPlan, plan_script
from sagents.script._preflight import check_script
from sagents.script._records import CALLS_FLUSH_INTERVAL_S, ScriptRecords, new_script_id
from sagents.script._runtime import ScriptRuntime
from sagents.script._sandbox_launcher import SandboxLauncher
from sagents.script._transport import PipeTransport
from sagents.script._values import (
    ScriptHandle,
    ScriptProgressUpdate,
    ScriptRequest,
    ScriptRunResult,
    ScriptStatus,
)
from sagents.tool._approval import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    Decision,
    DenyAllApprover,
    check_approver,
    denial_reason,
    settle_answer,
)

__all__ = ["CLEANUP_TIMEOUT_S", "ScriptRunner"]

logger = logging.getLogger(__name__)

CLEANUP_TIMEOUT_S = 10.0  # bound on killing and reaping the tree after the run


def _default_launcher(workspace: Path, limits: ScriptLimits) -> Launcher:
    """A bubblewrap launcher over a ``local`` sandbox of ``workspace`` (no silent fallback:
    raises ``SandboxUnavailableError`` where bubblewrap is missing)."""
    sandbox = LocalSandbox(SandboxParams(workspace=str(workspace)))
    return SandboxLauncher(sandbox, timeout_s=limits.timeout_s + CLEANUP_TIMEOUT_S)


@dataclass(kw_only=True)
class _Run:
    status: ScriptStatus | None = None
    exit_code: int | None = None
    note: str | None = None
    started: float = field(default_factory=time.monotonic)


RUN_SPAN = "sagents.run_script"
"""The span of one run_script run (docs/observability.md, "Traces")."""


class ScriptRunner(Lifespan):
    """Runs scripts for one session.

    Args:
        specs: Every tool of the session (``ToolSpec.permission`` drives the policy).
        call_tool: The seam that runs one tool call, as a direct call would.
        workspace: The session workspace on the host (records go to ``.agent/scripts/``).
        runtime: The installed ``script-runtime`` directory.
        launcher: Starts the script. None: a
            :class:`~sagents.script._sandbox_launcher.SandboxLauncher` over a ``local``
            (bubblewrap) sandbox of ``workspace``; :class:`PlainLauncher` (no isolation) only
            when passed explicitly.
        mode: The session's permission mode.
        approver: Asked once before a run that lists write tools, in ``ask`` mode, with an
            ``ApprovalRequest.for_script`` (:mod:`sagents.tool._approval`); anything but
            ``allow_once`` denies. None denies without asking. Not asked for a request that
            carries its caller's decision (``ScriptRequest.decision``).
        session_allowed: Tools the user already allowed for this session.
        limits: Calls, concurrency, time and output limits.
        audit: Where the run's ``gateway_call`` entry goes (none when None).
        on_progress: Receives progress snapshots (must not block).
        session_id: The session, for approvals and the audit.
        on_output: Receives each chunk of the script's output with its stream (``stdout``,
            ``stderr``) as it arrives (must not block).
        bind_decision: Makes the call seam of one run from the run's
            :class:`~sagents.tool.Decision`, so that the decision travels with each of the
            script's calls (``RunScriptTool`` puts it in the calls' ``SessionContext``) and
            nothing further down decides again; None: ``call_tool`` as it is.

    Raises:
        TypeError: ``approver`` is no :class:`~sagents.tool.Approver` (no ``approve`` method).
    """

    def __init__(
        self,
        *,
        specs: Sequence[ToolSpec],
        call_tool: CallTool,
        workspace: Path,
        runtime: ScriptRuntime,
        launcher: Launcher | None = None,
        mode: PermissionMode = "ask",
        approver: Approver | None = None,
        session_allowed: Collection[str] = (),
        limits: ScriptLimits | None = None,
        audit: AuditStore | None = None,
        on_progress: Callable[[ScriptProgressUpdate], None] | None = None,
        session_id: str | None = None,
        on_output: Callable[[str, bytes], None] | None = None,
        bind_decision: Callable[[Decision], CallTool] | None = None,
    ) -> None:
        self._specs = list(specs)
        self._bind = bind_decision
        self._on_output = on_output
        self._call_tool = call_tool
        self._workspace = workspace
        self._runtime = runtime
        self._limits = limits or ScriptLimits()
        self._launcher: Launcher = launcher or _default_launcher(workspace, self._limits)
        self._mode: PermissionMode = mode
        check_approver(approver, "ScriptRunner")
        self._approver: Approver = approver or DenyAllApprover()
        self._session_allowed = frozenset(session_allowed)
        self._audit = audit
        self._on_progress = on_progress
        self._session_id = session_id
        self._task_group: TaskGroup | None = None

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as self._task_group:
            try:
                yield
            finally:
                self._task_group = None

    async def start(self, request: ScriptRequest) -> ScriptHandle:
        """Start a run in the runner's task group and return its handle at once.

        Raises:
            RuntimeError: outside ``async with runner:``.
        """
        if self._task_group is None:
            raise RuntimeError("ScriptRunner.start() needs 'async with ScriptRunner(...)'")
        handle = ScriptHandle(script_id=new_script_id(), request=request)
        self._task_group.start_soon(self.run_handle, handle)
        return handle

    async def run(self, request: ScriptRequest) -> ScriptRunResult:
        """Run a script and wait for its result (never raises for the script's own failure)."""
        handle = ScriptHandle(script_id=new_script_id(), request=request)
        await self.run_handle(handle)
        return await handle.wait()

    async def run_handle(self, handle: ScriptHandle) -> None:
        """Run ``handle``'s request in this task, to its end, and settle the handle (its
        ``wait()`` gives the result). The run's one task group is opened here, for the
        time the script runs; an entered runner is not needed.

        ``handle.cancel()`` stops the run cleanly (status ``cancelled``, records closed, the
        audit entry written); the caller's own cancellation would cut it short, so a caller
        whose waiter may be cancelled runs it in a task of its own and cancels the handle.
        """
        # one span per run, the parent of its calls' spans (docs/observability.md, "Traces")
        with span(RUN_SPAN, {"sagents.script.id": handle.script_id}) as current:
            result = await self._run_traced(handle)
            if current is not None and result is not None:
                current.set_attributes(
                    {
                        "sagents.script.status": result.status,
                        "sagents.script.calls": result.calls,
                        "sagents.script.failures": result.failed,
                        "sagents.script.traced_calls": min(result.calls, MAX_TRACED_CALLS),
                    }
                )
                if result.status != "ok":
                    current.set_attribute("error.type", result.error_code or result.status)
                    current.set_status(StatusCode.ERROR)

    async def _run_traced(self, handle: ScriptHandle) -> ScriptRunResult | None:
        ended: list[ScriptRecords] = []
        result = None
        failure: Exception | None = None
        try:
            result = await self._execute(handle, ended)
        except Exception as error:  # the run fails, never the runner's host: wait() raises it
            failure = error
            if not isinstance(error, SagentsError):  # a bug or a broken set-up
                logger.exception("run %s failed before it could give a result", handle.script_id)
        finally:
            # The records are complete (written) and the audit entry is in the store before the
            # result, so whoever gets the result finds the run (the console, another replica);
            # the records' fsync (milliseconds to tens of milliseconds on a busy disk) comes
            # right after it, beyond any cancellation (docs/run_script.md, "Records and audit").
            try:
                if result is not None and self._audit is not None:
                    with anyio.CancelScope(shield=True):
                        missing = await self._write_audit(handle, result)
                    result = _with_audit(result, missing)
            finally:
                handle.settle(result, failure=failure)
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_TIMEOUT_S):
                    for records in ended:
                        await anyio.to_thread.run_sync(
                            records.sync_and_close, abandon_on_cancel=True
                        )
        return result

    def _progress(
        self,
        handle: ScriptHandle,
        run: _Run,
        dispatcher: ScriptDispatcher | None,
        status: Literal["running"] | ScriptStatus,
    ) -> None:
        if self._on_progress is None:
            return
        counters = dispatcher.counters() if dispatcher is not None else None
        self._on_progress(
            ScriptProgressUpdate(
                script_id=handle.script_id,
                tool_call_id=handle.request.tool_call_id,
                calls=counters.calls if counters else 0,
                failures=counters.failed if counters else 0,
                done=counters.done if counters else None,
                total=counters.total if counters else None,
                message=counters.message if counters else None,
                elapsed_s=time.monotonic() - run.started,
                status=status,
            )
        )

    async def _execute(self, handle: ScriptHandle, ended: list[ScriptRecords]) -> ScriptRunResult:
        request, run = handle.request, _Run()
        try:
            plan = plan_script(
                self._specs,
                request.tools,
                self._mode,
                session_allowed=self._session_allowed | request.granted,
            )
        except ScriptRejectedError as error:
            note = str(error).removeprefix("run_script rejected: ")
            return await self._finish(handle, run, "rejected", note=note)
        if self._limits.preflight:  # before any approval: nothing is asked for a wrong script
            try:
                check_script(request.code, plan)
            except PreflightError as error:
                return await self._finish(handle, run, "rejected", note=str(error), refusal=error)
        decision = request.decision
        if decision is None and plan.needs_approval:
            asked = ApprovalRequest.for_script(
                plan.needs_approval,
                request.code,
                description=request.description,
                session_id=self._session_id or "",
                tool_call_id=request.tool_call_id,
            )
            answer: ApprovalAnswer = "deny"
            reason = None
            with handle.phase() as scope:
                try:
                    answer = settle_answer(asked, await self._approver.approve(asked))
                except NotAllowedError as error:  # an approver may refuse with its own reason
                    reason = error.message
            if scope.cancelled_caught:
                note = "the run was cancelled while waiting for approval; nothing ran"
                return await self._finish(handle, run, "cancelled", note=note)
            if answer != "allow_once":
                reason = reason or denial_reason(self._approver, asked)
            decision = Decision.from_answer(answer, plan.callable, reason=reason or "")
        elif decision is None:
            decision = Decision(kind="allowed", tools=frozenset(plan.callable))
        unapproved = [name for name in plan.needs_approval if not decision.covers(name)]
        if not decision.runs or unapproved:
            reason = decision.reason or f"the write tools {', '.join(unapproved)} were not approved"
            note = f"run_script rejected: {reason}; nothing ran"
            return await self._finish(handle, run, "rejected", note=note)
        try:
            records = ScriptRecords.create(self._workspace, handle.script_id, request.code)
        except OSError as error:
            note = f"cannot create the records folder under {self._workspace}: {error}"
            return await self._finish(handle, run, "sandbox_error", note=note)
        try:
            capture = OutputCapture(
                write=records.write_output,
                max_bytes=self._limits.max_output_bytes,
                max_chars=self._limits.max_model_chars,
            )
            dispatcher = ScriptDispatcher(
                plan=plan,
                call_tool=self._call_tool if self._bind is None else self._bind(decision),
                max_calls=self._limits.max_calls,
                max_concurrency=self._limits.max_concurrency,
                record=records.write_call,
                on_change=lambda: self._progress(handle, run, dispatcher, "running"),
            )
            await self._launch_and_supervise(handle, run, plan, records, capture, dispatcher)
            capture.finish()
            result = await self._finish(
                handle,
                run,
                run.status or "error",
                note=run.note,
                records=records,
                capture=capture,
                dispatcher=dispatcher,
            )
        except BaseException:
            records.close()
            raise
        ended.append(records)  # synced and closed by the caller, after the result
        return result

    async def _launch_and_supervise(
        self,
        handle: ScriptHandle,
        run: _Run,
        plan: ScriptPlan,
        records: ScriptRecords,
        capture: OutputCapture,
        dispatcher: ScriptDispatcher,
    ) -> None:
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        transport = PipeTransport(request_read, reply_write)
        spec = LaunchSpec(
            bootstrap=self._runtime.bootstrap,
            script=records.path / "script.py",
            workspace=self._workspace,
            read_only_workspace=self._mode == "read_only",
            env={"SAGENTS_SCRIPT_ID": handle.script_id},
        )
        run.started = time.monotonic()
        try:
            process = await self._launcher.launch(
                spec, request_fd=request_write, reply_fd=reply_read
            )
        except (SandboxError, QuotaExceededError, OSError) as error:
            transport.close()
            run.status, run.note = "sandbox_error", f"the sandbox could not start: {error}"
            return
        finally:
            os.close(request_write)
            os.close(reply_read)
        try:
            await self._supervise(handle, run, process, transport, capture, dispatcher, records)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_TIMEOUT_S):
                await process.kill_tree()
                code = await process.wait()
                if run.exit_code is None:
                    run.exit_code = code
            await process.aclose()  # no scope around it: it may leave the launch's own scopes
            transport.close()
        if run.status is None:
            run.status = (
                "ok" if run.exit_code == 0 else "killed" if (run.exit_code or 0) < 0 else "error"
            )

    async def _supervise(
        self,
        handle: ScriptHandle,
        run: _Run,
        process: ScriptProcess,
        transport: PipeTransport,
        capture: OutputCapture,
        dispatcher: ScriptDispatcher,
        records: ScriptRecords,
    ) -> None:
        async def flush_calls() -> None:
            while True:  # calls.jsonl is written in batches: at least this often
                await anyio.sleep(CALLS_FLUSH_INTERVAL_S)
                records.flush()

        async def drain(stream: ByteReceiveStream, name: str, done: anyio.Event) -> None:
            try:
                async for chunk in stream:
                    if self._on_output is not None:
                        self._on_output(name, chunk)
                    if capture.feed(chunk, stream=name) and run.status is None:
                        run.status = "output_limit"
                        run.note = (
                            f"output passed {self._limits.max_output_bytes} bytes "
                            "(scripts.maxOutputBytes): the run was ended"
                        )
                        await process.kill_tree()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            finally:
                done.set()

        async def serve(scope: anyio.CancelScope) -> None:
            with scope:
                await dispatcher.serve(transport)

        run_scope = handle.phase()
        with run_scope, anyio.move_on_after(self._limits.timeout_s) as timeout_scope:
            async with anyio.create_task_group() as tg:
                dispatch_scope = anyio.CancelScope()
                out_done, err_done = anyio.Event(), anyio.Event()
                tg.start_soon(serve, dispatch_scope)
                tg.start_soon(flush_calls)
                tg.start_soon(drain, process.stdout, "stdout", out_done)
                tg.start_soon(drain, process.stderr, "stderr", err_done)
                run.exit_code = await process.wait()
                dispatch_scope.cancel()  # nobody reads replies any more: cancel calls in flight
                await process.kill_tree()  # leftover children would keep the pipes open
                with anyio.move_on_after(self._limits.drain_grace_s):
                    await out_done.wait()
                    await err_done.wait()
                tg.cancel_scope.cancel()
        if run_scope.cancelled_caught:
            run.status, run.note = "cancelled", "the run was cancelled: its processes were killed"
        elif timeout_scope.cancelled_caught:
            run.status = "timeout"
            run.note = (
                f"the script ran past {self._limits.timeout_s:g} s (scripts.timeoutSec): "
                "its processes were killed"
            )

    async def _finish(
        self,
        handle: ScriptHandle,
        run: _Run,
        status: ScriptStatus,
        *,
        note: str | None,
        records: ScriptRecords | None = None,
        capture: OutputCapture | None = None,
        dispatcher: ScriptDispatcher | None = None,
        refusal: PreflightError | None = None,
    ) -> ScriptRunResult:
        counters = dispatcher.counters() if dispatcher is not None else None
        if records is not None:
            records.flush()  # every call line before the final status
            if records.write_failures:
                failures = "; ".join(f"{n}: {e}" for n, e in records.write_failures.items())
                lost = f"the records are incomplete ({failures}): free disk space"
                note = f"{note}; {lost}" if note else lost
        ran = records is not None and run.exit_code is not None
        duration = time.monotonic() - run.started if ran else 0.0
        summary = RunSummary(
            status=status,
            calls=counters.calls if counters else 0,
            failed=counters.failed if counters else 0,
            duration_s=duration,
            records_dir=records.relative_dir if records else None,
            exit_code=run.exit_code,
        )
        error = capture.stderr_tail() if capture is not None and status != "ok" else None
        text = format_model_text(
            summary, capture.model_output() if capture else "", error=error, note=note
        )
        result = ScriptRunResult(
            script_id=handle.script_id,
            status=status,
            exit_code=run.exit_code,
            calls=summary.calls,
            failed=summary.failed,
            calls_per_tool=dict(counters.calls_per_tool or {}) if counters else {},
            duration_s=duration,
            records_dir=summary.records_dir,
            output=text,
            truncated=capture.truncated if capture else False,
            error_code=refusal.code if refusal is not None else None,
        )
        if records is not None:
            records.write_status({**result.to_dict(), "output": None, "ended": time.time()})
        self._progress(handle, run, dispatcher, status)
        return result

    async def _write_audit(self, handle: ScriptHandle, result: ScriptRunResult) -> str | None:
        """Write the run's one audit entry; None once written, else why it was not (logged)."""
        assert self._audit is not None
        entry = AuditEntry(
            kind="gateway_call",
            ts=time.time(),
            tool="run_script",
            status=result.status,
            session_id=self._session_id,
            data={
                "script_id": result.script_id,
                "description": handle.request.description,
                "tools": list(handle.request.tools),
                "calls": result.calls,
                "failed": result.failed,
                "calls_per_tool": dict(result.calls_per_tool),
                "duration_s": round(result.duration_s, 3),
                "exit_code": result.exit_code,
                "records_dir": result.records_dir,
                "script": handle.request.code,
            },
        )
        try:
            with anyio.fail_after(CLEANUP_TIMEOUT_S):
                await self._audit.record(entry)
        except StoreError as error:
            reason = " ".join(error.message.split())
        except TimeoutError:
            reason = f"the store did not answer within {CLEANUP_TIMEOUT_S:g} s"
        else:
            return None
        logger.warning("run_script %s: audit not written: %s", result.script_id, reason)
        return reason


def _with_audit(result: ScriptRunResult, missing: str | None) -> ScriptRunResult:
    """``result`` saying whether its audit row was written: when it was not, its summary line
    (the first of the output) ends with ``audit not written: <reason>``."""
    if missing is None:
        return dataclasses.replace(result, audit="written")
    summary, newline, rest = result.output.partition("\n")
    output = f"{summary}, audit not written: {missing}{newline}{rest}"
    return dataclasses.replace(result, audit="missing", output=output)
