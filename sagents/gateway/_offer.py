"""What one client session is offered: one filter around the gateway's provider.

:class:`SessionOffer` is the session filter of docs/gateway.md ("What a client sees"), in the
manner of pydantic-ai's ``FilteredToolset``: it wraps the shared provider and answers
``list_specs`` and ``run_tool`` for one session, so that ``tools/list``, ``tools/call`` and
run_script's allowed set are computed in this one place:

- the provider's tools that the session's mode and profile offer
  (:func:`sagents.gateway._policy.is_offered`: disabled tools never, write tools not in
  read-only mode, the profile's ``servers`` and ``tools``), minus names the gateway serves
  itself;
- narrowed further by the ``allowed-tools`` of the skills the session loaded
  (:meth:`SessionOffer.restrict`, which only narrows; Agent Skills spec, ``allowed-tools``);
- plus ``run_script`` when the gateway runs scripts and the profile offers it; its
  description lists, and its scripts may call, only :meth:`SessionOffer.for_scripts`: this
  offer minus what a script may never call (built-in tools, ``run_script``, the background
  tools, ``tool_expand_tools``; destructive and long-task-only tools stay known only so that
  run_script's policy refuses them by name).

A call of a name the offer does not hold is refused (``unknown_tool``), whatever path it came
by: hiding a tool and refusing it are the same decision.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Protocol

from sagents.core._permissions import PermissionMode
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import NotAllowedError, ScriptRejectedError, UnknownToolError
from sagents.gateway._policy import Profile, is_offered
from sagents.progress._hub import ProgressHub
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME, plan_script
from sagents.script._preflight import check_script
from sagents.script._session import script_callable_specs
from sagents.tool._approval import MAX_DESCRIPTION_CHARS, ApprovalRequest
from sagents.tool._call import ToolRequest
from sagents.tool._context import SessionContext
from sagents.tool._handler import ToolCall
from sagents.tool._provider import ToolProvider
from sagents.tool._spec_provider import SpecProvider
from sagents.tool.tool_manager import ToolManager

__all__ = ["ScriptHost", "ScriptOffer", "SessionOffer"]


class ScriptHost(Protocol):
    """Runs ``run_script`` for the gateway's sessions (``sagents.gateway._scripts``)."""

    def spec(self, specs: list[ToolSpec], mode: PermissionMode) -> ToolSpec | None:
        """run_script's spec for a session offered ``specs`` (None: not worth offering)."""
        ...

    async def run(
        self,
        arguments: dict[str, Any],
        context: SessionContext,
        *,
        tools: ToolProvider,
        tool_call_id: str | None,
    ) -> ToolResult:
        """Run one script of the session ``context``, calling only ``tools``."""
        ...


