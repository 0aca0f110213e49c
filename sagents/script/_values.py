"""The values of one run_script run: request, status, progress snapshot, result, handle."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from sagents.errors import SagentsError, ScriptError
from sagents.tool._approval import Decision
from sagents.tool.questions import Questioner

__all__ = [
    "ScriptHandle",
    "ScriptProgressUpdate",
    "ScriptRequest",
    "ScriptRunResult",
    "ScriptStatus",
]

ScriptStatus = Literal[
    "ok", "error", "timeout", "cancelled", "rejected", "output_limit", "killed", "sandbox_error"
]
"""``ok``: exit code 0. ``error``: another exit code (or an uncaught exception). ``timeout``:
killed at ``scripts.timeoutSec``. ``cancelled``: cancelled by the caller. ``rejected``: refused
before it started (policy or approval denied). ``output_limit``: killed past
``scripts.maxOutputBytes``. ``killed``: ended by a signal we did not send (memory limit, OOM).
``sandbox_error``: the sandbox (or the records folder) could not be set up."""


@dataclass(frozen=True, kw_only=True)
class ScriptRequest:
    """run_script's arguments (docs/run_script.md).

    Attributes:
        code: The Python source of the script.
        tools: Tools named by the model (write tools must be listed to be callable).
        description: What the script does, in a few words (shown in approvals and the audit).
        tool_call_id: The model's tool call id, carried into progress updates.
        decision: The decision the caller already made for the run's write tools (the gateway
            asks before the call, docs/gateway.md, "Approvals"); None: the runner's pre-run
            check decides, asking its approver once if a listed write tool needs it.
        questioner: Who the run's tool calls ask (the ``SessionContext.questioner`` of the call
            that ran the script: its user, whoever the session's tool was opened for); None:
            the session's.
        granted: The tools the session's user allowed for the rest of the session
            (``SessionContext.granted`` of the call that ran the script): a listed write tool
            among them is not asked about again, as a direct call of it would not be.
    """

    code: str
    tools: Sequence[str] = ()
    description: str = ""
    tool_call_id: str | None = None
    decision: Decision | None = None
    questioner: Questioner | None = field(default=None, compare=False, repr=False)
    granted: frozenset[str] = frozenset()


@dataclass(frozen=True, kw_only=True)
class ScriptProgressUpdate:
    """A snapshot for the ``script.progress`` channel (the lead maps it to
    ``sagents.core.events.ScriptProgressEvent``; the channel throttles to 1/s)."""

    script_id: str
    tool_call_id: str | None
    calls: int
    failures: int
    done: float | None
    total: float | None
    message: str | None
    elapsed_s: float
    status: Literal["running"] | ScriptStatus


@dataclass(frozen=True, kw_only=True)
class ScriptRunResult:
    """How a run ended, and what the model receives.

    Attributes:
        script_id: The run's id (its records folder name).
        status: See :data:`ScriptStatus`.
        exit_code: The process's exit code (negative: the signal that killed it), or None
            when no process ran.
        calls: Tool calls the script made (refused ones included).
        failed: Calls that failed or were refused.
        calls_per_tool: Calls per tool.
        duration_s: Seconds from launch to end (0 when nothing ran).
        records_dir: ``.agent/scripts/<id>/`` relative to the workspace, or None.
        output: The model-facing text (summary line, output, error tail).
        truncated: Whether the printed output was cut for the model.
        audit: ``written`` once the run's audit row is in the store, ``missing`` when it
            could not be written (the summary line then ends with
            ``audit not written: <reason>``), None without an audit store.
        error_code: The stable code of the error that refused the run before it started
            (``preflight_failed``), or None.
    """

    script_id: str
    status: ScriptStatus
    exit_code: int | None
    calls: int
    failed: int
    calls_per_tool: Mapping[str, int]
    duration_s: float
    records_dir: str | None
    output: str
    truncated: bool
    audit: Literal["written", "missing"] | None = None
    error_code: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object: ``status, exit_code, calls, failed, duration_s, records_dir,
        output, truncated`` plus ``script_id``, ``calls_per_tool``, with an audit store
        ``audit`` (``written`` or ``missing``), and ``error_code`` when set."""
        audit = {"audit": self.audit} if self.audit is not None else {}
        extra = {} if self.error_code is None else {"error_code": self.error_code}
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "calls": self.calls,
            "failed": self.failed,
            "duration_s": round(self.duration_s, 3),
            "records_dir": self.records_dir,
            "output": self.output,
            "truncated": self.truncated,
            "script_id": self.script_id,
            "calls_per_tool": dict(self.calls_per_tool),
            **audit,
            **extra,
        }


@dataclass(kw_only=True)
class ScriptHandle:
    """A started run: await :meth:`wait`, or :meth:`cancel` it."""

    script_id: str
    request: ScriptRequest
    _scope: anyio.CancelScope | None = None
    _cancelled: bool = False
    _done: anyio.Event = field(default_factory=anyio.Event)
    _result: ScriptRunResult | None = None
    _failure: Exception | None = None

    @property
    def done(self) -> bool:
        """True once the run has ended."""
        return self._done.is_set()

    def cancel(self) -> None:
        """Cancel the run, whatever its phase (approval or running): its tree is killed and
        calls in flight cancelled; status ``cancelled``. No effect once it has ended."""
        self._cancelled = True
        if self._scope is not None:
            self._scope.cancel()

    def phase(self) -> anyio.CancelScope:
        """A cancel scope for the run's next phase (approval, then running), already
        cancelled if :meth:`cancel` came first; the runner enters it."""
        self._scope = anyio.CancelScope()
        if self._cancelled:
            self._scope.cancel()
        return self._scope

    def settle(self, result: ScriptRunResult | None, *, failure: Exception | None = None) -> None:
        """Record the run's end (the runner calls it once, also when the run failed to give a
        result, then with the error as ``failure``): :meth:`wait` returns ``result`` from then
        on, or raises."""
        self._result = result
        self._failure = failure
        self._done.set()

    async def ended(self) -> None:
        """Wait for the end, whatever it was (a result or a failure)."""
        await self._done.wait()

    async def wait(self) -> ScriptRunResult:
        """Wait for the end and return the result.

        Raises:
            SagentsError: the run ended without a result: the error that stopped it (a
                ``SandboxError`` when no sandbox could start...), or a ``ScriptError`` that
                names an unexpected one; never an assertion.
        """
        await self._done.wait()
        if self._result is not None:
            return self._result
        if isinstance(self._failure, SagentsError):
            raise self._failure
        reason = (
            f"{type(self._failure).__name__}: {self._failure}"
            if self._failure is not None
            else "it was stopped before it started"
        )
        raise ScriptError(f"the run of {self.script_id!r} ended without a result: {reason}")
