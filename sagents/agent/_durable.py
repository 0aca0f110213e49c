"""What the agent loop does to pause and resume a run (docs/agent.md, "Pausing and resuming").

- :func:`check_call`: with ``approvals="defer"``, the loop is the policy step of each tool
  call of an answer (the one rule of :func:`~sagents.tool._approval.approval_needed`): a call
  the session's mode asks about, or a ``questionnaire``, is held as an :class:`Interruption`;
  any other call runs with its :class:`~sagents.tool.Decision` made here, so that nothing
  further down asks.
- :func:`denied_result`, :class:`AnsweredQuestioner`: how a decided item settles its call.
- :func:`session_document` / :func:`restore_session`: an :class:`AgentSession` as JSON for the
  store, so consecutive requests of one conversation may land on different workers.
- :func:`check_resume`: a state is refused for another session or agent, or with an item left
  undecided, before anything runs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from sagents.agent._events import QuestionnaireRequestEvent
from sagents.agent._run import approval_message
from sagents.agent._session import AgentSession, AuditStatus
from sagents.agent._state import Interruption, RunState, message_from_json, message_to_json
from sagents.core._permissions import PermissionClass
from sagents.core._result import ToolResult
from sagents.core.events import ApprovalRequestEvent
from sagents.errors import (
    InvalidArgumentsError,
    NotAllowedError,
    RunStateError,
    UnknownToolError,
)
from sagents.tool._approval import ApprovalRequest, Decision, DecisionKind, approval_needed
from sagents.tool._arguments import parse_arguments
from sagents.tool._context import SessionContext
from sagents.tool._tool_proxy import ToolProxy
from sagents.tool.impl._questionnaire import parse_questionnaire
from sagents.tool.questions import Questionnaire, QuestionnaireAnswer, QuestionnaireSlot

__all__ = [
    "SESSION_VERSION",
    "AnsweredQuestioner",
    "Check",
    "approval_request",
    "cancelled_result",
    "check_call",
    "check_resume",
    "denied_result",
    "request_event",
    "restore_session",
    "resume_into",
    "session_document",
]

QUESTIONNAIRE: Final = "questionnaire"  # the built-in tool's registered name
SESSION_VERSION: Final = 1


@dataclass(frozen=True, kw_only=True)
class Check:
    """What the policy step made of one call: held for a person, or its decision (neither:
    the call goes the usual way, which refuses it with the usual error)."""

    held: Interruption | None = None
    decision: Decision | None = None


def check_call(
    proxy: ToolProxy,
    name: str,
    arguments: str,
    *,
    call_id: str,
    context: SessionContext,
    granted: Collection[str],
) -> Check:
    """Decide one call of a deferring run (see the module docstring).

    Args:
        proxy: The session's tools.
        name: The tool's name as the model called it.
        arguments: The call's arguments (JSON text).
        call_id: The call's id (an item's id).
        context: The session (its mode).
        granted: Tools the session allowed for the rest of the session.
    """
    try:
        registered = proxy.resolve_exported_name(name)
        spec = proxy.get_tool_spec(registered)
        args = parse_arguments(registered, arguments)
    except (UnknownToolError, NotAllowedError, InvalidArgumentsError):
        return Check()
    if registered == QUESTIONNAIRE:
        try:
            questionnaire = parse_questionnaire(dict(args))
        except InvalidArgumentsError:
            return Check()
        return Check(
            held=Interruption(
                id=call_id,
                kind="questionnaire",
                tool_name=registered,
                arguments=dict(args),
                title=questionnaire.title,
                questions=questionnaire.questions,
            )
        )
    try:
        request = approval_needed(
            spec,
            args,
            mode=context.permission_mode,
            session_id=context.session_id,
            granted=granted,
            tool_call_id=call_id,
        )
    except NotAllowedError:
        return Check()
    if request is None:  # as ToolProxy decides a call that runs without asking
        on_grant = spec.permission != "read_only" and context.permission_mode != "auto"
        kind: DecisionKind = "approved_session" if on_grant else "allowed"
        return Check(decision=Decision(kind=kind, tools=frozenset({registered})))
    return Check(
        held=Interruption(
            id=call_id,
            kind="approval",
            tool_name=registered,
            arguments=dict(args),
            permission=spec.permission,
            offered=request.offered,
        )
    )


def request_event(
    item: Interruption, session_id: str, ts: float
) -> ApprovalRequestEvent | QuestionnaireRequestEvent:
    """The ``approval.request`` / ``questionnaire.request`` event of a held call (its
    ``request_id`` the item's id); the answer goes on the :class:`RunState`."""
    if item.kind == "questionnaire":
        questionnaire = item.questionnaire()
        return QuestionnaireRequestEvent(
            request_id=item.id,
            questionnaire=questionnaire,
            time_limit=0.0,
            ts=ts,
            slot=QuestionnaireSlot(questionnaire),
        )
    request = approval_request(item, session_id)
    return ApprovalRequestEvent(
        request_id=item.id,
        tool_call_id=item.id,
        tools=request.tools,
        message=approval_message(request),
        ts=ts,
    )


def approval_request(item: Interruption, session_id: str) -> ApprovalRequest:
    """The approval request of a held call, as an approver takes it (what ``approvals="wait"``
    would have asked)."""
    return ApprovalRequest.for_tool_call(
        item.tool_name,
        item.arguments,
        permission=cast(PermissionClass, item.permission),  # the spec's, as the item keeps it
        session_id=session_id,
        tool_call_id=item.id,
    )


def denied_result(item: Interruption, reason: str) -> ToolResult:
    """The result of a call the person denied."""
    why = f": {reason}" if reason else ""
    return ToolResult.from_exception(
        NotAllowedError(
            f"the call of {item.tool_name!r} was denied by the user{why}",
            hint="Do not retry this call; ask the user what to do instead.",
            details={"name": item.tool_name, "answer": "deny"},
        )
    )


def cancelled_result(reason: str) -> ToolResult:
    """The result of a call whose paused run was cancelled."""
    why = f" ({reason})" if reason else ""
    return ToolResult.from_error(
        "cancelled",
        f"the run was cancelled while it waited for the user{why}; this call did not run",
    )


class AnsweredQuestioner:
    """The questioner of a resumed ``questionnaire`` call: the answer given on the state."""

    def __init__(self, answer: QuestionnaireAnswer) -> None:
        self._answer = answer

    async def ask(self, questionnaire: Questionnaire, *, time_limit: float) -> QuestionnaireAnswer:
        """The answer given (checked by the tool against ``questionnaire``)."""
        return self._answer


def check_resume(state: RunState, *, agent: str, context: SessionContext, proxy: ToolProxy) -> None:
    """Refuse a state that this run may not continue (nothing has run yet).

    Raises:
        RunStateError: another session (``session``), another agent (``agent``), a pending
            call's tool this session does not have (``tools``), or an item left undecided
            (``undecided``).
    """
    if state.session_id != context.session_id:
        raise RunStateError(
            "this run state belongs to another session",
            hint="resume it with the SessionContext (session_id) of the session that paused it",
            details={"reason": "session"},
        )
    if state.agent != agent:
        raise RunStateError(
            f"this run state was paused by the agent {state.agent!r}, not {agent!r}",
            hint="resume it with the agent that paused it (SAgent(name=...))",
            details={"reason": "agent"},
        )
    missing = sorted({i.tool_name for i in state.pending if not proxy.has_tool(i.tool_name)})
    if missing:
        raise RunStateError(
            f"this session has no tool {', '.join(repr(n) for n in missing)} that the paused "
            "run waits to call",
            hint="resume it with the tools of the run that paused it",
            details={"reason": "tools", "tools": missing},
        )
    undecided = [item.id for item in state.undecided]
    if undecided:
        raise RunStateError(
            f"the items {', '.join(repr(i) for i in undecided)} are not decided yet",
            hint="call approve/deny (approvals) or answer/decline (questionnaires) for each, "
            "or cancel() the run",
            details={"reason": "undecided", "items": undecided},
        )


def session_document(session: AgentSession, granted: Collection[str]) -> dict[str, Any]:
    """An :class:`AgentSession` as JSON: history, ``audit_status``, offered tools, grants and
    loaded skills (the todo list lives in its own store, keyed by the session)."""
    skills = list(session.skills.active_skills) if session.skills is not None else []
    return {
        "version": SESSION_VERSION,
        "session_id": session.session_id,
        "history": [message_to_json(m) for m in session.history],
        "audit_status": session.audit_status.snapshot(),
        "offered_tools": list(session.offered_tools),
        "granted": sorted(granted),
        "skills": skills,
    }


def restore_session(session: AgentSession, document: Mapping[str, Any]) -> list[str]:
    """Fill ``session`` from :func:`session_document`'s document; the grants it held.

    Raises:
        RunStateError: a document of another version or shape (``format``).
    """
    if document.get("version") != SESSION_VERSION:
        raise RunStateError(
            f"the stored session has version {document.get('version')!r}; this sagents reads "
            f"version {SESSION_VERSION}",
            details={"reason": "version"},
        )
    try:
        session.history = [message_from_json(m) for m in document["history"]]
        session.audit_status = AuditStatus(document["audit_status"])
        session.offered_tools = [str(n) for n in document["offered_tools"]]
        session.restored_skills = [str(n) for n in document["skills"]]
        return [str(n) for n in document["granted"]]
    except (KeyError, TypeError, ValueError) as error:
        raise RunStateError(
            f"the stored session is malformed: {error!r}", details={"reason": "format"}
        ) from None


def resume_into(session: AgentSession, state: RunState) -> None:
    """Put a paused run's session state back into ``session`` (its history ends with the
    answer whose calls waited)."""
    session.history = list(state.history)
    session.audit_status = AuditStatus(state.audit_status)
    session.offered_tools = list(state.offered_tools)
    session.granted.update(state.granted)
    session.restored_skills = list(state.skills)
