"""The AG-UI route's threads: one conversation per ``threadId``, its run, and what the run
waits for (docs/chat.md, "Approvals and questionnaires").

A run of the agent loop outlives the HTTP request that started it. A call the session's mode
asks about pauses the run (``approvals="defer"``; :mod:`sagents.agent._ag_ui_waiting` keeps
what it waits for with the thread). An approval asked inside a running tool (run_script's one
approval) waits in this process: the request's event stream ends (``RUN_FINISHED`` whose result
names what waits) and the next ``RunAgentInput`` of the same thread carries the decision
(``forwardedProps.sagents.decisions``) and streams the rest of the run. An approval nobody
answers within :data:`APPROVAL_TTL_S` is denied.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
from ag_ui.core import BaseEvent, CustomEvent
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sagents.agent._ag_ui_events import APPROVAL_REQUEST, QUESTIONNAIRE_REQUEST, TOOL_PROGRESS
from sagents.agent._events import DoneEvent, QuestionnaireRequestEvent
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest
from sagents.tool.questions import check_answers

if TYPE_CHECKING:
    from sagents.agent._ag_ui_waiting import Waiting

__all__ = [
    "APPROVAL_TTL_S",
    "AllowDecision",
    "AnswersDecision",
    "DecisionError",
    "Run",
    "SagentsProps",
    "Thread",
    "ThreadApprover",
    "approval_details",
    "parse_sagents_props",
]

logger = logging.getLogger(__name__)

APPROVAL_TTL_S: Final = 600.0
"""Seconds an approval waits for a decision before it is denied."""
MAX_BUFFERED_PROGRESS: Final = 4096
"""``tool_progress`` events a run keeps while no client reads it; more are dropped (``closed``
and every other event are always kept)."""
_REQUESTS: Final = (APPROVAL_REQUEST, QUESTIONNAIRE_REQUEST)
_REGISTER_WAIT_S: Final = 5.0  # the approver is entered right after its request event is sent


class AllowDecision(BaseModel):
    """An approval's answer: ``{"decision": "allow_once" | "allow_session" | "deny",
    "reason"?}``."""

    model_config = ConfigDict(extra="forbid")
    decision: Literal["allow_once", "allow_session", "deny"]
    reason: str | None = None


class AnswersDecision(BaseModel):
    """A questionnaire's answers: ``{"answers": {question id: value}}``."""

    model_config = ConfigDict(extra="forbid")
    answers: dict[str, Any]


class SagentsProps(BaseModel):
    """``forwardedProps.sagents`` of a ``RunAgentInput``.

    Attributes:
        decisions: Per id of a waiting approval or questionnaire, its answer.
        cancel: Cancel the thread's run (also one that waits for decisions).
    """

    model_config = ConfigDict(extra="forbid")
    decisions: dict[str, AllowDecision | AnswersDecision] = Field(default_factory=dict)
    cancel: bool = False


class DecisionError(ValueError):
    """A decision that cannot be applied (the message names the id and why)."""


def parse_sagents_props(forwarded: Any) -> SagentsProps:
    """Read ``forwardedProps.sagents`` (absent: nothing to decide).

    Raises:
        DecisionError: not of the documented form.
    """
    props = forwarded.get("sagents") if isinstance(forwarded, Mapping) else None
    if props is None:
        return SagentsProps()
    try:
        return SagentsProps.model_validate(props)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in error.errors(include_url=False)[:5]
        )
        raise DecisionError(
            'forwardedProps.sagents must be {"decisions": {ID: {"decision": "allow_once" '
            '| "allow_session" | "deny", "reason"?} or {"answers": {...}}}, '
            f'"cancel"?}}: {problems}'
        ) from None


@dataclass(kw_only=True)
class _Approval:
    """One approval's meeting point: the approver waits on it, the run's reader names it."""

    request: ApprovalRequest | None = None
    registered: anyio.Event = field(default_factory=anyio.Event)
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: ApprovalAnswer = "deny"
    expired: bool = False


