"""Run one script file through run_script for the command line: ``sagents run-script`` and
``sagents demo`` share it (docs/cli_run_script.md).

The session is built from a configuration: every enabled MCP server of the config is connected
through :func:`~sagents.config.tools.build_tool_manager`; the script may call their tools (MCP
tools only, as in a gateway session); each call goes through ``ToolManager.run_tool``, the same
path as a direct call. The script runs in the ``local`` sandbox (bubblewrap, through
:class:`~sagents.script._sandbox_launcher.SandboxLauncher`) with the workspace read-write
(read-only in ``read_only`` mode). The CLI waits for the script: there is no
background hand-off here.
"""

from __future__ import annotations

import functools
import logging
import signal
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from sagents.audit._store import AuditStore, default_data_dir
from sagents.cli._call_approval import read_answer
from sagents.cli._rich import stderr_console
from sagents.cli.terminal_approval import TerminalApprover
from sagents.config._loader import SagentsConfig
from sagents.config.tools import build_tool_manager
from sagents.core._limits import ScriptLimits
from sagents.core._literal import printable
from sagents.core._permissions import PermissionMode
from sagents.errors import SandboxError
from sagents.sandbox._factory import create_sandbox
from sagents.script._launcher import Launcher
from sagents.script._runner import CLEANUP_TIMEOUT_S, ScriptRunner
from sagents.script._runtime import install_runtime
from sagents.script._sandbox_launcher import SandboxLauncher
from sagents.script._session import script_callable_specs
from sagents.script._values import (
    ScriptHandle,
    ScriptProgressUpdate,
    ScriptRequest,
    ScriptRunResult,
)
from sagents.tool._approval import AllowAllApprover, ApprovalAnswer, ApprovalRequest, Approver
from sagents.tool._context import SessionContext
from sagents.tool.tool_manager import ToolManager

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

__all__ = [
    "CLI_SESSION_ID",
    "CliStatus",
    "LiveProgress",
    "NoTerminalApprover",
    "choose_approver",
    "failure_object",
    "limits_of",
    "read_answer",
    "run_script_code",
    "run_with_manager",
    "script_launcher",
]

logger = logging.getLogger(__name__)

CLI_SESSION_ID = "cli"  # the session id of command-line runs (approvals, audit)

CliStatus = Literal[
    "ok",
    "error",
    "timeout",
    "cancelled",
    "rejected",
    "output_limit",
    "killed",
    "sandbox_error",
    "config_error",
    "usage_error",
]
"""The run's statuses (docs/run_script.md) plus the command line's own: ``config_error`` (the
``--config`` file is missing or invalid, or a server name it needs is absent) and
``usage_error`` (the script file is missing or unreadable, a bad ``--mode`` or workspace)."""


def failure_object(status: CliStatus, message: str, *, hint: str | None = None) -> dict[str, Any]:
    """The ``--json`` object of a run that never started (same keys as a run's)."""
    text = f"run_script {status}: {message}"
    result: dict[str, Any] = {
        "status": status,
        "exit_code": None,
        "calls": 0,
        "failed": 0,
        "duration_s": 0.0,
        "records_dir": None,
        "output": text,
        "truncated": False,
        "script_id": None,
        "calls_per_tool": {},
    }
    if hint:
        result["hint"] = hint
    return result


def limits_of(config: SagentsConfig) -> ScriptLimits:
    """The run limits of a config's ``scripts`` section."""
    return config.scripts


