"""The events of ``SAgent.run_stream``: typed frozen values with ``.type`` and ``.to_dict()``.

==================================  =========================  =============================
The last five are ``sagents.core.events`` types. Every ``to_dict()`` is a JSON object (one NDJSON
line each). See ``docs/agent.md``, "Events".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic_core import to_jsonable_python

from sagents.agent._messages import Message
from sagents.agent._state import RunState
from sagents.core.events import (
    ApprovalRequestEvent,
    ApprovalResultEvent,
    BackgroundDoneEvent,
    ScriptProgressEvent,
    ToolProgressEvent,
)
from sagents.tool.questions import (
    Questionnaire,
    QuestionnaireAnswer,
    QuestionnaireSlot,
    QuestionnaireStatus,
)

__all__ = [
    "AgentEvent",
    "DoneEvent",
    "DoneReason",
    "HistoryCompressEvent",
    "HistoryCompressedEvent",
    "MessageDeltaEvent",
    "MessageEvent",
    "QuestionnaireRequestEvent",
    "QuestionnaireResultEvent",
    "ReasoningDeltaEvent",
    "UsageEvent",
    "WorkflowSelectedEvent",
    "not_started",
]

DoneReason: TypeAlias = Literal["stop", "max_turns", "cancelled", "error", "interrupted"]
"""Why a run ended: the model answered without tool calls; ``max_turns`` was reached; it was
cancelled; an error (the model endpoint failed, or the model's stream broke); ``interrupted``: a
call waits for a person and the run was deferring (``approvals="defer"``)."""


@dataclass(frozen=True, kw_only=True)
class MessageDeltaEvent:
    """A piece of the assistant's text, as it streams (never a tool call's arguments)."""

    type: Literal["message.delta"] = "message.delta"
    delta: str

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "message.delta", "delta": ...}``."""
        return {"type": self.type, "delta": self.delta}


@dataclass(frozen=True, kw_only=True)
class ReasoningDeltaEvent:
    """A piece of the model's reasoning as it streams (``reasoning_content`` of DeepSeek,
    vLLM, ...); kept in the assistant message's ``reasoning_content``, never in its text."""

    type: Literal["reasoning.delta"] = "reasoning.delta"
    delta: str

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "reasoning.delta", "delta": ...}``."""
        return {"type": self.type, "delta": self.delta}


@dataclass(frozen=True, kw_only=True)
class MessageEvent:
    """A complete OpenAI-format message appended to the history: the assistant's (with its
    ``tool_calls``) or a ``role: tool`` result."""

    type: Literal["message"] = "message"
    message: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "message", "message": {...}}``."""
        return {"type": self.type, "message": dict(self.message)}


@dataclass(frozen=True, kw_only=True)
class UsageEvent:
    """The tokens of one model call (``turn`` counts from 1); ``cached_tokens`` and
    ``reasoning_tokens`` when the provider reported them, else None. ``purpose``: ``turn`` (a
    call of the loop), ``compression``, ``tool_selection`` or ``workflow_selection``."""

    type: Literal["usage"] = "usage"
    turn: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    purpose: str = "turn"

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "usage", "turn", "purpose", "prompt_tokens", "completion_tokens",
        "cached_tokens", "reasoning_tokens"}``."""
        return {
            "type": self.type,
            "turn": self.turn,
            "purpose": self.purpose,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }


@dataclass(frozen=True, kw_only=True)
class WorkflowSelectedEvent:
    """What ``workflow_select`` chose for this request, before its first turn.

    Attributes:
        name: The workflow's or skill's name; None when nothing fitted well enough.
        kind: ``workflow``, ``skill``, or None with ``name``.
        score: How well the best candidate fits (0 to 1, the offline ranking's score, also
            for a choice the model made); None when there was no candidate at all.
    """

    type: Literal["workflow.selected"] = "workflow.selected"
    name: str | None
    kind: Literal["workflow", "skill"] | None
    score: float | None

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "workflow.selected", "name", "kind", "score"}``."""
        return {"type": self.type, "name": self.name, "kind": self.kind, "score": self.score}