@dataclass(kw_only=True)
class Run:
    """One run of a thread: its AG-UI events not yet streamed, and what it waits for."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    outbox: deque[BaseEvent] = field(default_factory=deque)
    approvals: dict[str, _Approval] = field(default_factory=dict)
    """Waiting approvals by request id (the id the client answers)."""
    questionnaires: dict[str, QuestionnaireRequestEvent] = field(default_factory=dict)
    requests: dict[str, Any] = field(default_factory=dict)
    """The value of each request's ``CUSTOM`` event, by id (a reloaded page shows them)."""
    done: DoneEvent | None = None
    paused: list[str] = field(default_factory=list)
    """The ids the client answers when the run paused (``done`` is ``interrupted``), or when
    an answer left others undecided."""
    error: dict[str, Any] | None = None
    """The error (``{"code", "message", ...}``) that kept the run from starting."""
    finished: bool = False
    attached: bool = False
    cancelling: bool = False
    store_error: str | None = None
    dropped_progress: int = 0
    ended: dict[str, str] = field(default_factory=dict)
    """Requests that ended without their answer (expired, cancelled), by id: why."""
    _by_call: dict[str, _Approval] = field(default_factory=dict)
    _changed: anyio.Event = field(default_factory=anyio.Event)

    @property
    def waiting(self) -> list[str]:
        """The ids of the approvals and questionnaires waiting for a decision."""
        return [*self.approvals, *self.questionnaires]

    def changed(self) -> anyio.Event:
        """An event set at the next change (new events, the end)."""
        return self._changed

    def notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def waiting_requests(self) -> list[Any]:
        """What waits for a decision, as its ``CUSTOM`` event's value."""
        return [self.requests[i] for i in self.waiting if i in self.requests]

    def push(self, events: list[BaseEvent]) -> None:
        """Queue events for the client; progress beyond the bound is dropped while nobody
        reads (never a ``closed``)."""
        for event in events:
            if isinstance(event, CustomEvent) and event.name in _REQUESTS:
                self.requests[str(event.value["id"])] = event.value
            if _is_droppable(event) and len(self.outbox) >= MAX_BUFFERED_PROGRESS:
                self.dropped_progress += 1
                continue
            self.outbox.append(event)
        if events:
            self.notify()

    def finish(self) -> None:
        self.finished = True
        why = "was cancelled with its run" if self.cancelling else "ended with its run"
        for item_id in self.waiting:
            self.ended.setdefault(item_id, why)
        for approval in self.approvals.values():
            approval.answered.set()
        self.notify()

    # -- approvals ------------------------------------------------------------------------------

    def meeting(self, tool_call_id: str | None) -> _Approval:
        key = tool_call_id or ""
        found = self._by_call.get(key)
        if found is None or found.answered.is_set():
            found = self._by_call[key] = _Approval()
        return found

    async def announce(self, request_id: str, tool_call_id: str | None) -> dict[str, Any]:
        """Note an approval request the run emitted; what the client should see beyond the
        event (the answers offered, the arguments or the script)."""
        approval = self.meeting(tool_call_id)
        with anyio.move_on_after(_REGISTER_WAIT_S):
            await approval.registered.wait()
        self.approvals[request_id] = approval
        request = approval.request
        return {} if request is None else approval_details(request)

    def settled(self, request_id: str, status: str | None = None) -> None:
        """An approval or questionnaire ended (answered, timed out, cancelled); ``status``:
        a questionnaire's result status."""
        approval = self.approvals.pop(request_id, None)
        questionnaire = self.questionnaires.pop(request_id, None)
        if self.cancelling and (approval is not None or questionnaire is not None):
            self.ended[request_id] = "was cancelled with its run"
        elif approval is not None and approval.expired:
            self.ended[request_id] = "expired unanswered (denied)"
        elif status == "timed_out":
            self.ended[request_id] = "expired unanswered (timed out)"

    def ended_text(self, item_id: str) -> str | None:
        """Why ``item_id`` no longer waits, when it expired or was cancelled."""
        why = self.ended.get(item_id)
        return None if why is None else f"{item_id!r} {why}: it can no longer be answered"

    def check(self, decisions: Mapping[str, AllowDecision | AnswersDecision]) -> None:
        """Refuse decisions that cannot all be applied, before any is.

        Raises:
            DecisionError: an id that waits for nothing, or an answer of the wrong kind.
        """
        for item_id, decision in decisions.items():
            if item_id in self.approvals:
                if not isinstance(decision, AllowDecision):
                    raise DecisionError(f"{item_id!r} is an approval: answer it with 'decision'")
                request = self.approvals[item_id].request
                if request is not None and decision.decision not in request.offered:
                    raise DecisionError(
                        f"{item_id!r} offers only {', '.join(request.offered)}, "
                        f"not {decision.decision!r}"
                    )
            elif item_id in self.questionnaires:
                if isinstance(decision, AnswersDecision):
                    questionnaire = self.questionnaires[item_id].questionnaire
                    try:
                        check_answers(questionnaire, decision.answers)
                    except ValueError as error:
                        raise DecisionError(f"{item_id!r}: {error}") from None
            else:
                waiting = ", ".join(self.waiting) or "nothing"
                raise DecisionError(
                    self.ended_text(item_id)
                    or f"{item_id!r} does not wait for a decision (waiting: {waiting})"
                )

    def decide(self, decisions: Mapping[str, AllowDecision | AnswersDecision]) -> None:
        """Apply checked decisions: the waiting calls go on."""
        for item_id, decision in decisions.items():
            if item_id in self.approvals:
                approval = self.approvals.pop(item_id)
                assert isinstance(decision, AllowDecision)
                approval.answer = decision.decision
                approval.answered.set()
            elif item_id in self.questionnaires:
                question = self.questionnaires.pop(item_id)
                if isinstance(decision, AnswersDecision):
                    question.answer(decision.answers)
                else:
                    question.decline(decision.reason or "")


