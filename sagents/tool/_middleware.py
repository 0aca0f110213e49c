"""``ToolMiddleware``: code that sees each call on the one call path, before and after it runs.

A middleware is given the call value (:class:`~sagents.tool.ToolRequest`: the registered name,
the parsed arguments, the session context, the call id) before the call runs and answers a
:class:`HookDecision`: ``allow`` (optionally with rewritten arguments, which are validated
again like any arguments), ``deny`` with a reason the model reads, ``ask`` (a person must
approve this call), or ``respond`` with a result that answers the call without running the tool
(a cache's hit: later middleware are not asked, and the ``after_call`` of this one and of those
before it still see the result). After the call it is given the result and returns the
result that goes on (the same, or a replaced or redacted one). ``ToolManager(middleware=[...])`` and
``ToolProxy(..., middleware=[...])`` apply them in list order before the call and in reverse
order after it (the first middleware sees the final result last), for every caller: direct
calls, scripts' calls, the agent loop and the gateway (docs/tools.md, "Middleware").

A middleware that raises fails that one call with an ``execution_error`` result naming it;
cancellation propagates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, runtime_checkable

import anyio

from sagents.core._result import ToolResult
from sagents.errors import NotAllowedError, ToolExecutionError
from sagents.tool._call import ToolRequest

__all__ = [
    "HookDecision",
    "HookDecisionKind",
    "Hooked",
    "ToolMiddleware",
    "after_call",
    "before_call",
]

HookDecisionKind = Literal["allow", "deny", "ask", "respond"]


@dataclass(frozen=True, slots=True)
class HookDecision:
    """What a middleware's ``before_call`` answers.

    Attributes:
        kind: ``allow`` (the call goes on), ``deny`` (it does not run: a ``not_allowed``
            result with :attr:`reason`), ``ask`` (it runs only if a person approves it now),
            ``respond`` (the tool does not run: :attr:`result` answers the call).
        reason: Why: shown to the model on ``deny``, to the person on ``ask``.
        arguments: With ``allow``: the arguments the call runs with instead (validated again
            against the tool's input schema; invalid ones are refused). None: unchanged.
        result: With ``respond``: the result that answers the call instead of running it.
    """

    kind: HookDecisionKind = "allow"
    reason: str = ""
    arguments: Mapping[str, Any] | None = None
    result: ToolResult | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("allow", "deny", "ask", "respond"):
            raise ValueError(
                "a hook decision is 'allow', 'deny' or 'ask' (or 'respond' with a result),"
                f" not {self.kind!r}"
            )
        if self.arguments is not None and self.kind != "allow":
            raise ValueError("only an 'allow' decision may rewrite the arguments")
        if (self.kind == "respond") != isinstance(self.result, ToolResult):
            raise ValueError("a 'respond' decision, and only one, carries a ToolResult")

    @classmethod
    def allow(cls, arguments: Mapping[str, Any] | None = None) -> HookDecision:
        """Let the call run (with ``arguments`` instead of its own, when given)."""
        return cls("allow", arguments=arguments)

    @classmethod
    def deny(cls, reason: str) -> HookDecision:
        """Refuse the call; ``reason`` is what the model reads."""
        return cls("deny", reason)

    @classmethod
    def ask(cls, reason: str = "") -> HookDecision:
        """Let the call run only if a person approves it now."""
        return cls("ask", reason)

    @classmethod
    def respond(cls, result: ToolResult) -> HookDecision:
        """Answer the call with ``result`` without running the tool (nor asking the middleware
        after this one); the ``after_call`` of this middleware and of those before it still
        run, and a permission decision or approval the call needs is still made."""
        return cls("respond", result=result)


@runtime_checkable
class ToolMiddleware(Protocol):
    """Sees each tool call before it runs (allow, deny, ask, or rewrite its arguments) and its
    result after (keep, replace or redact it)."""

    async def before_call(self, call: ToolRequest) -> HookDecision:
        """The decision for ``call`` (its ``arguments`` already parsed into a mapping)."""
        ...

    async def after_call(self, call: ToolRequest, result: ToolResult) -> ToolResult:
        """The result that goes on: ``result``, or one that replaces or redacts it."""
        ...


@dataclass(frozen=True, slots=True)
class Hooked:
    """What the middleware made of a call before it runs (:func:`before_call`).

    Attributes:
        call: The call as it goes on (rewritten arguments in it).
        asked: None, or the reason of the first ``ask`` (the call then needs a person's
            approval).
        response: None, or the result a ``respond`` decision answered the call with (the tool
            then does not run).
        seen: The middleware whose ``before_call`` ran: their ``after_call`` see the result.
    """

    call: ToolRequest
    asked: str | None
    response: ToolResult | None
    seen: tuple[ToolMiddleware, ...]


async def before_call(middleware: Sequence[ToolMiddleware], call: ToolRequest) -> Hooked:
    """Ask each middleware in order about ``call``, up to the first that responds.

    Raises:
        NotAllowedError: a middleware denied the call (its reason is the message).
        ToolExecutionError: a middleware raised, or answered something else than a
            :class:`HookDecision`.
    """
    asked: str | None = None
    for index, each in enumerate(middleware):
        try:
            decision = await each.before_call(call)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as error:  # a failing middleware fails this call only
            raise _failed(each, "before_call", call, repr(error)) from error
        if not isinstance(decision, HookDecision):
            raise _failed(each, "before_call", call, f"it answered {decision!r}")
        if decision.kind == "deny":
            raise NotAllowedError(
                decision.reason or f"the call of {call.name!r} was refused by {_name(each)}",
                hint="Do not retry this call as it is.",
                details={"name": call.name, "middleware": _name(each)},
            )
        if decision.kind == "ask" and asked is None:
            asked = decision.reason or f"{_name(each)} asks for an approval of this call"
        if decision.result is not None:
            return Hooked(call, asked, decision.result, tuple(middleware[: index + 1]))
        if decision.arguments is not None:
            call = replace(call, arguments=dict(decision.arguments))
    return Hooked(call, asked, None, tuple(middleware))


async def after_call(
    middleware: Sequence[ToolMiddleware], call: ToolRequest, result: ToolResult
) -> ToolResult:
    """Hand ``result`` through each middleware's ``after_call``, the last one first.

    A middleware that raises, or answers something else than a ``ToolResult``, turns the
    result into an ``execution_error`` result naming it.
    """
    for each in reversed(middleware):
        try:
            answered = await each.after_call(call, result)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as error:  # noqa: BLE001 - a failing middleware fails this call only
            return ToolResult.from_exception(_failed(each, "after_call", call, repr(error)))
        if not isinstance(answered, ToolResult):
            failure = _failed(each, "after_call", call, f"it answered {answered!r}")
            return ToolResult.from_exception(failure)
        result = answered
    return result


def _failed(middleware: object, step: str, call: ToolRequest, what: str) -> ToolExecutionError:
    return ToolExecutionError(
        f"the middleware {_name(middleware)} failed in {step} for {call.name!r}: {what}",
        hint="This is a fault of the host's middleware, not of the call; it may be retried.",
        details={"name": call.name, "middleware": _name(middleware)},
    )


def _name(middleware: object) -> str:
    return type(middleware).__name__
