"""``questionnaire`` through ``sagents serve``: the questions become one MCP elicitation in form
mode (MCP spec 2025-11-25, "Elicitation": a flat object of primitive fields, single- and
multi-select enums).

Each question is one field: a choice is a string ``enum``, several choices an ``array`` of
them, free text a string, a number a ``number`` (``integer`` when it must be whole), with the
question's default and range. The message always starts with :data:`QUESTION_FRAME` (who
asks, and that it is not an approval) and shows the model's title after it on one quoted line,
so that a title cannot pass for the gateway's own approval wording. ``accept`` gives the
answers (checked against the questions), ``decline`` and ``cancel`` say so, no answer within
the time limit is ``timed_out``. A client that did not declare the elicitation capability (or
a 2026-07-28 connection, which cannot carry a request in the middle of a call) cannot be
asked: the call is refused, saying why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as mt
from mcp.shared.exceptions import NoBackChannelError

from sagents.core._literal import printable, quoted_line
from sagents.errors import NotAllowedError
from sagents.tool.questions import Question, Questionnaire, QuestionnaireAnswer

if TYPE_CHECKING:  # _approval finds the asker of the running call through this questioner
    from sagents.gateway._approval import ClientAsker

__all__ = ["QUESTION_FRAME", "ElicitationQuestioner", "questionnaire_form"]

QUESTION_FRAME = "Question from the model (not an approval; your answers only go back to it): "
"""How every questionnaire's message starts: who asks, and that answering approves nothing. The
model's title follows on the same line, quoted (docs/gateway.md, "Questions")."""

_TEXT_MAX_CHARS = 10_000  # longest free-text answer a form accepts

_CANNOT_ASK = (
    "questionnaire cannot reach the user: this MCP client cannot show forms (it did not declare "
    "the elicitation capability, or its connection cannot carry a request during a call)"
)


def _field(question: Question) -> dict[str, Any]:
    title = printable(question.prompt, newlines=False)  # one line: it draws no structure
    field: dict[str, Any]
    if question.kind == "single_choice":
        field = {"type": "string", "title": title, "enum": list(question.options)}
    elif question.kind == "multiple_choice":
        field = {
            "type": "array",
            "title": title,
            "items": {"type": "string", "enum": list(question.options)},
        }
    elif question.kind == "text":
        field = {"type": "string", "title": title, "maxLength": _TEXT_MAX_CHARS}
    else:
        field = {"type": "integer" if question.integer else "number", "title": title}
        if question.minimum is not None:
            field["minimum"] = question.minimum
        if question.maximum is not None:
            field["maximum"] = question.maximum
    if question.default is not None:
        field["default"] = question.default
    return field


def questionnaire_form(questionnaire: Questionnaire) -> tuple[str, mt.ElicitRequestedSchema]:
    """``(message, requestedSchema)`` of the elicitation that asks ``questionnaire``."""
    schema: mt.ElicitRequestedSchema = {
        "type": "object",
        "properties": {q.id: _field(q) for q in questionnaire.questions},
        "required": [q.id for q in questionnaire.questions if q.required and q.default is None],
    }
    message = QUESTION_FRAME + (
        quoted_line(questionnaire.title) if questionnaire.title else "a few questions for you."
    )
    return message, schema


class ElicitationQuestioner:
    """Asks the client of the gateway call being served (a form elicitation).

    Args:
        asker: The call's :class:`~sagents.gateway._approval.ClientAsker`.
    """

    def __init__(self, asker: ClientAsker) -> None:
        self._asker = asker

    @property
    def asker(self) -> ClientAsker:
        """The call's asker: what approves the call's script and answers its upstream tasks'
        questions asks the same client (:func:`~sagents.gateway._approval.current_client_asker`)."""
        return self._asker

    async def ask(self, questionnaire: Questionnaire, *, time_limit: float) -> QuestionnaireAnswer:
        """Send the form; map ``accept``/``decline``/``cancel``; no answer in time is
        ``timed_out``.

        Raises:
            NotAllowedError: the client cannot be asked.
        """
        if not self._asker.can_ask:
            raise NotAllowedError(_CANNOT_ASK, hint="ask the user in your answer instead")
        message, schema = questionnaire_form(questionnaire)
        result: mt.ElicitResult | None = None
        with anyio.move_on_after(time_limit):
            try:
                result = await self._asker.choose(message, schema)
            except NoBackChannelError:
                raise NotAllowedError(
                    _CANNOT_ASK, hint="ask the user in your answer instead"
                ) from None
        if result is None:
            return QuestionnaireAnswer(status="timed_out")
        if result.action == "accept":
            return QuestionnaireAnswer(status="answered", answers=dict(result.content or {}))
        if result.action == "decline":
            return QuestionnaireAnswer(status="declined")
        return QuestionnaireAnswer(status="cancelled")
