"""run_script inside ``sagents serve``: one sandbox and :class:`RunScriptTool` per client session.

The gateway offers ``run_script`` when upstream MCP tools exist (docs/gateway.md). Each client
session gets, on its first script or built-in tool call, its own sandbox over its own workspace
(:class:`~sagents.gateway._workspaces.Workspaces`: records, files, modules are the session's
only) and its own :class:`~sagents.script._session.RunScriptTool` (its session id scopes
progress, approvals and records), calling only what the session's offer lets scripts call
(:meth:`sagents.gateway._offer.SessionOffer.for_scripts`). The script runtime, the audit store
and the progress hub are shared. Each session lives in a task of this object's task group, so
its sandbox and tool are entered and left in one task whatever task the call came from; that
task ends when the gateway releases the session (:meth:`GatewayScripts.release`: the session
ended or went idle), taking the sandbox, its spare and the tool with it.

``run_script`` is offered as a read-only tool (read-only sessions keep it for their read-only
tools): what a script may do is decided by the gateway's one policy step before the call, with
run_script's pre-run check (listed write tools need one approval in ``ask`` mode, asked through
the same round trip as a direct write call; tools the session allowed are not asked again;
destructive and long-task-only tools are refused). The decision reaches the session's
:class:`~sagents.script._session.RunScriptTool` with the call (``SessionContext.decision``), so
the run is never asked about again.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc
import anyio.to_thread

from sagents.audit._store import AUDIT_FILE, AuditStore, SqliteAuditStore, default_data_dir
from sagents.config._loader import QuotaSettings
from sagents.core._limits import ScriptLimits
from sagents.core._permissions import PermissionMode
from sagents.core._result import ToolResult
from sagents.core._secrets import Redactor
from sagents.core._spec import ToolSpec
from sagents.errors import ConfigError
from sagents.gateway._approval import ClientScriptApprover
from sagents.gateway._principals import PRINCIPAL_KEY, PrincipalSessions
from sagents.gateway._restart import StartupLock, sweep_runs
from sagents.gateway._result_quota import PRINCIPAL_SETTING, StoredResultQuota
from sagents.gateway._workspaces import Workspaces
from sagents.progress._hub import ProgressHub
from sagents.sandbox._factory import create_sandbox
from sagents.sandbox._protocol import Sandbox
from sagents.sandbox._types import SandboxLimits, SandboxParams, SharedQuota
from sagents.script._description import run_script_spec, should_offer_run_script
from sagents.script._runtime import install_runtime
from sagents.script._session import (
    RunScriptSettings,
    RunScriptTool,
    script_callable_specs,
)
from sagents.tool._approval import Approver
from sagents.tool._call import ToolRequest
from sagents.tool._context import SessionContext
from sagents.tool._provider import ToolProvider
from sagents.tool._spec_provider import SpecProvider

__all__ = ["GatewayScripts"]

logger = logging.getLogger(__name__)

WORKSPACES_DIR = "workspaces"  # the default root under the data dir
TASK_LOGS_DIR = "task-logs"  # <data dir>/task-logs/<session id>/: background tasks' logs
RunStartWatcher = Callable[[str, str | None, str], None]
"""Told ``(session id, tool call id, description)`` as a run_script call starts."""


class GatewayScripts:
    """run_script (and the built-in tools' sandboxes) for every client session of one gateway;
    an async context manager.

    Args:
        hub: Where ``script.progress`` events go (the gateway forwards them to the client).
        workspaces: The layout of the sessions' workspaces (the same object the gateway puts
            in each call's ``SessionContext``); ``<data dir>/workspaces``, one per session,
            when None.
        limits: ``scripts`` limits of the config.
        data_dir: Where the script runtime and the audit store live; the default data dir
            (``$SAGENTS_DATA_DIR``) when None.
        protected: Other host paths no sandbox may bind, by what they are (``config file``:
            the mcpServers commands the next start runs on the host).
        audit: Where each run's ``gateway_call`` entry goes (the gateway's store);
            ``<data dir>/audit.sqlite3`` when None.
        approver: Asked before a run that lists write tools; None asks the client of the
            call (:class:`~sagents.gateway._approval.ClientScriptApprover`).
        list_tools: run_script's description lists each callable tool (the default); False
            only counts them (``--tool-search``: the script's ``tools()`` lists them).
        quotas: The ``quotas`` block: each session's sandbox holds its workspace, records and
            background tasks' logs (kept in ``<data dir>/task-logs/<session id>``) to
            ``quotas.workspaceBytes`` and runs at most ``quotas.backgroundTasksPerSession``
            background tasks at once; the sessions of one principal (``SessionContext.trusted``
            under :data:`~sagents.gateway._principals.PRINCIPAL_KEY`) hold theirs together to
            ``quotas.principalBytes`` (docs/security.md).
        redactor: The secrets redacted from every result a script gets (and its records
            keep), whatever the tool: an upstream one, a local or a built-in one
            (docs/gateway.md, "Secrets"); None: nothing is.

    Raises:
        SandboxUnavailableError: on entering, where bubblewrap is missing (no silent fallback).
        ConfigError: on entering, the sessions' sandboxes would bind the data dir or a
            ``protected`` path.
    """

    def __init__(
        self,
        *,
        hub: ProgressHub,
        workspaces: Workspaces | None,
        limits: ScriptLimits,
        data_dir: Path | None = None,
        protected: Mapping[str, Path] | None = None,
        audit: AuditStore | None = None,
        approver: Approver | None = None,
        list_tools: bool = True,
        quotas: QuotaSettings | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self._hub = hub
        self._redactor = redactor
        self._quotas = quotas or QuotaSettings()
        self._audit_store = audit
        self._approver = approver
        self._list_tools = list_tools
        self._data_dir = data_dir or default_data_dir()
        self._protected = {"data dir": self._data_dir, **(protected or {})}
        self.workspaces = workspaces or Workspaces(self._data_dir / WORKSPACES_DIR)
        self._principals = PrincipalSessions(
            self._data_dir, self.workspaces, self._data_dir / TASK_LOGS_DIR
        )
        self.result_quota = StoredResultQuota(
            self._data_dir,
            self._quotas,
            self.workspaces,
            self._principals,
            self._data_dir / TASK_LOGS_DIR,
        )
        """Charges background calls' stored results to the same quotas."""
        self._settings = RunScriptSettings(limits=limits)
        self._sessions: dict[str, _Session] = {}
        self._lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        self._stack = AsyncExitStack()
        self._start_watchers: list[RunStartWatcher] = []
        self.aborted: list[str] = []
        """Records directories of runs a previous process left running, marked at start."""

    async def __aenter__(self) -> Self:
        self._check_data_dir_not_bound()
        root = self.workspaces.root
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        create_sandbox("local", workspace=str(root))  # bubblewrap present? (raises if not)
        self._runtime = install_runtime(self._data_dir)
        self._audit: AuditStore = self._audit_store or SqliteAuditStore(
            path=self._data_dir / AUDIT_FILE
        )
        self._stack = AsyncExitStack()
        try:
            lock = StartupLock(root)
            self._stack.callback(lock.release)
            if lock.acquire():
                self.aborted = await sweep_runs(self.workspaces, self._audit)
            else:
                logger.info("another gateway uses %s: interrupted runs are left to it", root)
            self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for session in self._sessions.values():
            session.ended.set()  # each session's task leaves its RunScriptTool (runs: 'cancelled')
        self._sessions.clear()
        try:
            await self._stack.aclose()  # the sessions' task group
        finally:
            self._tg = None

    def _check_data_dir_not_bound(self) -> None:
        """Refuse a workspace root whose sandboxes would bind the data dir (the audit store,
        the background-task store, the script runtime: a script could rewrite them) or a
        protected path (the config file: a script could change what the host runs).

        Raises:
            ConfigError: one of them is inside (or is) what sandboxes bind.
        """
        area = Path(os.path.realpath(self.workspaces.bound_area()))
        shown = "the workspace" if self.workspaces.shared else "the sessions' workspaces"
        for what, path in self._protected.items():
            real = Path(os.path.realpath(path))
            if real == area or area in real.parents:
                raise ConfigError(
                    f"the gateway's {what} {str(real)!r} is inside {shown} ({str(area)!r}): "
                    "scripts could rewrite it",
                    key="--workspace",
                    hint=f"give --workspace a directory that does not contain the {what}",
                )

    async def release(self, session_id: str, *, only_if: Callable[[], bool] | None = None) -> None:
        """End what the session holds here: its run_script tool (runs still going end
        ``cancelled``), its sandbox and the spare sandbox kept for its next run. Nothing
        happens for a session that holds nothing; a later call of the session starts afresh.

        Args:
            session_id: The session.
            only_if: Checked once no call can take the session's sandbox any more (an idle
                session is released only if no call came in meanwhile); None: always.
        """
        async with self._lock:
            if only_if is not None and not only_if():
                return
            found = self._sessions.pop(session_id, None)
        if found is None:
            return
        found.ended.set()
        await found.gone.wait()

    def watch_starts(self, watcher: RunStartWatcher) -> None:
        """Tell ``watcher`` of each run_script call that starts from now on, as
        ``(session id, tool call id, description)`` (the web console shows the description of
        a live run; it is built over the running gateway, so it subscribes, as it watches the
        progress hub). A watcher must not block."""
        self._start_watchers.append(watcher)

    @property
    def sandboxes_alive(self) -> int:
        """How many sessions hold a sandbox now (each its one; the spare started ahead of a
        session's next run is not counted)."""
        return len(self._sessions)

    async def sandbox_for(self, context: SessionContext) -> Sandbox:
        """The calling session's sandbox (the built-in tools' resolver)."""
        return (await self._session(context)).sandbox

    def spec(self, specs: list[ToolSpec], mode: PermissionMode) -> ToolSpec | None:
        """run_script's spec for tools ``specs``, or None when no MCP tool makes it worth it.

        The description is the one of a session in ``mode``; the permission class is
        ``read_only`` for the gateway's own gate (see the module docstring).
        """
        callable_specs = script_callable_specs(specs)
        if not should_offer_run_script(callable_specs):
            return None
        spec = run_script_spec(
            callable_specs, mode=mode, limits=self._settings.limits, list_tools=self._list_tools
        )
        return replace(spec, permission="read_only")

    async def run(
        self,
        arguments: dict[str, Any],
        context: SessionContext,
        *,
        tools: ToolProvider,
        tool_call_id: str | None,
    ) -> ToolResult:
        """Run one ``run_script`` call for the calling session.

        Args:
            arguments: run_script's arguments (``code``, ``tools``, ``description``).
            context: The calling session.
            tools: What the session's scripts may call (the session's offer for scripts,
                :meth:`sagents.gateway._offer.SessionOffer.for_scripts`).
            tool_call_id: The call's id (progress events carry it).
        """
        session = await self._session(context)
        code = arguments.get("code")
        listed = arguments.get("tools") or []
        description = arguments.get("description") or ""
        if not isinstance(code, str) or not isinstance(listed, list):
            return ToolResult.from_error(
                "invalid_arguments",
                "run_script needs 'code' (a string) and 'tools' (a list of tool names)",
            )
        for watcher in list(self._start_watchers):
            watcher(context.session_id, tool_call_id, str(description))
        return await session.tool.run(
            code,
            [str(name) for name in listed],
            str(description),
            tool_call_id=tool_call_id,
            decision=context.decision,  # the gateway decided before the call
            questioner=context.questioner,  # what the script's tools ask goes to this client
            provider=_ScriptTools(tools, redactor=self._redactor),  # this call's offer
        )

    async def _session(self, context: SessionContext) -> _Session:
        async with self._lock:
            found = self._sessions.get(context.session_id)
            if found is None:
                if self._tg is None:
                    raise RuntimeError("enter GatewayScripts (async with) before running scripts")
                # the session's tool outlives this call: not this call's decision, nor its
                # client's questioner (each run carries its own)
                found = await self._tg.start(
                    self._host, replace(context, decision=None, questioner=None)
                )
                self._sessions[context.session_id] = found
            return found

    async def _host(
        self, context: SessionContext, *, task_status: anyio.abc.TaskStatus[_Session]
    ) -> None:
        workspace = self.workspaces.for_session(context.session_id)
        ended, gone = anyio.Event(), anyio.Event()
        started = False
        try:
            async with (
                create_sandbox("local", await self._sandbox_params(workspace, context)) as sandbox,
                RunScriptTool(
                    tools=_NO_TOOLS,  # each run is given its call's offer (see run)
                    session=context,
                    sandbox=sandbox,
                    runtime=self._runtime,
                    approver=self._approver or ClientScriptApprover(),
                    settings=self._settings,
                    hub=self._hub,
                    audit=self._audit,
                    mark_interrupted=False,  # swept once at start, see __aenter__
                ) as tool,
            ):
                task_status.started(_Session(sandbox=sandbox, tool=tool, ended=ended, gone=gone))
                started = True
                await ended.wait()
        except Exception:
            if not started:
                raise  # the caller's error: the session could not get a sandbox
            # One session's teardown must not end the task group every session lives in.
            logger.exception("closing the sandbox of session %s failed", context.session_id)
        finally:
            gone.set()

    async def _sandbox_params(self, workspace: Path, context: SessionContext) -> SandboxParams:
        """A session's sandbox: its workspace, its logs under the data dir, the quotas (the
        principal's shared with its other sessions' workspaces)."""
        limits = replace(
            SandboxLimits(),
            workspace_bytes=self._quotas.workspace_bytes,
            background_tasks=self._quotas.background_tasks_per_session,
        )
        logs = self._data_dir / TASK_LOGS_DIR / context.session_id
        shared = None
        if self._quotas.principal_bytes is not None:
            principal = str(context.trusted.get(PRINCIPAL_KEY, ""))
            await anyio.to_thread.run_sync(self._principals.register, principal, context.session_id)
            shared = SharedQuota(
                limit_bytes=self._quotas.principal_bytes,
                setting=PRINCIPAL_SETTING,
                elsewhere=functools.partial(self._principals.directories, principal),
                charged_bytes=functools.partial(self.result_quota.principal_kept_bytes, principal),
            )
        return SandboxParams(
            workspace=str(workspace),
            limits=limits,
            logs_dir=str(logs),
            shared_quota=shared,
            charged_bytes=(  # the stored results share the session's quota with its files
                functools.partial(self.result_quota.workspace_kept_bytes, context.session_id)
                if self._quotas.workspace_bytes is not None
                else None
            ),
        )


@dataclass(frozen=True)
class _ScriptTools(SpecProvider):
    """What one run's script calls: the session's offer for scripts that the run_script call
    gave (None: nothing), each result redacted."""

    target: ToolProvider | None
    redactor: Redactor | None = None
    """The secrets redacted from each result before the script, and its records, get it
    (docs/gateway.md, "Secrets")."""

    def list_specs(self) -> list[ToolSpec]:
        return [] if self.target is None else self.target.list_specs()

    async def call(self, request: ToolRequest) -> ToolResult:
        if self.target is None:
            return ToolResult.from_error("unknown_tool", f"no tool {request.name!r} for scripts")
        result = await self.target.call(request)
        return self.redactor.result(result) if self.redactor else result


_NO_TOOLS = _ScriptTools(None)
"""A session's tool outside its runs: a run is given its call's offer."""


@dataclass(frozen=True, kw_only=True)
class _Session:
    sandbox: Sandbox
    tool: RunScriptTool
    ended: anyio.Event
    """Set to end the session's task (its sandbox and tool close)."""
    gone: anyio.Event
    """Set once they are closed."""
