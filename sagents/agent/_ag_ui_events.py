"""The agent loop's events as AG-UI events (docs/chat.md, "The AG-UI events").

Built on the official ``ag-ui-protocol`` package's types: streamed text is
``TEXT_MESSAGE_START``/``CONTENT``/``END``, streamed reasoning ``REASONING_*``, a complete
assistant message's calls ``TOOL_CALL_START``/``ARGS``/``END`` and each result
``TOOL_CALL_RESULT``. What AG-UI has no type for is a ``CUSTOM`` event: ``tool_progress`` and
``script.progress`` with the NDJSON object of docs/progress.md as their value, and the requests
and results of approvals and questionnaires under the names of :data:`CUSTOM_NAMES`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    SystemMessage,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import (
    ToolCall as AgUiToolCall,
)

from sagents.agent._events import (
    AgentEvent,
    MessageDeltaEvent,
    MessageEvent,
    QuestionnaireRequestEvent,
    QuestionnaireResultEvent,
    ReasoningDeltaEvent,
)
from sagents.core.events import (
    ApprovalRequestEvent,
    ApprovalResultEvent,
    BackgroundDoneEvent,
    ScriptProgressEvent,
    ToolProgressEvent,
)

__all__ = [
    "APPROVAL_REQUEST",
    "APPROVAL_RESULT",
    "BACKGROUND_DONE",
    "CUSTOM_NAMES",
    "QUESTIONNAIRE_REQUEST",
    "QUESTIONNAIRE_RESULT",
    "SCRIPT_PROGRESS",
    "TOOL_PROGRESS",
    "EventTranslator",
    "ag_ui_messages",
    "new_message_id",
    "new_user_message",
]

TOOL_PROGRESS: Final = "tool_progress"
"""A tool's live output; the value is the ``tool_progress`` object of docs/progress.md."""
SCRIPT_PROGRESS: Final = "script.progress"
"""A run_script snapshot; the value is the ``script.progress`` object of docs/progress.md."""
APPROVAL_REQUEST: Final = "sagents.approval.request"
"""A call waits for the user's decision: ``{"id", "tool_call_id", "tools", "message", ...}``."""
APPROVAL_RESULT: Final = "sagents.approval.result"
"""How an approval ended: ``{"id", "approved", "reason"}``."""
QUESTIONNAIRE_REQUEST: Final = "sagents.questionnaire.request"
"""The ``questionnaire`` tool waits for answers: ``{"id", "questionnaire", "time_limit"}``."""
QUESTIONNAIRE_RESULT: Final = "sagents.questionnaire.result"
"""How a questionnaire ended: ``{"id", "status", "answers"}``."""
BACKGROUND_DONE: Final = "background.done"
"""A background call ended; the value is the ``background.done`` object."""
CUSTOM_NAMES: Final = (
    TOOL_PROGRESS,
    SCRIPT_PROGRESS,
    APPROVAL_REQUEST,
    APPROVAL_RESULT,
    QUESTIONNAIRE_REQUEST,
    QUESTIONNAIRE_RESULT,
    BACKGROUND_DONE,
)


def new_message_id() -> str:
    """A fresh AG-UI message id."""
    return f"msg_{uuid.uuid4().hex[:16]}"


