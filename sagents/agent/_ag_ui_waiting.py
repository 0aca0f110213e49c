"""What a thread's paused run waits for, kept with the thread (docs/chat.md, "Approvals and
questionnaires").

The route drives the agent with ``approvals="defer"``: a call that needs a person ends the run
as *interrupted*, its :class:`~sagents.agent.RunState` kept in the agent's store. The thread
keeps a :class:`Waiting` beside its conversation (``threads.sqlite3``): the paused run's
``state_id``, and per item the id the client answers (``approval_…`` / ``questionnaire_…``),
the tool call it stands for, the request the client was shown, when it expires, and the
decision once given. A later ``RunAgentInput`` of the thread, in this process or another one
on the same data directory, decides the items; once every item is decided the state is loaded
and resumed (``SAgent.load_state``; the store's claim makes two racing resumes run once).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ag_ui.core import BaseEvent, CustomEvent

from sagents.agent._ag_ui_events import APPROVAL_RESULT, QUESTIONNAIRE_RESULT
from sagents.agent._ag_ui_threads import (
    AllowDecision,
    AnswersDecision,
    DecisionError,
    approval_details,
)
from sagents.agent._durable import approval_request
from sagents.agent._events import AgentEvent, QuestionnaireRequestEvent
from sagents.agent._loop import SAgent
from sagents.agent._run import approval_message
from sagents.agent._state import Interruption, Resolution, RunState
from sagents.core.events import ApprovalRequestEvent
from sagents.errors import RunStateError
from sagents.tool.impl._questionnaire import QuestionnaireSettings
from sagents.tool.questions import Questionnaire, QuestionnaireAnswer, check_answers

__all__ = [
    "EXPIRED_APPROVAL",
    "EXPIRED_QUESTIONNAIRE",
    "Waiting",
    "WaitingItem",
    "decided_state",
    "held_request",
    "questionnaire_time_limit",
]

EXPIRED_APPROVAL: Final = "expired unanswered (denied)"
EXPIRED_QUESTIONNAIRE: Final = "expired unanswered (timed out)"
MAX_ENDED: Final = 200
"""Items whose end a thread remembers (to say why a late answer is refused)."""


def held_request(event: AgentEvent, calls: set[str]) -> bool:
    """Whether ``event`` is the request of a call the deferring run held: its
    ``request_id`` is the call's id (an approval asked inside a running tool has its own)."""
    if isinstance(event, ApprovalRequestEvent | QuestionnaireRequestEvent):
        return event.request_id in calls
    return False


def questionnaire_time_limit(arguments: Mapping[str, Any]) -> float:
    """Seconds a ``questionnaire`` call gives the user, as the tool reads its arguments."""
    settings = QuestionnaireSettings()
    try:
        asked = float(arguments.get("timeout_seconds") or settings.timeout_seconds)
    except (TypeError, ValueError):
        asked = settings.timeout_seconds
    return min(max(asked, 0.0), settings.max_timeout_seconds)


@dataclass(kw_only=True)
class WaitingItem:
    """One held call the client is asked about.

    Attributes:
        id: The id the client answers (``approval_…`` or ``questionnaire_…``).
        call_id: The tool call's id (the :class:`~sagents.agent.Interruption`'s).
        kind: ``approval`` or ``questionnaire``.
        request: The value of the request's ``CUSTOM`` event, whole.
        expires_at: Seconds since the epoch when it is no longer answered.
        decision: The decision given (``AllowDecision`` / ``AnswersDecision`` as JSON), or
            ``{"expired": true}``.
    """

    id: str
    call_id: str
    kind: str
    request: dict[str, Any]
    expires_at: float
    decision: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "call_id": self.call_id,
            "kind": self.kind,
            "request": self.request,
            "expires_at": self.expires_at,
            "decision": self.decision,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WaitingItem:
        return cls(
            id=str(data["id"]),
            call_id=str(data["call_id"]),
            kind=str(data["kind"]),
            request=dict(data["request"]),
            expires_at=float(data["expires_at"]),
            decision=None if data.get("decision") is None else dict(data["decision"]),
        )


