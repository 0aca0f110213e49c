"""The terminal form of ``sagents chat``: the ``questionnaire`` tool's questions, one at a time
(docs/agent.md, "sagents chat").

Questions are shown on stderr (so that ``--json`` stdout stays NDJSON) and answers read from
stdin, a terminal or a pipe: a choice by its number or its text, several choices separated by
commas, an empty line for the default (or to skip an optional question). An answer that does
not fit is asked again, saying why. ``/decline`` declines the whole questionnaire, ``/cancel``
cancels it; the end of input cancels it; no answer within the time limit is ``timed_out``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio

from sagents.cli._chat_session import literal
from sagents.cli._rich import stderr_console
from sagents.core._literal import quoted_line
from sagents.gateway._questions import QUESTION_FRAME
from sagents.tool.questions import Question, Questionnaire, QuestionnaireAnswer, check_answer

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["TerminalQuestioner"]

_TRIES: Final = 5  # times one question is asked again before the form is cancelled


def _read_stdin() -> str:
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line


class _Ended(Exception):
    def __init__(self, answer: QuestionnaireAnswer) -> None:
        self.answer = answer


@dataclass(kw_only=True)
class TerminalQuestioner:
    """Asks a questionnaire on the terminal.

    Attributes:
        console: Where the questions go (stderr).
        read: Reads one line (stdin by default; EOFError at its end).
    """

    console: Console = field(default_factory=stderr_console)
    read: Callable[[], str] = _read_stdin
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def ask(self, questionnaire: Questionnaire, *, time_limit: float) -> QuestionnaireAnswer:
        """Ask every question in order; the answers, or how the form ended."""
        async with self._lock:
            answers: dict[str, Any] = {}
            with anyio.move_on_after(time_limit):
                try:
                    # who asks, and the model's title on one quoted line (as in the gateway)
                    title = quoted_line(questionnaire.title) if questionnaire.title else "-"
                    self.console.print(
                        literal(f"{QUESTION_FRAME}{title} (/decline or /cancel to stop)"),
                        style="bold",
                    )
                    for number, question in enumerate(questionnaire.questions, 1):
                        answers[question.id] = await self._one(number, question)
                except _Ended as ended:
                    return ended.answer
                return QuestionnaireAnswer(status="answered", answers=answers)
            self.console.print(f"(no answer within {time_limit:g} s)", style="yellow")
            return QuestionnaireAnswer(status="timed_out")

    async def _one(self, number: int, question: Question) -> Any:
        self._show(number, question)
        for _try in range(_TRIES):
            try:
                line = await anyio.to_thread.run_sync(self.read, abandon_on_cancel=True)
            except EOFError:
                ended = QuestionnaireAnswer(status="cancelled", message="end of input")
                raise _Ended(ended) from None
            text = line.strip()
            if text == "/decline":
                raise _Ended(QuestionnaireAnswer(status="declined"))
            if text == "/cancel":
                raise _Ended(QuestionnaireAnswer(status="cancelled"))
            if not text:
                if question.default is not None:
                    return check_answer(question, question.default)
                if not question.required:
                    return None
                self.console.print("  an answer is needed", style="red")
                continue
            try:
                return check_answer(question, self._parse(question, text))
            except ValueError as error:
                self.console.print(literal(f"  {error}; try again"), style="red")
        raise _Ended(QuestionnaireAnswer(status="cancelled", message="no valid answer"))

    def _show(self, number: int, question: Question) -> None:
        head = f"{number}. {question.prompt}"
        if question.kind == "multiple_choice":
            head += " (numbers separated by commas)"
        elif question.kind == "number":
            bounds = [f">= {question.minimum:g}"] if question.minimum is not None else []
            bounds += [f"<= {question.maximum:g}"] if question.maximum is not None else []
            kind = "a whole number" if question.integer else "a number"
            head += f" ({', '.join([kind, *bounds])})"
        if question.default is not None:
            head += f" [default: {question.default}]"
        elif not question.required:
            head += " [optional]"
        self.console.print(literal(head), overflow="fold")
        for index, option in enumerate(question.options, 1):
            self.console.print(literal(f"   {index}) {option}"), overflow="fold")

    @staticmethod
    def _parse(question: Question, text: str) -> Any:
        def option(word: str) -> str:
            word = word.strip()
            if word.isdigit() and 1 <= int(word) <= len(question.options):
                return question.options[int(word) - 1]
            return word

        if question.kind == "single_choice":
            return option(text)
        if question.kind == "multiple_choice":
            return [option(part) for part in text.split(",") if part.strip()]
        return text
