"""run_script inside ``sagents serve``: one :class:`RunScriptTool` per client session.

The gateway offers ``run_script`` when upstream MCP tools exist (issue 7 §1, issue 5 §1). Each
client session gets its own :class:`~sagents.script.session.RunScriptTool` on its first call
(its session id scopes progress, approvals and records), all sharing the gateway's sandbox
workspace, script runtime, audit store and progress hub. Each tool lives in a task of this
object's task group, so it is entered and left in one task whatever task the call came from.

The gateway's own approval gate treats ``run_script`` as read-only: what a script may do is
decided by run_script's pre-run check (listed write tools need one approval in ``ask`` mode,
asked of the client through MCP elicitation by
:class:`~sagents.gateway.approval.ClientScriptApprover`; destructive and long-task-only tools
are refused), so the call itself needs no second approval, and read-only sessions keep
run_script for their read-only tools.
"""

from __future__ import annotations

import dataclasses
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc

from sagents.audit.store import SqliteAuditStore, default_data_dir
from sagents.core.permissions import PermissionMode
from sagents.core.result import ToolResult
from sagents.core.spec import ToolSpec
from sagents.gateway.approval import ClientScriptApprover
from sagents.progress.hub import ProgressHub
from sagents.sandbox.factory import create_sandbox
from sagents.sandbox.protocol import Sandbox
from sagents.script.description import run_script_spec, should_offer_run_script
from sagents.script.runtime import install_runtime
from sagents.script.session import (
    RunScriptSettings,
    RunScriptTool,
    ScriptToolSource,
    script_callable_specs,
)
from sagents.script.settings import ScriptLimits
from sagents.tool.context import SessionContext

__all__ = ["GatewayScripts"]


class GatewayScripts:
    """run_script for every client session of one gateway; an async context manager.

    Args:
        hub: Where ``script.progress`` events go (the gateway forwards them to the client).
        workspace: The sessions' workspace on the host (records under ``.agent/scripts/``);
            ``<data dir>/workspace`` when None.
        limits: ``scripts`` limits of the config.
        data_dir: Where the script runtime and the audit store live; the default data dir
            (``$SAGENTS_DATA_DIR``) when None.

    Raises:
        SandboxUnavailableError: on entering, where bubblewrap is missing (no silent fallback).
    """

    def __init__(
        self,
        *,
        hub: ProgressHub,
        workspace: Path | None,
        limits: ScriptLimits,
        data_dir: Path | None = None,
    ) -> None:
        self._hub = hub
        self._data_dir = data_dir or default_data_dir()
        self._workspace = workspace or self._data_dir / "workspace"
        self._settings = RunScriptSettings(limits=limits)
        self._sessions: dict[str, RunScriptTool] = {}
        self._lock = anyio.Lock()
        self._stop = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None
        self._sandbox: Sandbox | None = None
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Self:
        self._workspace.mkdir(parents=True, exist_ok=True)
        self._runtime = install_runtime(self._data_dir)
        self._audit = SqliteAuditStore(path=self._data_dir / "audit.sqlite3")
        self._stack = AsyncExitStack()
        try:
            sandbox = create_sandbox("local", workspace=str(self._workspace))
            self._sandbox = await self._stack.enter_async_context(sandbox)
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
        self._stop.set()  # each session's task leaves its RunScriptTool (runs end 'cancelled')
        try:
            await self._stack.aclose()  # the sessions' task group, then the sandbox
        finally:
            self._tg = None
            self._sandbox = None

    @property
    def sandbox(self) -> Sandbox:
        """The sessions' sandbox (the gateway's built-in tools run there too).

        Raises:
            RuntimeError: before entering.
        """
        if self._sandbox is None:
            raise RuntimeError("enter GatewayScripts (async with) first")
        return self._sandbox

    def spec(self, specs: list[ToolSpec], mode: PermissionMode) -> ToolSpec | None:
        """run_script's spec for tools ``specs``, or None when no MCP tool makes it worth it.

        The description is the one of a session in ``mode``; the permission class is
        ``read_only`` for the gateway's own gate (see the module docstring).
        """
        callable_specs = script_callable_specs(specs)
        if not should_offer_run_script(callable_specs):
            return None
        spec = run_script_spec(callable_specs, mode=mode, limits=self._settings.limits)
        return dataclasses.replace(spec, permission="read_only")

    async def run(
        self,
        arguments: dict[str, Any],
        context: SessionContext,
        *,
        tools: ScriptToolSource,
        tool_call_id: str | None,
    ) -> ToolResult:
        """Run one ``run_script`` call for the calling session.

        Args:
            arguments: run_script's arguments (``code``, ``tools``, ``description``).
            context: The calling session.
            tools: What the session's scripts may call (the session's offer for scripts,
                :meth:`sagents.gateway.offer.SessionOffer.for_scripts`); the first call of a
                session fixes it for the session's run_script.
            tool_call_id: The call's id (progress events carry it).
        """
        tool = await self._session_tool(context, tools)
        code = arguments.get("code")
        listed = arguments.get("tools") or []
        description = arguments.get("description") or ""
        if not isinstance(code, str) or not isinstance(listed, list):
            return ToolResult.from_error(
                "invalid_arguments",
                "run_script needs 'code' (a string) and 'tools' (a list of tool names)",
            )
        return await tool.run(
            code, [str(name) for name in listed], str(description), tool_call_id=tool_call_id
        )

    async def _session_tool(
        self, context: SessionContext, tools: ScriptToolSource
    ) -> RunScriptTool:
        async with self._lock:
            found = self._sessions.get(context.session_id)
            if found is None:
                if self._tg is None or self._sandbox is None:
                    raise RuntimeError("enter GatewayScripts (async with) before running scripts")
                found = await self._tg.start(self._host, context, tools)
                self._sessions[context.session_id] = found
            return found

    async def _host(
        self,
        context: SessionContext,
        tools: ScriptToolSource,
        *,
        task_status: anyio.abc.TaskStatus[RunScriptTool],
    ) -> None:
        assert self._sandbox is not None
        async with RunScriptTool(
            tools=tools,
            session=context,
            sandbox=self._sandbox,
            runtime=self._runtime,
            approver=ClientScriptApprover(),
            settings=self._settings,
            hub=self._hub,
            audit=self._audit,
        ) as tool:
            task_status.started(tool)
            await self._stop.wait()