@dataclass(frozen=True, kw_only=True)
class DoneEvent:
    """The last event of a run.

    Attributes:
        reason: See :data:`DoneReason`.
        messages: The whole history: the input messages, then every new one (each tool call
            settled by exactly one ``role: tool`` message, whatever the reason).
        audit_status: The session state's ``audit_status`` (``suggested_tools``,
            ``tools_expanded``, ...).
        error: The error (``{"code", "message", "hint", "details"}``) when ``reason`` is
            ``error``. With another reason, the store's error (``store_unavailable`` when it
            is out of reach) when it did not keep what the run left (its session, its paused
            state): the run's result stands, and its session is saved again before its next
            run (docs/agent.md, "Pausing and resuming").
        turns: The model calls made.
        history: The same history as :class:`~sagents.agent.Message` values, the form a
            :class:`~sagents.agent.ChatModel` takes (``messages`` is its OpenAI rendering,
            which has no place for provider-only parts such as reasoning signatures). Not in
            :meth:`to_dict`, which carries ``messages``.
        state: With ``reason="interrupted"`` (``approvals="defer"``), the paused run: decide
            its items and resume it (docs/agent.md, "Pausing and resuming"). ``messages``
            then ends with the answer that waits and the results of its calls that ran. A
            run that paused keeps it also when an error ended it after the pause.
        output: With ``SAgent(output_type=...)`` and ``reason="stop"``, the final answer
            validated into that type; else None. In :meth:`to_dict` as JSON (pydantic's
            ``to_jsonable_python``) when set.
    """

    type: Literal["done"] = "done"
    reason: DoneReason
    messages: tuple[Mapping[str, Any], ...] = ()
    audit_status: Mapping[str, Any] = field(default_factory=dict)
    error: Mapping[str, Any] | None = None
    turns: int = 0
    history: tuple[Message, ...] = ()
    state: RunState | None = None
    output: Any = None

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "done", "reason", "messages", "audit_status", "error", "turns"}``, and
        for an interrupted run ``interruptions`` and ``state_id`` (the state itself stays
        server-side: it holds tool arguments and results)."""
        body: dict[str, Any] = {
            "type": self.type,
            "reason": self.reason,
            "messages": [dict(m) for m in self.messages],
            "audit_status": dict(self.audit_status),
            "error": None if self.error is None else dict(self.error),
            "turns": self.turns,
        }
        if self.output is not None:
            body["output"] = to_jsonable_python(self.output)
        if self.state is not None:
            body["state_id"] = self.state.state_id
            body["interruptions"] = [item.to_json() for item in self.state.interruptions]
        return body


@dataclass(frozen=True, kw_only=True)
class HistoryCompressEvent:
    """Older turns are about to be summarised (sent before the summary is asked for).

    Attributes:
        reason: ``budget`` (the request passed ``max_history_tokens``), ``requested`` (the
            model called ``compress_history``) or ``context_length`` (the model refused the
            request as too long).
        messages: Messages in the history. dropped: those to be summarised. kept: the latest,
            kept as they are.
        tokens_before: Tokens of the request (system prompt and history).
        budget: ``max_history_tokens``, or None.
        ts: Seconds since the epoch.
    """

    type: Literal["history.compress"] = "history.compress"
    reason: str
    messages: int
    dropped: int
    kept: int
    tokens_before: int
    budget: int | None
    ts: float

    def to_dict(self) -> dict[str, Any]:
        """Every field, as JSON."""
        return {
            "type": self.type,
            "reason": self.reason,
            "messages": self.messages,
            "dropped": self.dropped,
            "kept": self.kept,
            "tokens_before": self.tokens_before,
            "budget": self.budget,
            "ts": self.ts,
        }


@dataclass(frozen=True, kw_only=True)
class HistoryCompressedEvent:
    """The end of a compression: the summary replaced the older turns, or (``ok`` false) the
    history is unchanged and ``error`` says why.

    Attributes:
        ok: Whether the history was compressed.
        dropped: Messages replaced by the summary (0 when not ok).
        tokens_before / tokens_after: Tokens of the request before and after.
        record: The file that keeps the dropped messages and the summary.
        error: Why it failed.
        ts: Seconds since the epoch.
    """

    type: Literal["history.compressed"] = "history.compressed"
    ok: bool
    dropped: int
    tokens_before: int
    tokens_after: int
    record: str | None = None
    error: str | None = None
    ts: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Every field, as JSON."""
        return {
            "type": self.type,
            "ok": self.ok,
            "dropped": self.dropped,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "record": self.record,
            "error": self.error,
            "ts": self.ts,
        }


