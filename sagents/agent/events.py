"""The events of ``SAgent.run_stream``: typed frozen values with ``.type`` and ``.to_dict()``.

==============================  ====================  ============================================
class                           ``type``              what
==============================  ====================  ============================================
:class:`MessageDeltaEvent`      ``message.delta``     assistant text as it streams
:class:`MessageEvent`           ``message``           a complete message appended to the history
:class:`UsageEvent`             ``usage``             the tokens of one model call
:class:`WorkflowSelectedEvent`  ``workflow.selected`` the workflow or skill chosen for a request
:class:`DoneEvent`              ``done``              the last event of every run
``ToolProgressEvent``           ``tool_progress``     a tool's live output (``sagents.core.events``)
``ScriptProgressEvent``         ``script.progress``   a run_script snapshot
``ApprovalRequestEvent``        ``approval.request``  a call waits for the user
``ApprovalResultEvent``         ``approval.result``   the user's answer
``BackgroundDoneEvent``         ``background.done``   a background run_script finished
==============================  ====================  ============================================

Every ``to_dict()`` is a JSON object (one NDJSON line each). See ``docs/agent.md``, "Events".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from sagents.core.events import (
    ApprovalRequestEvent,
    ApprovalResultEvent,
    BackgroundDoneEvent,
    ScriptProgressEvent,
    ToolProgressEvent,
)

__all__ = [
    "AgentEvent",
    "DoneEvent",
    "DoneReason",
    "MessageDeltaEvent",
    "MessageEvent",
    "UsageEvent",
    "WorkflowSelectedEvent",
]

DoneReason: TypeAlias = Literal["stop", "max_turns", "cancelled", "error"]
"""Why a run ended: the model answered without tool calls; ``max_turns`` was reached; it was
cancelled; an error (the model endpoint failed, or the model's stream broke)."""


@dataclass(frozen=True, kw_only=True)
class MessageDeltaEvent:
    """A piece of the assistant's text, as it streams (never a tool call's arguments)."""

    type: Literal["message.delta"] = "message.delta"
    delta: str

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "message.delta", "delta": ...}``."""
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
    """The tokens of one model call (``turn`` counts from 1)."""

    type: Literal["usage"] = "usage"
    turn: int
    prompt_tokens: int
    completion_tokens: int

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "usage", "turn", "prompt_tokens", "completion_tokens"}``."""
        return {
            "type": self.type,
            "turn": self.turn,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
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
            ``error``.
        turns: The model calls made.
    """

    type: Literal["done"] = "done"
    reason: DoneReason
    messages: tuple[Mapping[str, Any], ...] = ()
    audit_status: Mapping[str, Any] = field(default_factory=dict)
    error: Mapping[str, Any] | None = None
    turns: int = 0

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "done", "reason", "messages", "audit_status", "error", "turns"}``."""
        return {
            "type": self.type,
            "reason": self.reason,
            "messages": [dict(m) for m in self.messages],
            "audit_status": dict(self.audit_status),
            "error": None if self.error is None else dict(self.error),
            "turns": self.turns,
        }


AgentEvent: TypeAlias = (
    MessageDeltaEvent
    | MessageEvent
    | UsageEvent
    | WorkflowSelectedEvent
    | DoneEvent
    | ToolProgressEvent
    | ScriptProgressEvent
    | ApprovalRequestEvent
    | ApprovalResultEvent
    | BackgroundDoneEvent
)
"""Any event of ``run_stream``."""
