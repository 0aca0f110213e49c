"""``ToolProxy``: a session's whitelisted view of one or more tool registries (docs/tools.md).

A session's whitelist: several providers in priority order (index 0 wins a name
that more than one holds), filtered by ``available_tools``. It has the same interface as
``ToolManager`` (:class:`~sagents.tool._provider.ToolProvider`) so an agent need not tell them
apart. It is read-only: register tools on the underlying managers.

The whitelist changes only through :meth:`ToolProxy.allow` (widen, within what the providers
hold) and :meth:`ToolProxy.restrict` (narrow; the skills layer enforces a skill's
``allowed-tools`` with it). Names that no provider holds are logged as a warning and ignored.

A call that carries a :class:`~sagents.tool._context.SessionContext` is held to its
``permission_mode`` (``docs/tools.md``, "Permission modes and approvals"): ``read_only`` refuses
write and destructive tools (``not_allowed``); ``ask`` asks the approver (the one approval
protocol, :mod:`sagents.tool._approval`) before a write, and refuses it with a clear error when
there is no approver; ``auto`` runs writes; a destructive tool is asked about in every mode. A
call without a context is the registry's raw call and applies no mode.

The proxy decides a call once (docs/architecture.md, "The decision"): the
:class:`~sagents.tool.Decision` it makes goes on in the call's context, and a context that
already carries one (the gateway decided, or run_script's pre-run check) is held to it — the
tool runs when the decision covers it, and nobody is asked again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import (
    InvalidArgumentsError,
    NotAllowedError,
    ToolExecutionError,
    UnknownToolError,
)
from sagents.tool._approval import (
    ApprovalRequest,
    Approver,
    Decision,
    DecisionKind,
    approval_needed,
    check_approver,
    settle_answer,
)
from sagents.tool._arguments import parse_arguments
from sagents.tool._call import CallsTools, ToolRequest
from sagents.tool._context import SessionContext
from sagents.tool._middleware import ToolMiddleware, after_call, before_call
from sagents.tool._provider import ToolProvider
from sagents.tool.tool_manager import ToolManager

if TYPE_CHECKING:
    from sagents.tool._api_export import ModelApi

__all__ = ["ToolProxy"]

logger = logging.getLogger(__name__)


class ToolProxy(CallsTools):
    """A whitelisted, prioritised view of several tool providers.

    Args:
        tool_managers: Providers in priority order (index 0 first), or a single provider.
        available_tools: The registered names this session may see and call; None means every
            tool the providers hold (now and later). Unknown names are logged and ignored.
        approver: Answers the approvals a session's mode asks for (see the module docstring);
            a call may pass its own. None: calls that need an approval are refused.
        enforce_mode: False: apply no mode at all, as the registry's raw call does. A caller
            that decided a call itself does not need it: it passes its
            :class:`~sagents.tool.Decision` in the call's ``SessionContext`` (``decision``),
            which the proxy honours instead of deciding again.
        middleware: :class:`~sagents.tool.ToolMiddleware` applied to each call, in order,
            before the session's mode (a middleware's ``ask`` makes the call ask the approver
            even where the mode would not; docs/tools.md, "Middleware").

    Raises:
        TypeError: ``approver`` is no :class:`~sagents.tool.Approver` (it has no ``approve``
            method: a plain function, say).
    """

    def __init__(
        self,
        tool_managers: Sequence[ToolProvider] | ToolProvider,
        available_tools: Iterable[str] | None = None,
        *,
        approver: Approver | None = None,
        enforce_mode: bool = True,
        middleware: Sequence[ToolMiddleware] = (),
    ) -> None:
        # A list or tuple is taken as it is before isinstance of the runtime-checkable
        # ToolProvider protocol, which inspects the protocol's members on every call: the
        # agent loop builds a proxy of a list for every run of a new session
        # (bench/bench_agent_loop.py, text turn).
        if not isinstance(tool_managers, list | tuple) and isinstance(tool_managers, ToolProvider):
            tool_managers = [tool_managers]
        self._providers: tuple[ToolProvider, ...] = tuple(tool_managers)
        check_approver(approver, "ToolProxy")
        self.approver = approver
        self.enforce_mode = enforce_mode
        self._middleware: tuple[ToolMiddleware, ...] = tuple(middleware)
        self._session_allowed: dict[str, set[str]] = {}  # session id -> allowed for the session
        self._allowed: set[str] | None = None
        if available_tools is not None:
            self._allowed = self._known(available_tools, "available_tools")
        self._changes = 0  # changes of the whitelist so far (revision)

    @property
    def tool_managers(self) -> tuple[ToolProvider, ...]:
        """The providers, in priority order."""
        return self._providers

    @property
    def available_tools(self) -> frozenset[str] | None:
        """The whitelist (registered names), or None when everything is visible."""
        return None if self._allowed is None else frozenset(self._allowed)

    # -- the whitelist ------------------------------------------------------------------------

    def allow(self, names: Iterable[str]) -> list[str]:
        """Widen the whitelist by ``names`` that some provider holds.

        Returns:
            The names added (already visible ones and unknown ones are not listed).
        """
        if self._allowed is None:
            return []
        added = sorted(self._known(names, "allow()") - self._allowed)
        self._allowed.update(added)
        self._changes += 1
        return added

    def restrict(self, names: Iterable[str]) -> list[str]:
        """Narrow the whitelist to the visible tools among ``names``.

        Returns:
            The names still visible, sorted.
        """
        wanted = self._known(names, "restrict()")
        self._allowed = {n for n in wanted if self._is_allowed(n)}
        self._changes += 1
        return sorted(self._allowed)

    @property
    def revision(self) -> tuple[object, ...] | None:
        """A value that changes whenever what this proxy offers may have changed (a
        provider's tools, the whitelist): while it stays equal, so do its specs and exports
        (what a caller may keep, as the agent loop keeps a run's offer of tools between its
        model calls). None when a provider keeps no revision (a ``ToolProvider`` of your own,
        or a subclass, which may export otherwise): then nothing tells, and nothing may be
        kept."""
        parts: list[object] = [self._changes]
        for provider in self._providers:
            if type(provider) not in (ToolManager, ToolProxy):
                return None
            revision = cast("ToolManager | ToolProxy", provider).revision
            if revision is None:
                return None
            parts.append(revision)
        return tuple(parts)

    # -- the ToolProvider interface -----------------------------------------------------------

    def has_tool(self, name: str) -> bool:
        """True when ``name`` (registered or exported) is visible to this session."""
        registered = self._resolve(name)
        return registered is not None and self._is_allowed(registered)

    def list_all_tools_name(self) -> list[str]:
        """The visible registered names, sorted."""
        return sorted(self._visible())

    def list_specs(self) -> list[ToolSpec]:
        """The specs of the visible tools, sorted by registered name."""
        return [self.get_tool_spec(name) for name in self.list_all_tools_name()]

    def get_tool_spec(self, name: str) -> ToolSpec:
        """The spec of a visible tool.

        Raises:
            UnknownToolError: no provider holds the tool.
            NotAllowedError: the tool exists but is outside the whitelist.
        """
        registered, provider = self._locate(name)
        return provider.get_tool_spec(registered)

    def resolve_exported_name(self, name: str) -> str:
        """The registered name behind an exported (or registered) name of a visible tool.

        Raises:
            UnknownToolError: no provider holds the tool.
            NotAllowedError: the tool exists but is outside the whitelist.
        """
        return self._locate(name)[0]

    def get_openai_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """The visible tools as OpenAI function tools, sorted by registered name.

        Each tool keeps the exported name of the provider that holds it. Should a lower-priority
        provider export another tool under an exported name already taken, that tool is left
        out with a warning (it could not be called by that name anyway).
        """
        return self._merged(
            lambda p: p.get_openai_tools(strict=strict),
            name_of=lambda tool: tool["function"]["name"],
            resolve=lambda p, name: p.resolve_exported_name(name),
        )

    def get_responses_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """The visible tools as OpenAI Responses function tools (see ``get_openai_tools``)."""
        return self._merged(lambda p: p.get_responses_tools(strict=strict))

    def get_anthropic_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """The visible tools as Anthropic Messages tools (see ``get_openai_tools``)."""
        return self._merged(lambda p: p.get_anthropic_tools(strict=strict))

    def get_gemini_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """The visible tools as Gemini function declarations (see ``get_openai_tools``)."""
        return self._merged(
            lambda p: p.get_gemini_tools(strict=strict), resolve=_resolver("gemini")
        )

    def _merged(
        self,
        fetch: Callable[[ToolProvider], list[dict[str, Any]]],
        *,
        name_of: Callable[[dict[str, Any]], str] = lambda tool: str(tool["name"]),
        resolve: Callable[[ToolProvider, str], str] | None = None,
    ) -> list[dict[str, Any]]:
        """Each provider's export, the first provider winning a name, hidden tools left out.

        Should a lower-priority provider export another tool under an exported name already
        taken, that tool is left out with a warning (it could not be called by that name).
        """
        resolve = resolve or _resolver("responses")
        tools: dict[str, dict[str, Any]] = {}
        taken: set[str] = set()
        for provider in self._providers:
            for exported in fetch(provider):
                exported_name = name_of(exported)
                registered = resolve(provider, exported_name)
                if registered in tools or not self._is_allowed(registered):
                    continue  # shadowed by a higher-priority provider, or hidden
                if exported_name in taken:
                    logger.warning(
                        "tool %r is left out: its exported name %r is already taken",
                        registered,
                        exported_name,
                    )
                    continue
                taken.add(exported_name)
                tools[registered] = exported
        return [tools[name] for name in sorted(tools)]

    async def call(self, request: ToolRequest) -> ToolResult:
        """Run a visible tool on the provider that holds it (see ``ToolManager.call``).

        A tool no provider holds gives an ``unknown_tool`` result; one outside the whitelist a
        ``not_allowed`` result. With a session context, its permission mode is applied first
        (see the module docstring), asking ``request.approver`` or else the proxy's own; a
        refused or denied call is a ``not_allowed`` result saying why. The request goes on
        with the registered name and the decision. Cancellation propagates.
        """
        middleware = self._middleware
        asked: str | None = None
        response: ToolResult | None = None  # a middleware's answer: the provider is not called
        try:
            registered, provider = self._locate(request.name)
            if registered != request.name:
                request = request.refined(name=registered)
            if middleware:
                # Parsed once, depth- and size-safe: the middleware sees, and the provider
                # runs, this very value (rewritten arguments are validated by the registry).
                arguments = parse_arguments(registered, request.arguments)
                hooked = await before_call(middleware, request.refined(arguments=arguments))
                request, asked, response = hooked.call, hooked.asked, hooked.response
                middleware = hooked.seen
            context = request.session_context
            if context is not None and self.enforce_mode:
                decision = context.decision
                if decision is None:  # this proxy is the policy step: decide once, here
                    spec = provider.get_tool_spec(registered)
                    # Parsed once, depth- and size-safe; the approval shows, and the provider
                    # runs, this very value (docs/tools.md, "One call").
                    arguments = parse_arguments(registered, request.arguments)
                    decision = await self._decide(spec, arguments, context, request, asked)
                    request = request.refined(
                        arguments=arguments, session_context=replace(context, decision=decision)
                    )
                elif not decision.covers(registered):
                    raise NotAllowedError(
                        f"the decision made for this call does not let {registered!r} run",
                        hint="Call the tool directly; it is then approved on its own.",
                        details={"name": registered, "decision": decision.kind},
                    )
                elif asked is not None:
                    raise _not_askable(registered, asked)
            elif asked is not None:
                raise _not_askable(registered, asked)
        except (
            UnknownToolError,
            NotAllowedError,
            InvalidArgumentsError,
            ToolExecutionError,
        ) as error:
            return ToolResult.from_exception(error)
        # The decision travels in the request: a provider further down never decides again.
        result = await provider.call(request) if response is None else response
        if middleware:
            result = await after_call(middleware, request, result)
        return result

    async def run_tool(
        self,
        name: str,
        args: Mapping[str, Any] | str | None = None,
        session_context: SessionContext | None = None,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the seed API's per-call timeout
        strict: bool = False,
        approver: Approver | None = None,
    ) -> ToolResult:
        """:meth:`call` with a ``ToolRequest`` of these values (the seed API's form).

        Args:
            approver: Asked instead of the proxy's own approver for this call (the request's
                ``approver``).

        Raises:
            TypeError: ``approver`` is no :class:`~sagents.tool.Approver`, before the call.
        """
        request = ToolRequest(
            name=name,
            arguments=args,
            session_context=session_context,
            tool_call_id=tool_call_id,
            timeout=timeout,
            strict=strict,
            approver=approver,
        )
        return await self.call(request)

    def allowed_for_session(self, session_id: str) -> frozenset[str]:
        """The tools the user answered ``allow_session`` for in ``session_id``."""
        return frozenset(self._session_allowed.get(session_id, ()))

    # -- internals ----------------------------------------------------------------------------

    async def _decide(
        self,
        spec: ToolSpec,
        arguments: Mapping[str, Any],
        context: SessionContext,
        call: ToolRequest,
        asked: str | None = None,
    ) -> Decision:
        """The decision for this call under the session's mode (asking the call's approver, or
        the proxy's, if the mode says so, or a middleware asked: ``asked`` is its reason); raise
        :class:`NotAllowedError` unless it lets the call run."""
        approver = call.approver or self.approver
        request = approval_needed(
            spec,
            arguments,
            mode=context.permission_mode,
            session_id=context.session_id,
            granted=() if asked is not None else self._session_allowed.get(context.session_id, ()),
            tool_call_id=call.tool_call_id,
        )
        if asked is not None:
            # A middleware wants a person to approve this very call: asked even where the mode
            # would not ask, once (an "allow for the session" would pass the middleware by).
            request = replace(
                request
                or ApprovalRequest.for_tool_call(
                    spec.name,
                    arguments,
                    permission=spec.permission,
                    session_id=context.session_id,
                    tool_call_id=call.tool_call_id,
                ),
                description=asked,
                offered=("allow_once", "deny"),
            )
        if request is None:
            granted = spec.permission != "read_only" and context.permission_mode != "auto"
            kind: DecisionKind = "approved_session" if granted else "allowed"
            return Decision(kind=kind, tools=frozenset({spec.name}))
        permission, mode, name = spec.permission, context.permission_mode, spec.name
        if approver is None:
            raise NotAllowedError(
                f"tool {name!r} is a {permission} tool and needs an approval in {mode!r} mode, "
                "and no approver was given, so nobody could be asked",
                hint=(
                    "Pass approver= to ToolProxy (or to this call), or run the session in "
                    "'auto' mode to let write tools run without asking."
                ),
                details={"name": name, "permission": permission, "mode": mode},
            )
        answer = settle_answer(request, await approver.approve(request))
        if answer == "deny":
            raise NotAllowedError(
                f"the call of {name!r} was denied by the user",
                hint="Do not retry this call; ask the user what to do instead.",
                details={"name": name, "permission": permission, "answer": answer},
            )
        if answer == "allow_session":
            self._session_allowed.setdefault(context.session_id, set()).add(name)
        return Decision.from_answer(answer, {name})

    def _held(self) -> set[str]:
        held: set[str] = set()
        for provider in self._providers:
            held.update(provider.list_all_tools_name())
        return held

    def _visible(self) -> set[str]:
        held = self._held()
        return held if self._allowed is None else held & self._allowed

    def _is_allowed(self, registered: str) -> bool:
        return self._allowed is None or registered in self._allowed

    def _resolve(self, name: str) -> str | None:
        """The registered name of ``name`` in the first provider that knows it."""
        for provider in self._providers:
            if provider.has_tool(name):
                return provider.resolve_exported_name(name)
        return None

    def _locate(self, name: str) -> tuple[str, ToolProvider]:
        for provider in self._providers:
            if provider.has_tool(name):
                registered = provider.resolve_exported_name(name)
                if not self._is_allowed(registered):
                    raise NotAllowedError(
                        f"tool {registered!r} is not available in this session",
                        hint="Call one of the tools you were given.",
                        details={"name": registered},
                    )
                return registered, provider
        raise UnknownToolError(
            f"no tool named {name!r}",
            hint="Call one of the tools you were given.",
            details={"name": name},
        )

    def _known(self, names: Iterable[str], where: str) -> set[str]:
        if isinstance(names, str):
            names = [names]
        known: set[str] = set()
        for name in names:
            registered = self._resolve(name)
            if registered is None:
                logger.warning("%s names an unknown tool %r; ignoring it", where, name)
            else:
                known.add(registered)
        return known


def _not_askable(name: str, reason: str) -> NotAllowedError:
    """A middleware asked for an approval where nobody can be asked any more."""
    return NotAllowedError(
        f"{reason}; the call of {name!r} was decided before it reached this proxy's "
        "middleware (or has no session to ask in), so nobody can be asked",
        hint="Put middleware that may ask on the ToolProxy that decides the session's calls.",
        details={"name": name},
    )


def _resolver(api: ModelApi) -> Callable[[ToolProvider, str], str]:
    """The registered name behind an ``api`` tool name of a provider's tool."""
    from sagents.tool._api_export import api_tool_name  # the exporters load on first use
    from sagents.tool._export_calls import resolve_call_name

    return lambda provider, name: resolve_call_name(
        name, provider, lambda registered: api_tool_name(api, registered)
    )
