"""Questions for the user: what ``questionnaire`` asks, and who answers (docs/builtin_tools.md).

Like the approval protocol (:mod:`sagents.tool._approval`), one set of types serves every
channel: a :class:`Questionnaire` (pydantic: validated where the model's arguments enter) is
handed to a :class:`Questioner` that the host puts on the call's context
(:attr:`sagents.tool.SessionContext.questioner`): the
agent loop (an event the application answers), ``sagents serve`` (MCP elicitation, form mode),
``sagents chat`` (a terminal form). The questioner returns a :class:`QuestionnaireAnswer`:

- ``answered``, with one value per question (checked by :func:`check_answers`: a choice among
  the options, a number in range, every required question answered, defaults filled in);
- ``declined``: the user chose not to answer;
- ``cancelled``: the request was withdrawn (the user dismissed it, the run was cancelled);
- ``timed_out``: nobody answered in time.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import anyio
import anyio.from_thread
import anyio.lowlevel
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "QUESTION_KINDS",
    "Question",
    "QuestionKind",
    "Questioner",
    "Questionnaire",
    "QuestionnaireAnswer",
    "QuestionnaireSlot",
    "QuestionnaireStatus",
    "bind_questioner",
    "check_answer",
    "check_answers",
    "current_questioner",
]

QuestionKind = Literal["single_choice", "multiple_choice", "text", "number"]
QUESTION_KINDS: tuple[QuestionKind, ...] = ("single_choice", "multiple_choice", "text", "number")

QuestionnaireStatus = Literal["answered", "declined", "cancelled", "timed_out"]
"""How a questionnaire ended."""

_MAX_QUESTIONS = 20
_MAX_OPTIONS = 50
_MAX_TEXT_CHARS = 10_000  # characters of one free-text answer kept


class Question(BaseModel):
    """One question.

    Attributes:
        id: The answer's key (letters, digits, ``_`` and ``-``).
        kind: ``single_choice``, ``multiple_choice``, ``text`` or ``number``.
        prompt: What the user reads.
        options: The choices (choice kinds only; at least two, distinct).
        required: Whether an answer is needed (a default counts as one).
        default: A value of the question's kind (an option, a list of options, text, a number).
        minimum / maximum: The range of a ``number``.
        integer: A ``number`` must be whole.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    kind: QuestionKind
    prompt: str = Field(min_length=1, max_length=2000)
    options: tuple[str, ...] = Field(default=(), max_length=_MAX_OPTIONS)
    required: bool = True
    default: str | float | list[str] | None = None
    minimum: float | None = None
    maximum: float | None = None
    integer: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> Question:
        choice = self.kind in ("single_choice", "multiple_choice")
        if choice and len(self.options) < 2:
            raise ValueError(f"question {self.id!r}: a {self.kind} question needs two options")
        if not choice and self.options:
            raise ValueError(f"question {self.id!r}: options are only for choice questions")
        if len(set(self.options)) != len(self.options):
            raise ValueError(f"question {self.id!r}: the options must be distinct")
        if (self.minimum is not None or self.maximum is not None) and self.kind != "number":
            raise ValueError(f"question {self.id!r}: minimum/maximum are for number questions")
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise ValueError(f"question {self.id!r}: minimum is above maximum")
        if self.default is not None:
            check_answer(self, self.default)  # raises ValueError naming the question
        return self


class Questionnaire(BaseModel):
    """A set of questions, asked at once.

    Attributes:
        title: A short heading.
        questions: One to twenty questions with distinct ids.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str = Field(default="", max_length=200)
    questions: tuple[Question, ...] = Field(min_length=1, max_length=_MAX_QUESTIONS)

    @model_validator(mode="after")
    def _distinct_ids(self) -> Questionnaire:
        ids = [q.id for q in self.questions]
        if len(set(ids)) != len(ids):
            raise ValueError("the questions' ids must be distinct")
        return self


@dataclass(frozen=True, kw_only=True)
class QuestionnaireAnswer:
    """How a questionnaire ended, and the answers when it was answered.

    Attributes:
        status: See :data:`QuestionnaireStatus`.
        answers: Question id to value (``answered`` only): a string (single choice, text), a
            list of strings (multiple choice), a number, or None for an optional question left
            blank.
        message: Why it ended so, for the model (optional).
    """

    status: QuestionnaireStatus
    answers: Mapping[str, Any] = field(default_factory=dict)
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        """``{"status", "answers", "message"}``."""
        return {"status": self.status, "answers": dict(self.answers), "message": self.message}


@runtime_checkable
class Questioner(Protocol):
    """Asks the user a questionnaire: an application's UI, an MCP elicitation, a terminal."""

    async def ask(self, questionnaire: Questionnaire, *, time_limit: float) -> QuestionnaireAnswer:
        """Return the user's answer within ``time_limit`` seconds (``timed_out`` after it).

        Answers are checked by the caller (:func:`check_answers`); a questioner never raises
        for a refusal.
        """
        ...