@dataclass(kw_only=True)
class NoTerminalApprover:
    """``ask`` mode without a terminal (CI): denies, and says how to allow the tools.

    Attributes:
        asked: The tools of the denied request, once asked.
    """

    asked: tuple[str, ...] = ()

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Deny, logging why on stderr."""
        self.asked = tuple(request.tools)
        logger.warning(
            "no terminal to ask for approval of the write tools %s: denied "
            "(use --mode auto to allow the listed write tools without asking)",
            ", ".join(request.tools),
        )
        return "deny"

    def denial_reason(self, request: ApprovalRequest) -> str:
        """Nobody was asked: there is no terminal."""
        return (
            f"nobody was asked to approve the write tools {', '.join(request.tools)}: --mode ask "
            "needs a terminal to ask, and there is none (use --mode auto to allow the listed "
            "write tools without asking)"
        )


def choose_approver(mode: PermissionMode, *, interactive: bool) -> Approver:
    """The approver of a command-line run: the terminal prompt in ``ask`` mode on a terminal
    (request and prompt on stderr), a denial with a hint without one, allow-all otherwise
    (``auto`` never asks)."""
    if mode == "ask":
        return TerminalApprover(ask=read_answer) if interactive else NoTerminalApprover()
    return AllowAllApprover()


@dataclass(kw_only=True)
class LiveProgress:
    """A live progress bar on stderr: calls, failures, and the script's own progress (a bar
    when it gave a total). A no-op when ``console`` is not a terminal.

    Attributes:
        console: Where to draw (stderr).
    """

    console: Console = field(default_factory=stderr_console)
    _progress: Progress | None = None
    _task: TaskID | None = None

    def __enter__(self) -> LiveProgress:
        return self

    def _start(self) -> None:
        # Started at the first snapshot, so an approval prompt before the run is not drawn over.
        if self.console.is_terminal and self._progress is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", style="bold", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[counts]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task("starting", total=None, counts=_counts(0, 0))

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def update(self, update: ScriptProgressUpdate) -> None:
        """Show a snapshot (called by the runner; never blocks)."""
        self._start()
        if self._progress is None or self._task is None:
            return
        description = printable(update.message or "", newlines=False) or (
            "running" if update.status == "running" else ""
        )
        self._progress.update(
            self._task,
            description=description if update.status == "running" else update.status,
            total=update.total,
            completed=update.done or 0,
            counts=_counts(update.calls, update.failures),
        )


def _counts(calls: int, failures: int) -> str:
    return f"{calls} call{'' if calls == 1 else 's'}, {failures} failed"


@asynccontextmanager
async def script_launcher(
    workspace: Path, *, limits: ScriptLimits, read_only: bool = False
) -> AsyncIterator[Launcher]:
    """The launcher scripts run with: the ``local`` sandbox (bubblewrap) on ``workspace``,
    read-only in ``read_only`` mode; ``.agent/`` (the records) is read-only inside.

    Args:
        workspace: The host workspace.
        limits: The run limits (the sandbox's own wall-clock bound is set a little above
            ``limits.timeout_s``, so the runner's timeout fires first).
        read_only: The permission mode is ``read_only``.

    Raises:
        SandboxError: bubblewrap is missing or unusable.
    """
    sandbox = create_sandbox(
        "local", workspace=str(workspace), mode="read_only" if read_only else "read_write"
    )
    async with sandbox:
        yield SandboxLauncher(sandbox, timeout_s=limits.timeout_s + CLEANUP_TIMEOUT_S)


async def _cancel_on_signal(handle: ScriptHandle, scope: anyio.CancelScope) -> None:
    """Ctrl-C or SIGTERM cancels the run cleanly (its tree killed, status ``cancelled``)."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            logger.warning("%s: cancelling the run", signal.Signals(signum).name)
            handle.cancel()
            return


async def run_script_code(
    *,
    code: str,
    config: SagentsConfig,
    workspace: Path,
    tools: Sequence[str] = (),
    description: str = "",
    mode: PermissionMode = "ask",
    approver: Approver | None = None,
    audit: AuditStore | None = None,
    on_progress: Callable[[ScriptProgressUpdate], None] | None = None,
) -> ScriptRunResult:
    """Connect the config's servers, run ``code`` through run_script, close everything.

    Args:
        code: The script's source.
        config: The loaded configuration (servers and ``scripts`` limits).
        workspace: The session workspace (created when missing); records go to
            ``<workspace>/.agent/scripts/<id>/``.
        tools: run_script's ``tools`` (write tools must be listed to be callable).
        description: run_script's ``description``.
        mode: The permission mode.
        approver: Asked once in ``ask`` mode for listed write tools; denies when None.
        audit: Where the run's ``gateway_call`` entry goes.
        on_progress: Receives progress snapshots.

    Returns:
        The run's result; a sandbox that cannot start gives status ``sandbox_error``.
    """
    async with await build_tool_manager(config) as manager:
        for status in manager.mcp_server_statuses():
            if status.last_error:
                logger.warning("MCP server %r: %s", status.name, status.last_error)
        return await run_with_manager(
            manager,
            ScriptRequest(code=code, tools=tuple(tools), description=description),
            workspace=workspace,
            limits=limits_of(config),
            mode=mode,
            approver=approver,
            audit=audit,
            on_progress=on_progress,
        )


async def run_with_manager(
    manager: ToolManager,
    request: ScriptRequest,
    *,
    workspace: Path,
    limits: ScriptLimits,
    mode: PermissionMode = "ask",
    approver: Approver | None = None,
    audit: AuditStore | None = None,
    on_progress: Callable[[ScriptProgressUpdate], None] | None = None,
    launcher: Launcher | None = None,
) -> ScriptRunResult:
    """Run one script in the ``local`` sandbox against an open manager's MCP tools; each call
    goes through ``manager.run_tool`` with the command line's session context.

    Args: as :func:`run_script_code`, with the open ``manager`` and the run ``limits``;
        ``launcher``: the caller's (an entered
        :class:`~sagents.script._sandbox_launcher.SandboxLauncher` keeps a spare sandbox for
        the next run, as a gateway session does); None starts the run's own sandbox
        (:func:`script_launcher`) and tears it down before returning.

    Returns:
        The run's result; a sandbox that cannot start gives status ``sandbox_error``.
    """
    await anyio.Path(workspace).mkdir(parents=True, exist_ok=True)
    runtime = install_runtime(default_data_dir())
    session = SessionContext(
        session_id=CLI_SESSION_ID, workspace=str(workspace), permission_mode=mode
    )
    specs = script_callable_specs(manager.list_specs())

    # The manager's own coroutine, not a wrapper's: one frame fewer on every resumption of a call.
    call_tool = functools.partial(manager.run_tool, session_context=session)

    started = time.monotonic()
    try:
        async with AsyncExitStack() as stack:
            if launcher is None:
                launcher = await stack.enter_async_context(
                    script_launcher(workspace, limits=limits, read_only=mode == "read_only")
                )
            runner = ScriptRunner(
                specs=specs,
                call_tool=call_tool,
                workspace=workspace,
                runtime=runtime,
                launcher=launcher,
                mode=mode,
                approver=approver,
                limits=limits,
                audit=audit,
                on_progress=on_progress,
                session_id=CLI_SESSION_ID,
            )
            async with runner, anyio.create_task_group() as tg:
                handle = await runner.start(request)
                tg.start_soon(_cancel_on_signal, handle, tg.cancel_scope)
                result = await handle.wait()
                tg.cancel_scope.cancel()
            return result
    except SandboxError as error:
        note = f"the sandbox could not start: {error}"
        logger.error("%s", note)
        return ScriptRunResult(
            script_id="",
            status="sandbox_error",
            exit_code=None,
            calls=0,
            failed=0,
            calls_per_tool={},
            duration_s=time.monotonic() - started,
            records_dir=None,
            output=f"run_script sandbox_error: {note}",
            truncated=False,
        )
