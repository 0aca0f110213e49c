"""``questionnaire``: ask the user structured questions through the session's channel
(docs/builtin_tools.md).

The arguments are validated as a :class:`~sagents.tool.questions.Questionnaire`; the call asks
the questioner its session context carries (``SessionContext.questioner``: the agent loop's
event, ``sagents serve``'s MCP elicitation, ``sagents chat``'s terminal form) and
returns the answers, or ``declined``, ``cancelled`` or ``timed_out`` (normal results the model
reads, not errors). A host with no way to ask refuses the call, saying so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import anyio
from pydantic import ValidationError

from sagents.core._result import TextContent, ToolResult
from sagents.errors import InvalidArgumentsError, NotAllowedError, ToolExecutionError
from sagents.tool._handler import ToolCall
from sagents.tool.questions import (
    Questionnaire,
    QuestionnaireAnswer,
    check_answers,
    current_questioner,
)

__all__ = ["QuestionnaireSettings", "ask_questionnaire", "parse_questionnaire"]

_GRACE_S: Final = 2.0  # seconds a questioner gets past its timeout before the call stops it


@dataclass(frozen=True, kw_only=True)
class QuestionnaireSettings:
    """Timeouts of ``questionnaire``.

    Attributes:
        timeout_seconds: How long the user has when the call does not say.
        max_timeout_seconds: The longest a call may ask for.
    """

    timeout_seconds: float = 240.0
    max_timeout_seconds: float = 3600.0

    def __post_init__(self) -> None:
        if not 0 < self.timeout_seconds <= self.max_timeout_seconds:
            raise ValueError("questionnaire timeouts must be positive, default <= maximum")


def parse_questionnaire(arguments: dict[str, Any]) -> Questionnaire:
    """The questionnaire of a call's arguments.

    Raises:
        InvalidArgumentsError: naming the first problem and where it is.
    """
    try:
        return Questionnaire.model_validate(
            {"title": arguments.get("title", ""), "questions": arguments.get("questions", [])}
        )
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "questions"
        raise InvalidArgumentsError(
            f"invalid questionnaire at {where!r}: {first['msg']}",
            hint="each question needs id, kind and prompt; choice questions need two options",
        ) from None


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _text(questionnaire: Questionnaire, answer: QuestionnaireAnswer, timeout: float) -> str:
    if answer.status == "answered":
        lines = ["The user answered:"]
        for question in questionnaire.questions:
            value = answer.answers.get(question.id)
            shown = "(no answer)" if value is None else _shown(value)
            lines.append(f"- {question.id} ({question.prompt}): {shown}")
        return "\n".join(lines)
    if answer.status == "declined":
        head = "The user declined to answer the questionnaire."
    elif answer.status == "cancelled":
        head = "The questionnaire was cancelled before the user answered."
    else:
        head = f"Nobody answered the questionnaire within {timeout:g} s."
    tail = f" ({answer.message})" if answer.message else ""
    return head + tail + " Do not ask again unless the user asks you to; go on without it."


async def ask_questionnaire(
    arguments: dict[str, Any], call: ToolCall, settings: QuestionnaireSettings
) -> ToolResult:
    """The ``questionnaire`` tool.

    Raises:
        InvalidArgumentsError: the questionnaire is invalid.
        NotAllowedError: this host has no way to ask the user.
        ToolExecutionError: the answers the channel returned do not fit the questions.
    """
    questionnaire = parse_questionnaire(arguments)
    questioner = call.session_context.questioner or current_questioner()
    if questioner is None:
        raise NotAllowedError(
            "questionnaire cannot reach the user here: this host binds no way to ask questions",
            hint="ask the user in your answer instead, or state the assumptions you make",
        )
    timeout = min(
        float(arguments.get("timeout_seconds") or settings.timeout_seconds),
        settings.max_timeout_seconds,
    )
    if call.timeout is not None:  # answer before the call's own timeout ends it
        timeout = max(1.0, min(timeout, call.timeout * 0.9 - _GRACE_S))
    answer = QuestionnaireAnswer(status="timed_out")
    with anyio.move_on_after(timeout + _GRACE_S):
        answer = await questioner.ask(questionnaire, time_limit=timeout)
    answers: dict[str, Any] = {}
    if answer.status == "answered":
        try:
            answers = check_answers(questionnaire, answer.answers)
        except ValueError as error:
            raise ToolExecutionError(
                f"the answers do not fit the questionnaire: {error}",
                hint="ask again with clearer questions, or go on without the answers",
            ) from error
        answer = QuestionnaireAnswer(status="answered", answers=answers, message=answer.message)
    return ToolResult(
        content=(TextContent(text=_text(questionnaire, answer, timeout)),),
        structured={"status": answer.status, "answers": answers, "message": answer.message},
    )