def check_answer(question: Question, value: Any) -> Any:
    """``value`` (not empty) as an answer to ``question``: an option, the options chosen in
    their order, text, or a number (an ``int`` when whole).

    Raises:
        ValueError: saying what is wrong, naming the question.
    """
    where = f"question {question.id!r}"
    if question.kind == "single_choice":
        if value not in question.options:
            raise ValueError(f"{where}: {value!r} is not one of {list(question.options)}")
        return value
    if question.kind == "multiple_choice":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}: expected a list of options")
        unknown = [v for v in value if v not in question.options]
        if unknown:
            raise ValueError(f"{where}: {unknown!r} are not among {list(question.options)}")
        return [o for o in question.options if o in value]  # option order, no duplicates
    if question.kind == "text":
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected text")
        return value[:_MAX_TEXT_CHARS]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{where}: expected a number")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{where}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{where}: {value!r} is not a finite number")
    if question.integer and not number.is_integer():
        raise ValueError(f"{where}: {value!r} is not a whole number")
    if question.minimum is not None and number < question.minimum:
        raise ValueError(f"{where}: {value!r} is below the minimum {question.minimum:g}")
    if question.maximum is not None and number > question.maximum:
        raise ValueError(f"{where}: {value!r} is above the maximum {question.maximum:g}")
    return int(number) if question.integer or number.is_integer() else number


def check_answers(questionnaire: Questionnaire, answers: Mapping[str, Any]) -> dict[str, Any]:
    """The answers as the questionnaire defines them: one value per question, in order.

    A missing or empty answer takes the question's default; a required question without
    either is an error; an unknown question id is an error.

    Raises:
        ValueError: the first problem, naming the question.
    """
    known = {q.id for q in questionnaire.questions}
    unknown = sorted(set(answers) - known)
    if unknown:
        raise ValueError(f"answers to unknown questions: {unknown}")
    checked: dict[str, Any] = {}
    for question in questionnaire.questions:
        value = answers.get(question.id)
        if value is None or value == "" or value == []:
            value = question.default
        if value is None or value == "" or value == []:
            if question.required:
                raise ValueError(f"question {question.id!r} needs an answer")
            checked[question.id] = None
            continue
        checked[question.id] = check_answer(question, value)
    return checked


class QuestionnaireSlot:
    """Where one questionnaire's answer arrives: set once (later answers are ignored), awaited
    by the asker. Made in the asker's event loop; :meth:`put` works from any thread (a UI
    thread answering a form)."""

    def __init__(self, questionnaire: Questionnaire) -> None:
        self.questionnaire = questionnaire
        self._answer: QuestionnaireAnswer | None = None
        self._lock = threading.Lock()  # put() from any thread: exactly one answer wins
        self._set = anyio.Event()
        self._loop = anyio.lowlevel.current_token()  # where the asker waits

    @property
    def answered(self) -> bool:
        """Whether an answer (of any status) arrived."""
        return self._answer is not None

    def put(self, answer: QuestionnaireAnswer) -> bool:
        """Deliver ``answer``; False when one was already delivered. An ``answered`` answer
        is checked first (:func:`check_answers`; ValueError names the problem). From another
        thread than the asker's event loop's, it returns once that loop has woken the asker
        (or at once, when that loop has ended)."""
        with self._lock:
            if self._answer is not None:
                return False
            if answer.status == "answered":
                checked = check_answers(self.questionnaire, answer.answers)
                answer = QuestionnaireAnswer(
                    status="answered", answers=checked, message=answer.message
                )
            self._answer = answer
        if _in_loop(self._loop):
            self._set.set()
        else:
            with suppress(RuntimeError):  # RunFinishedError, a closed loop: nobody waits
                anyio.from_thread.run_sync(self._set.set, token=self._loop)
        return True

    async def wait(self) -> QuestionnaireAnswer:
        """The answer, once delivered."""
        await self._set.wait()
        assert self._answer is not None
        return self._answer


def _in_loop(token: anyio.lowlevel.EventLoopToken) -> bool:
    """Whether this thread runs the event loop of ``token``."""
    try:
        return anyio.lowlevel.current_token() == token
    except anyio.NoEventLoopError:
        return False


_CURRENT: ContextVar[Questioner | None] = ContextVar("sagents_questioner", default=None)


def current_questioner() -> Questioner | None:
    """The questioner :func:`bind_questioner` bound in this context, or None.

    Deprecated: a call's questioner is its ``SessionContext.questioner``; this is what a host
    written against the old binding set, which the ``questionnaire`` tool still falls back to.
    """
    return _CURRENT.get()


@contextmanager
def bind_questioner(questioner: Questioner | None) -> Iterator[None]:
    """Make ``questioner`` the :func:`current_questioner` inside the block (tasks started in it
    inherit it).

    Deprecated (warns): put the questioner on the call's context instead,
    ``SessionContext(questioner=...)``; a call whose context has one uses it, else this one.
    """
    warnings.warn(
        "bind_questioner is deprecated: pass SessionContext(questioner=...) with the call",
        DeprecationWarning,
        stacklevel=3,
    )
    token = _CURRENT.set(questioner)
    try:
        yield
    finally:
        _CURRENT.reset(token)