class SessionOffer(SpecProvider):
    """The tools of one session (a :class:`~sagents.tool.ToolProvider` itself).

    Args:
        provider: The gateway's shared provider.
        mode: The session's permission mode.
        profile: The session's profile, or None.
        scripts: The gateway's run_script host, or None (no ``run_script``).
        hidden: Names the gateway serves itself (``script_status``, ``script_cancel``).
    """

    def __init__(
        self,
        provider: ToolProvider,
        *,
        mode: PermissionMode,
        profile: Profile | None,
        scripts: ScriptHost | None = None,
        hidden: Iterable[str] = (),
    ) -> None:
        self.provider = provider
        self.mode: PermissionMode = mode
        self.profile = profile
        self.scripts = scripts
        self.hidden = frozenset(hidden)
        self._restricted: frozenset[str] | None = None
        self._script_calls: ToolManager | None = None
        self._script_schema = ""

    @property
    def restricted(self) -> frozenset[str] | None:
        """The names loaded skills' ``allowed-tools`` narrowed the session to (None: none)."""
        return self._restricted

    def restrict(self, names: Iterable[str]) -> list[str]:
        """Narrow the offer to ``names`` (intersected with any earlier restriction).

        Returns:
            The offered names still offered, sorted.
        """
        wanted = frozenset(names)
        self._restricted = wanted if self._restricted is None else self._restricted & wanted
        return sorted(spec.name for spec in self.list_specs())

    def _allows(self, spec: ToolSpec) -> bool:
        if spec.name in self.hidden or not is_offered(spec, self.mode, self.profile):
            return False
        return self._restricted is None or spec.name in self._restricted

    def provider_specs(self) -> list[ToolSpec]:
        """The provider's tools this session is offered (``run_script`` aside)."""
        own_run_script = self.scripts is not None  # the host's run_script, not the provider's
        return [
            spec
            for spec in self.provider.list_specs()
            if not (own_run_script and spec.name == RUN_SCRIPT_TOOL_NAME) and self._allows(spec)
        ]

    def list_specs(self) -> list[ToolSpec]:
        """The session's tools, in the provider's order, ``run_script`` last."""
        specs = self.provider_specs()
        if self.scripts is not None:
            run_script = self.scripts.spec(specs, self.mode)
            if run_script is not None and self._allows(run_script):
                specs.append(run_script)
        return specs

    def get(self, name: str) -> ToolSpec | None:
        """The offered tool ``name``, or None."""
        if name == RUN_SCRIPT_TOOL_NAME:
            # run_script's spec (its description lists the callable tools) is built only for it
            return next((spec for spec in self.list_specs() if spec.name == name), None)
        try:  # one lookup, not a scan of every tool (this runs on every call)
            spec = self.provider.get_tool_spec(name)
        except (UnknownToolError, NotAllowedError):
            return None
        return spec if spec.name == name and self._allows(spec) else None

    def _run_script_calls(self, listed: ToolSpec) -> ToolManager:
        """The registry the host's ``run_script`` runs through, so that its call has the
        boundary of every other call (``ToolManager.run_tool``: the arguments validated
        against the listed schema, a failure such as a sandbox that cannot start becomes the
        call's result). Rebuilt only when the listed schema changes."""
        schema = json.dumps(listed.input_schema, sort_keys=True)
        if self._script_calls is None or self._script_schema != schema:
            scripts = self.scripts
            assert scripts is not None

            async def run_script(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
                return await scripts.run(
                    arguments,
                    call.session_context,
                    tools=self.for_scripts(),
                    tool_call_id=call.tool_call_id,
                )

            # Nothing listens to this hub: the run's own events go to the script host's. The
            # run is bounded by its own limits (scripts.timeoutSec), not by a call timeout.
            manager = ToolManager(progress_hub=ProgressHub())
            manager.register_tool((replace(listed, timeout=math.inf), run_script))
            self._script_calls, self._script_schema = manager, schema
        return self._script_calls

    def script_approval(
        self,
        arguments: dict[str, Any],
        *,
        granted: frozenset[str],
        session_id: str,
        preflight: bool,
        tool_call_id: str | None = None,
    ) -> tuple[ApprovalRequest | None, frozenset[str]]:
        """A run_script call's one approval (None: nothing to ask) and the tools its run may
        call: the gateway's policy step of a run_script, asked before the call (the request's
        answer becomes the run's :class:`~sagents.tool.Decision`).

        run_script's pre-run check (:func:`sagents.script._policy.plan_script`) over what this
        session's scripts are offered, with the session's grants, then (``preflight``) the
        pre-flight check of the script (docs/run_script.md, "Pre-flight check"); a run that
        will be rejected, or bad arguments, approves nothing (the run then says why).
        """
        code, listed = arguments.get("code"), arguments.get("tools") or []
        description = arguments.get("description") or ""
        if not (
            isinstance(code, str) and isinstance(listed, list) and isinstance(description, str)
        ):
            return None, frozenset()
        if len(description) > MAX_DESCRIPTION_CHARS:
            return None, frozenset()  # refused by run_script's input schema, with the reason
        names = [str(name) for name in listed]
        try:
            plan = plan_script(
                self.for_scripts().list_specs(), names, self.mode, session_allowed=granted
            )
            if preflight:
                check_script(code, plan)  # a script with visible mistakes is not asked about
        except ScriptRejectedError:  # and PreflightError: the run says why, nothing is asked
            return None, frozenset()
        covered = frozenset(plan.callable)
        if not plan.needs_approval:
            return None, covered
        request = ApprovalRequest.for_script(
            plan.needs_approval,
            code,
            description=description,
            session_id=session_id,
            tool_call_id=tool_call_id,
        )
        return request, covered

    def for_scripts(self) -> ScriptOffer:
        """What this session's scripts may be offered (see the module docstring)."""
        return ScriptOffer(self)

    async def call(self, request: ToolRequest) -> ToolResult:
        """Run an offered tool (``run_script`` through the script host); refuse any other."""
        listed = self.get(request.name)
        if listed is None:
            return _not_offered(request.name)
        if listed.name == RUN_SCRIPT_TOOL_NAME and self.scripts is not None:
            return await self._run_script_calls(listed).call(replace(request, strict=False))
        return await self.provider.call(request)


class ScriptOffer(SpecProvider):
    """A session's offer as its scripts see it: the script-callable part only."""

    def __init__(self, offer: SessionOffer) -> None:
        self.offer = offer

    def list_specs(self) -> list[ToolSpec]:
        """The session's tools a script may be offered."""
        return script_callable_specs(self.offer.provider_specs())

    async def call(self, request: ToolRequest) -> ToolResult:
        """Run a script-callable tool of the session; refuse any other."""
        name = request.name
        spec = next((s for s in self.list_specs() if s.name == name), None)
        if spec is None:
            return _not_offered(name)
        if spec.permission in ("destructive", "long_task_only"):  # the policy refuses first
            return ToolResult.from_exception(
                NotAllowedError(
                    f"{spec.permission} tool {name!r} cannot be called from a script",
                    hint=f"call {name!r} directly (each call is approved on its own)",
                    details={"tool": name},
                )
            )
        # the request carries the run's decision (run_script's pre-run check): not decided again
        return await self.offer.provider.call(request)


def _not_offered(name: str) -> ToolResult:
    return ToolResult.from_exception(
        UnknownToolError(
            f"no tool {name!r} is offered to this session",
            hint="call tools/list for the tools this session may call",
            details={"tool": name},
        )
    )