@dataclass(kw_only=True)
class Waiting:
    """A thread's paused run: its ``state_id`` and the items it waits for."""

    state_id: str
    items: list[WaitingItem] = field(default_factory=list)

    @classmethod
    def paused(
        cls, state: RunState, *, messages: Mapping[str, str], approval_ttl_s: float
    ) -> Waiting:
        """The items of a run that just paused, with fresh client ids.

        Args:
            state: The paused run.
            messages: Per tool call id, the text of its request event (the approval's
                message), when the run sent one.
            approval_ttl_s: Seconds an approval waits.
        """
        now = time.time()
        items = []
        for item in state.interruptions:
            if item.kind == "questionnaire":
                limit = questionnaire_time_limit(item.arguments)
                client_id = f"questionnaire_{uuid.uuid4().hex[:12]}"
                request = {
                    "id": client_id,
                    "questionnaire": item.questionnaire().model_dump(mode="json"),
                    "time_limit": limit,
                }
                expires = now + limit
            else:
                client_id = f"approval_{uuid.uuid4().hex[:12]}"
                asked = approval_request(item, state.session_id)
                request = {
                    "id": client_id,
                    "tool_call_id": item.id,
                    "tools": list(asked.tools),
                    "message": messages.get(item.id) or approval_message(asked),
                    **approval_details(asked),
                }
                expires = now + approval_ttl_s
            items.append(
                WaitingItem(
                    id=client_id,
                    call_id=item.id,
                    kind=item.kind,
                    request=request,
                    expires_at=expires,
                )
            )
        return cls(state_id=state.state_id, items=items)

    def to_json(self) -> dict[str, Any]:
        return {"state_id": self.state_id, "items": [item.to_json() for item in self.items]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Waiting:
        return cls(
            state_id=str(data["state_id"]),
            items=[WaitingItem.from_json(item) for item in data["items"]],
        )

    # -- what waits -----------------------------------------------------------------------------

    @property
    def undecided(self) -> list[WaitingItem]:
        return [item for item in self.items if item.decision is None]

    @property
    def ids(self) -> list[str]:
        """The ids the client still answers."""
        return [item.id for item in self.undecided]

    def requests(self) -> list[dict[str, Any]]:
        """The requests still waiting, as their ``CUSTOM`` events' values."""
        return [item.request for item in self.undecided]

    @property
    def decided(self) -> bool:
        return not self.undecided

    def next_expiry(self) -> float | None:
        """When the next undecided item expires (seconds since the epoch)."""
        return min((item.expires_at for item in self.undecided), default=None)

    def expire(self, now: float) -> dict[str, str]:
        """Decide every undecided item whose time passed as expired; per id, why it ended."""
        ended: dict[str, str] = {}
        for item in self.undecided:
            if item.expires_at <= now:
                item.decision = {"expired": True}
                approval = item.kind == "approval"
                ended[item.id] = EXPIRED_APPROVAL if approval else EXPIRED_QUESTIONNAIRE
        return ended

    # -- deciding -------------------------------------------------------------------------------

    def check(self, decisions: Mapping[str, AllowDecision | AnswersDecision]) -> None:
        """Refuse decisions that cannot all be applied, before any is.

        Raises:
            DecisionError: an id that waits for nothing here, or an answer of the wrong kind
                or that does not fit.
        """
        waiting = {item.id: item for item in self.undecided}
        for item_id, decision in decisions.items():
            item = waiting.get(item_id)
            if item is None:
                raise DecisionError(
                    f"{item_id!r} does not wait for a decision (waiting: "
                    f"{', '.join(waiting) or 'nothing'})"
                )
            if item.kind == "approval":
                if not isinstance(decision, AllowDecision):
                    raise DecisionError(f"{item_id!r} is an approval: answer it with 'decision'")
                offered = item.request.get("offered") or []
                if decision.decision not in offered:
                    raise DecisionError(
                        f"{item_id!r} offers only {', '.join(offered)}, not {decision.decision!r}"
                    )
            elif isinstance(decision, AnswersDecision):
                questionnaire = Questionnaire.model_validate(item.request["questionnaire"])
                try:
                    check_answers(questionnaire, decision.answers)
                except ValueError as error:
                    raise DecisionError(f"{item_id!r}: {error}") from None

    def decide(self, decisions: Mapping[str, AllowDecision | AnswersDecision]) -> None:
        """Record checked decisions."""
        by_id = {item.id: item for item in self.items}
        for item_id, decision in decisions.items():
            by_id[item_id].decision = decision.model_dump(mode="json", exclude_none=True)

    def result_events(self, ids: list[str]) -> list[BaseEvent]:
        """The ``CUSTOM`` result events of the decided items ``ids``."""
        out: list[BaseEvent] = []
        for item in self.items:
            if item.id not in ids or item.decision is None:
                continue
            decision = item.decision
            if item.kind == "approval":
                answer = "deny" if decision.get("expired") else str(decision.get("decision"))
                reason = "timed out" if decision.get("expired") else answer
                value = {"id": item.id, "approved": answer != "deny", "reason": reason}
                out.append(CustomEvent(name=APPROVAL_RESULT, value=value))
            else:
                if decision.get("expired"):
                    status, answers = "timed_out", {}
                elif "answers" in decision:
                    status, answers = "answered", dict(decision["answers"])
                else:
                    status, answers = "declined", {}
                value = {"id": item.id, "status": status, "answers": answers}
                out.append(CustomEvent(name=QUESTIONNAIRE_RESULT, value=value))
        return out

    def apply(self, state: RunState) -> None:
        """Put the decisions on the paused run (every item decided).

        Raises:
            RunStateError: a decision the state refuses.
        """
        items = {item.id: item for item in state.interruptions}
        for waiting in self.items:
            item = items.get(waiting.call_id)
            decision = waiting.decision
            if item is None or decision is None:
                continue
            _apply(state, item, decision)

    def cancel(self) -> list[str]:
        """Cancel every item (also one decided while others waited: nothing of the paused
        answer runs); the ids that were still waiting."""
        ids = self.ids
        for item in self.items:
            item.decision = {"cancelled": True}
        return ids


async def decided_state(agent: SAgent, waiting: Waiting) -> RunState:
    """The paused run of ``waiting`` from the agent's store, with the decisions on it.

    Raises:
        RunStateError: the store has no such run (``claimed``: resumed and gone), or refuses
            it.
        StoreError: the store failed.
    """
    state = await agent.load_state(waiting.state_id)
    if state is None:
        raise RunStateError(
            "the paused run of this thread is no longer in the agent's store",
            hint="send a new message to start again",
            details={"reason": "claimed"},
        )
    waiting.apply(state)
    return state


def _apply(state: RunState, item: Interruption, decision: Mapping[str, Any]) -> None:
    if decision.get("cancelled"):
        state.decisions[item.id] = Resolution(cancelled=True, reason="cancelled by the user")
    elif item.kind == "approval":
        answer = decision.get("decision")
        if decision.get("expired") or answer == "deny":
            reason = "no answer came in time" if decision.get("expired") else ""
            state.deny(item.id, reason=str(decision.get("reason") or reason))
        else:
            state.approve(item.id, scope="session" if answer == "allow_session" else "once")
    elif decision.get("expired"):
        state.decisions[item.id] = Resolution(questionnaire=QuestionnaireAnswer(status="timed_out"))
    elif "answers" in decision:
        state.answer(item.id, decision["answers"])
    else:
        state.decline(item.id)