def approval_details(request: ApprovalRequest) -> dict[str, Any]:
    """What the client is shown of an approval beyond the event: the answers offered, the
    tools' permission classes, the arguments or the whole script."""
    return {
        "kind": request.kind,
        "offered": list(request.offered),
        "permissions": dict(request.permissions),
        "arguments": None if request.arguments is None else dict(request.arguments),
        "script": request.script,
        "description": request.description,
    }


def _is_droppable(event: BaseEvent) -> bool:
    if not isinstance(event, CustomEvent) or event.name != TOOL_PROGRESS:
        return False
    value = event.value
    return not (isinstance(value, Mapping) and value.get("closed"))


class ThreadApprover:
    """The approver of a thread's runs: waits for the decision the next ``RunAgentInput``
    brings (or :data:`APPROVAL_TTL_S`, then denies)."""

    def __init__(self, thread: Thread, *, ttl_s: float = APPROVAL_TTL_S) -> None:
        self._thread = thread
        self._ttl_s = ttl_s

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        run = self._thread.run
        if run is None:
            return "deny"
        approval = run.meeting(request.tool_call_id)
        approval.request = request
        approval.registered.set()
        with anyio.move_on_after(self._ttl_s):
            await approval.answered.wait()
        approval.expired = not approval.answered.is_set()
        return approval.answer


@dataclass(kw_only=True)
class Thread:
    """One conversation.

    Attributes:
        messages: The history (Chat Completions messages), as last saved.
        ids: The AG-UI id of each message.
        run: The current run, if one is in progress or waits for an approval asked inside a
            running tool (run_script's).
        waiting: What the thread's paused run waits for (kept in the store), if it paused.
        ended: Items that ended without their answer (expired, cancelled), by id: why.
        saved_waiting: ``waiting`` and ``ended`` as last read from or written to the store
            (the document another process's decisions are checked against).
    """

    thread_id: str
    owner: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    run: Run | None = None
    waiting: Waiting | None = None
    ended: dict[str, str] = field(default_factory=dict)
    saved_waiting: dict[str, Any] | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def changed(self) -> anyio.Event:
        """An event set when the thread's run is replaced (a paused run resumed)."""
        return self._changed

    def notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    @property
    def active(self) -> bool:
        """Whether a run is in progress (or waits inside a running tool)."""
        return self.run is not None and not self.run.finished

    @property
    def waiting_ids(self) -> list[str]:
        """The ids of what the thread waits for: its paused run's items, or the approvals and
        questionnaires asked inside its running tools."""
        if self.run is not None and self.active:
            return self.run.waiting
        return [] if self.waiting is None else self.waiting.ids

    def ended_text(self, item_id: str) -> str | None:
        """Why ``item_id`` no longer waits, when it expired or was cancelled."""
        why = self.ended.get(item_id)
        if why is None and self.run is not None:
            why = self.run.ended.get(item_id)
        return None if why is None else f"{item_id!r} {why}: it can no longer be answered"