@dataclass(kw_only=True)
class EventTranslator:
    """Turns one run's agent events into AG-UI events, keeping what is open.

    Attributes:
        message_ids: The AG-UI id of each message the run appended, in order (an assistant
            message's is the id its text streamed under; a tool result's the result's).
        approval_details: Per approval request id, what the approver knew beyond the event
            (the answers offered, the arguments or the script); filled by the caller.
    """

    message_ids: list[str] = field(default_factory=list)
    approval_details: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    _text_id: str | None = None
    _reasoning_id: str | None = None
    _assistant_id: str | None = None

    def translate(self, event: AgentEvent) -> list[BaseEvent]:
        """The AG-UI events of one agent event (none for those AG-UI does not carry: usage,
        compression, the final ``done``, which the route turns into the run's end)."""
        if isinstance(event, MessageDeltaEvent):
            return [*self._close_reasoning(), *self._text(event.delta)]
        if isinstance(event, ReasoningDeltaEvent):
            return [*self._close_text(), *self._reasoning(event.delta)]
        out: list[BaseEvent] = [*self.close()]
        if isinstance(event, MessageEvent):
            out.extend(self._message(event.message))
        elif isinstance(event, ToolProgressEvent | ScriptProgressEvent | BackgroundDoneEvent):
            out.append(CustomEvent(name=event.type, value=event.to_dict()))
        elif isinstance(event, ApprovalRequestEvent):
            value = {
                "id": event.request_id,
                "tool_call_id": event.tool_call_id,
                "tools": list(event.tools),
                "message": event.message,
                **self.approval_details.get(event.request_id, {}),
            }
            out.append(CustomEvent(name=APPROVAL_REQUEST, value=value))
        elif isinstance(event, ApprovalResultEvent):
            value = {"id": event.request_id, "approved": event.approved, "reason": event.reason}
            out.append(CustomEvent(name=APPROVAL_RESULT, value=value))
        elif isinstance(event, QuestionnaireRequestEvent):
            value = {
                "id": event.request_id,
                "questionnaire": event.questionnaire.model_dump(mode="json"),
                "time_limit": event.time_limit,
            }
            out.append(CustomEvent(name=QUESTIONNAIRE_REQUEST, value=value))
        elif isinstance(event, QuestionnaireResultEvent):
            value = {"id": event.request_id, "status": event.status, "answers": dict(event.answers)}
            out.append(CustomEvent(name=QUESTIONNAIRE_RESULT, value=value))
        return out

    def close(self) -> list[BaseEvent]:
        """End what streams (text, reasoning): before anything else, and at the run's end."""
        return [*self._close_text(), *self._close_reasoning()]

    def _text(self, delta: str) -> list[BaseEvent]:
        if not delta:
            return []  # AG-UI refuses an empty content event
        out: list[BaseEvent] = []
        if self._text_id is None:
            self._text_id = self._assistant_id or new_message_id()
            self._assistant_id = self._text_id
            out.append(TextMessageStartEvent(message_id=self._text_id, role="assistant"))
        out.append(TextMessageContentEvent(message_id=self._text_id, delta=delta))
        return out

    def _close_text(self) -> list[BaseEvent]:
        if self._text_id is None:
            return []
        ended = TextMessageEndEvent(message_id=self._text_id)
        self._text_id = None
        return [ended]

    def _reasoning(self, delta: str) -> list[BaseEvent]:
        if not delta:
            return []
        out: list[BaseEvent] = []
        if self._reasoning_id is None:
            self._reasoning_id = new_message_id()
            out.append(ReasoningStartEvent(message_id=self._reasoning_id))
            out.append(ReasoningMessageStartEvent(message_id=self._reasoning_id, role="reasoning"))
        out.append(ReasoningMessageContentEvent(message_id=self._reasoning_id, delta=delta))
        return out

    def _close_reasoning(self) -> list[BaseEvent]:
        if self._reasoning_id is None:
            return []
        message_id, self._reasoning_id = self._reasoning_id, None
        return [
            ReasoningMessageEndEvent(message_id=message_id),
            ReasoningEndEvent(message_id=message_id),
        ]

    def _message(self, message: Mapping[str, Any]) -> list[BaseEvent]:
        role = message.get("role")
        if role == "assistant":
            message_id = self._assistant_id or new_message_id()
            self._assistant_id = None  # the next answer is a new message
            self.message_ids.append(message_id)
            out: list[BaseEvent] = []
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                call_id = str(call.get("id"))
                out.append(
                    ToolCallStartEvent(
                        tool_call_id=call_id,
                        tool_call_name=str(function.get("name")),
                        parent_message_id=message_id,
                    )
                )
                arguments = str(function.get("arguments") or "")
                if arguments:
                    out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=arguments))
                out.append(ToolCallEndEvent(tool_call_id=call_id))
            return out
        if role == "tool":
            message_id = new_message_id()
            self.message_ids.append(message_id)
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content, default=str)
            return [
                ToolCallResultEvent(
                    message_id=message_id,
                    tool_call_id=str(message.get("tool_call_id")),
                    content=text,
                    role="tool",
                )
            ]
        self.message_ids.append(new_message_id())
        return []


def new_user_message(given: RunAgentInput, seen: Sequence[str]) -> UserMessage | None:
    """The input's new user message: its last message, when that is a user message the
    thread has not seen (its message ids ``seen``; a client re-sends its whole history, only
    this part is taken)."""
    if not given.messages:
        return None
    last = given.messages[-1]
    if not isinstance(last, UserMessage) or last.id in seen:
        return None
    return last


def ag_ui_messages(ids: Sequence[str], messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    """A thread's history (Chat Completions messages, with their AG-UI ids) as AG-UI
    messages."""
    out: list[Any] = []
    for message_id, message in zip(ids, messages, strict=False):
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        if role == "user":
            out.append(UserMessage(id=message_id, content=text))
        elif role == "assistant":
            calls = [
                AgUiToolCall(
                    id=str(call.get("id")),
                    function=FunctionCall(
                        name=str((call.get("function") or {}).get("name")),
                        arguments=str((call.get("function") or {}).get("arguments") or "{}"),
                    ),
                )
                for call in message.get("tool_calls") or []
            ]
            out.append(AssistantMessage(id=message_id, content=text, tool_calls=calls or None))
        elif role == "tool":
            out.append(
                ToolMessage(
                    id=message_id, content=text, tool_call_id=str(message.get("tool_call_id"))
                )
            )
        else:
            out.append(SystemMessage(id=message_id, content=text))
    return out
