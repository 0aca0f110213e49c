"""run_script inside the agent loop: the session's ``RunScriptTool``, as the CLI and gateway
build it.

It is offered when the session has MCP tools a script could call
(:func:`~sagents.script._description.should_offer_run_script`) and a sandbox can start. The
script's own calls go through the session's ``ToolProxy``; the write tools a script lists are
approved once before the run (run_script's policy), and that decision travels with each of the
script's calls, so the proxy does not ask again (docs/architecture.md, "The decision"). The
one approval before a run is asked through the agent's approver (the one approval protocol,
:mod:`sagents.tool._approval`), as an ``ApprovalRequest.for_script`` (``allow_once`` or
``deny``).

With tool suggestion on, its description lists the callable tools' signatures with the ones
most relevant to the request first (:func:`relevant_description`), ranked again at each pick.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio.to_thread

from sagents.agent._suggest import suggest_tools
from sagents.audit._store import default_data_dir
from sagents.errors import SandboxError
from sagents.progress._hub import ProgressHub
from sagents.sandbox._factory import create_sandbox
from sagents.sandbox._protocol import Sandbox
from sagents.script._description import should_offer_run_script
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME
from sagents.script._runtime import install_runtime
from sagents.script._session import RunScriptSettings, RunScriptTool, script_callable_specs
from sagents.tool._approval import Approver
from sagents.tool._context import SessionContext
from sagents.tool._tool_proxy import ToolProxy

__all__ = [
    "offers_run_script",
    "open_run_script",
    "relevant_description",
    "with_script_description",
]

logger = logging.getLogger(__name__)


def offers_run_script(proxy: ToolProxy) -> bool:
    """Whether the session has an MCP tool a script could call (run_script is offered then,
    when a sandbox starts)."""
    return should_offer_run_script(script_callable_specs(proxy.list_specs()))


async def open_run_script(
    stack: AsyncExitStack,
    *,
    proxy: ToolProxy,
    context: SessionContext,
    approver: Approver,
    hub: ProgressHub,
    settings: RunScriptSettings | None = None,
    workspace: Path | None = None,
) -> tuple[RunScriptTool, Sandbox] | None:
    """Open the session's run_script on ``stack`` (a session :func:`offers_run_script` to), or
    return None (logged) when no sandbox can start here.

    Args:
        stack: Owns the sandbox and the tool (closed with the run).
        proxy: The session's tools.
        context: The session (its mode drives run_script's policy).
        approver: Asks the user before a run that lists write tools (the agent's, which emits
            the approval events).
        hub: Where ``script.progress`` goes.
        settings: Limits; the defaults when None.
        workspace: The host workspace; the context's, else ``<data dir>/workspace``.
    """
    data_dir = default_data_dir()
    root = workspace or (Path(context.workspace) if context.workspace else data_dir / "workspace")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        logger.warning("run_script is not offered: cannot create its workspace %s: %s", root, error)
        return None
    try:
        sandbox = await stack.enter_async_context(create_sandbox("local", workspace=str(root)))
        tool = RunScriptTool(
            tools=proxy,
            session=context,
            sandbox=sandbox,
            runtime=install_runtime(data_dir),
            approver=approver,
            settings=settings,
            hub=hub,
        )
        await stack.enter_async_context(tool)
    except SandboxError as error:
        logger.warning("run_script is not offered: %s", error)
        return None
    return tool, sandbox


async def relevant_description(tool: RunScriptTool, query: str) -> str:
    """run_script's description for one request: the callable tools' signatures, the ones the
    offline ranking finds most relevant to ``query`` first, as many as the description's
    token budget holds (docs/run_script.md, "Typed stubs"). Ranked in a worker thread (a
    first index build takes a moment); a ranking that fails lists them in the session's order."""
    specs = tool.callable_specs()
    try:
        ranked = await anyio.to_thread.run_sync(suggest_tools, query, specs, len(specs))
    except Exception:  # the description must not end the run: the session's order then
        logger.warning("run_script's tools could not be ranked; listed in order", exc_info=True)
        ranked = []
    return tool.spec(first=ranked).description


def with_script_description(exported: Mapping[str, Any], description: str) -> dict[str, Any]:
    """An OpenAI tool export as it is, or, when it is run_script's, with ``description``."""
    function = exported["function"]
    if function["name"] != RUN_SCRIPT_TOOL_NAME:
        return dict(exported)
    return {**exported, "function": {**function, "description": description}}