@dataclass(frozen=True, kw_only=True)
class QuestionnaireRequestEvent:
    """The model's ``questionnaire`` waits for the user: the application answers it with
    :meth:`answer`, :meth:`decline` or :meth:`cancel`, from any thread (or through the
    ``questioner`` given to ``run_stream``); with no answer within ``time_limit`` seconds it
    ends ``timed_out``.

    Attributes:
        request_id: Pairs it with its :class:`QuestionnaireResultEvent`.
        questionnaire: The questions (``sagents.tool.questions.Questionnaire``).
        time_limit: Seconds the user has.
        ts: Seconds since the epoch.
    """

    type: Literal["questionnaire.request"] = "questionnaire.request"
    request_id: str
    questionnaire: Questionnaire
    time_limit: float
    ts: float
    slot: QuestionnaireSlot = field(repr=False, compare=False)

    def answer(self, answers: Mapping[str, Any], message: str = "") -> bool:
        """Answer with one value per question id; False when it was already settled.

        Raises:
            ValueError: an answer does not fit its question (the message names it).
        """
        return self.slot.put(
            QuestionnaireAnswer(status="answered", answers=answers, message=message)
        )

    def decline(self, message: str = "") -> bool:
        """The user chose not to answer; False when it was already settled."""
        return self.slot.put(QuestionnaireAnswer(status="declined", message=message))

    def cancel(self, message: str = "") -> bool:
        """Withdraw the questions (the user closed the form); False when already settled."""
        return self.slot.put(QuestionnaireAnswer(status="cancelled", message=message))

    def to_dict(self) -> dict[str, Any]:
        """``{"type", "request_id", "questionnaire", "time_limit", "ts"}``."""
        return {
            "type": self.type,
            "request_id": self.request_id,
            "questionnaire": self.questionnaire.model_dump(mode="json"),
            "time_limit": self.time_limit,
            "ts": self.ts,
        }


@dataclass(frozen=True, kw_only=True)
class QuestionnaireResultEvent:
    """How a questionnaire ended: ``answered`` (with the checked answers), ``declined``,
    ``cancelled`` or ``timed_out``; exactly one per request."""

    type: Literal["questionnaire.result"] = "questionnaire.result"
    request_id: str
    status: QuestionnaireStatus
    answers: Mapping[str, Any] = field(default_factory=dict)
    ts: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """``{"type", "request_id", "status", "answers", "ts"}``."""
        return {
            "type": self.type,
            "request_id": self.request_id,
            "status": self.status,
            "answers": dict(self.answers),
            "ts": self.ts,
        }


AgentEvent: TypeAlias = (
    MessageDeltaEvent
    | ReasoningDeltaEvent
    | MessageEvent
    | UsageEvent
    | WorkflowSelectedEvent
    | DoneEvent
    | ToolProgressEvent
    | ScriptProgressEvent
    | ApprovalRequestEvent
    | ApprovalResultEvent
    | BackgroundDoneEvent
    | HistoryCompressEvent
    | HistoryCompressedEvent
    | QuestionnaireRequestEvent
    | QuestionnaireResultEvent
)
"""Any event of ``run_stream``."""


def not_started(done: DoneEvent | None) -> bool:
    """Whether the run of ``done`` ended before it started because its store failed (the
    session to load, the paused run to claim): nothing ran, nothing was claimed, so a resumed
    run stays resumable with its decisions (docs/agent.md, "Pausing and resuming")."""
    code = str((done.error or {}).get("code") or "") if done is not None else ""
    return done is not None and done.reason == "error" and code.startswith("store_")
