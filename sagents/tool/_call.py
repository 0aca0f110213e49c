"""``ToolRequest``: one tool call as it goes down the provider chain, and the one seam that
runs it (docs/architecture.md, "One tool call").

Every provider runs a call through one method, ``call(request)``, in the manner of httpx's
transport (one method, ``handle_async_request(request)``): ``ToolManager`` (the registry, the
one exception->result boundary), ``ToolProxy`` (a session's whitelist and mode) and the small
wrappers built on :class:`~sagents.tool.SpecProvider` (the gateway's per-session offer, its
scripts' offer). A wrapper overrides only what it changes: it refuses, or passes the same
request on (refined with :func:`dataclasses.replace`, :meth:`ToolRequest.decided`). Whatever
belongs to the call travels in the request, in the shape of pydantic-ai's ``RunContext``:
nothing rides beside it.

``run_tool(name, args, session_context, *, tool_call_id, timeout, strict)``, the seed API, is
:meth:`CallsTools.run_tool`: it builds the request and calls ``call``. It is written once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from sagents.core._result import ToolResult
from sagents.tool._approval import Approver, Decision, check_approver
from sagents.tool._context import SessionContext

__all__ = ["CallsTools", "ToolRequest"]


@dataclass(frozen=True, slots=True, init=False)
class ToolRequest:
    """One tool call, as asked, on its way to the registry that runs it.

    The value every provider's ``call`` receives; a provider that passes the call on passes
    this value (or a refined copy of it). The registry (``ToolManager.call``) resolves it into
    the :class:`~sagents.tool.ToolCall` a handler sees: the registered name, the validated
    arguments, a call id, the call's timeout in seconds.

    Attributes:
        name: The tool's registered or exported name.
        arguments: As the model sent them: a mapping, the JSON text of an object, or None
            (no arguments). Parsed and validated by the registry against the tool's input
            schema; a policy step that must show them parses them first and passes the parsed
            mapping on, so that what was approved is what runs.
        session_context: The calling session, carrying the call's :attr:`decision`. None: the
            registry's raw call (no permission mode applies; the registry makes a default
            context for the tool).
        tool_call_id: The model's id of the call (progress events carry it); None: the
            registry gives it a fresh ``call_<hex>`` id.
        timeout: Seconds before the call gives a ``timeout`` error result; None: the tool's
            own (``ToolSpec.timeout``; an MCP tool's server's ``callTimeout``), else
            ``DEFAULT_TOOL_TIMEOUT``. Decided by the registry alone (``call_timeout``).
        strict: The model saw the strict export: ``null`` for an optional parameter means
            "absent" (docs/tool-schema.md).
        approver: Who the policy step (a ``ToolProxy`` in front of the registry) asks when the
            session's mode wants an approval and the call is not decided yet; None: that
            step's own approver. The caller that runs the conversation supplies it (the agent
            loop: its run's approval events). One that is no :class:`~sagents.tool.Approver`
            (no ``approve`` method) raises ``TypeError`` at once.

    Frozen: a step that refines the call passes a copy on (:func:`dataclasses.replace`,
    :meth:`decided`), so the caller's value never changes under it.
    """

    name: str
    arguments: Mapping[str, Any] | str | None = None
    session_context: SessionContext | None = None
    tool_call_id: str | None = None
    timeout: float | None = None
    strict: bool = False
    approver: Approver | None = None

    def __init__(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        session_context: SessionContext | None = None,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,
        strict: bool = False,
        approver: Approver | None = None,
    ) -> None:
        # Every call builds one: the slots are set through their descriptors, not the frozen
        # dataclass's object.__setattr__ per field, which cost about half of a trivial tool's
        # whole call (bench/bench_tool_dispatch.py, against pydantic-ai's FunctionToolset).
        set_name, set_arguments, set_context, set_id, set_timeout, set_strict, set_approver = (
            _SETTERS
        )
        set_name(self, name)
        set_arguments(self, arguments)
        set_context(self, session_context)
        set_id(self, tool_call_id)
        set_timeout(self, timeout)
        set_strict(self, strict)
        if approver is not None:
            check_approver(approver, "ToolRequest")
        set_approver(self, approver)

    @property
    def decision(self) -> Decision | None:
        """The decision the policy step in front of this call made (carried in its session
        context; docs/architecture.md, "The decision"), or None: not decided yet."""
        context = self.session_context
        return None if context is None else context.decision

    def decided(self, decision: Decision) -> ToolRequest:
        """This request carrying ``decision``, so that nothing further down decides again.

        A request of no session gets a default ``SessionContext`` to carry it.
        """
        context = self.session_context if self.session_context is not None else SessionContext()
        return self.refined(session_context=replace(context, decision=decision))

    def refined(
        self,
        *,
        name: str | None = None,
        arguments: Mapping[str, Any] | str | None = None,
        session_context: SessionContext | None = None,
    ) -> ToolRequest:
        """This request with another registered name, parsed arguments or session context
        (None: unchanged), as a step in the chain passes it on.

        :func:`dataclasses.replace` does the same for any field, at about four times the cost
        of building a request (it walks the fields): a proxy refines every call it passes on
        (``bench/bench_tool_dispatch.py``, ``ToolProxy.run_tool``).
        """
        return ToolRequest(
            self.name if name is None else name,
            self.arguments if arguments is None else arguments,
            self.session_context if session_context is None else session_context,
            tool_call_id=self.tool_call_id,
            timeout=self.timeout,
            strict=self.strict,
            approver=self.approver,
        )


_SETTERS: tuple[Callable[[ToolRequest, Any], None], ...] = tuple(
    ToolRequest.__dict__[field.name].__set__ for field in fields(ToolRequest)
)


class CallsTools(ABC):
    """The seam of a provider that runs calls: :meth:`call`, and the seed API over it."""

    @abstractmethod
    async def call(self, request: ToolRequest) -> ToolResult:
        """Run one call; every failure of the call is an error result, cancellation
        propagates."""

    async def run_tool(
        self,
        name: str,
        args: Mapping[str, Any] | str | None = None,
        session_context: SessionContext | None = None,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the seed API's per-call timeout
        strict: bool = False,
    ) -> ToolResult:
        """Run one call: :meth:`call` with a :class:`ToolRequest` of these values (see its
        attributes, and ``ToolManager.call`` for what a call returns and raises)."""
        return await self.call(
            ToolRequest(
                name=name,
                arguments=args,
                session_context=session_context,
                tool_call_id=tool_call_id,
                timeout=timeout,
                strict=strict,
            )
        )
