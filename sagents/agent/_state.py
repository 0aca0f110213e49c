"""A paused run: :class:`RunState`, its :class:`Interruption` items and :class:`RunResult`
(docs/agent.md, "Pausing and resuming").

With ``approvals="defer"`` a call that needs a person (an approval the session's mode asks
for, or a ``questionnaire``) does not wait inside the running coroutine: the run ends as
*interrupted* with a :class:`RunState` that holds everything needed to continue, as plain JSON
(:meth:`RunState.to_json`): the neutral messages, the turn count, the pending calls with their
arguments, the results of the calls of the interrupted answer that already ran (so they never
run again), the usage so far, the session's ``audit_status``, offered tools, grants and loaded
skills. The decisions are data (:meth:`RunState.approve`, :meth:`RunState.deny`,
:meth:`RunState.answer`), and any process holding the signing key resumes it with
``SAgent.run(state=...)``.

The JSON is versioned (:data:`STATE_VERSION`) and signed with HMAC-SHA256 (RFC 2104) under the
key of :func:`state_key`; :meth:`RunState.from_json` refuses an edited state, an unknown
version or a malformed one with a :class:`~sagents.errors.RunStateError` saying which. A state
holds tool arguments and results: keep it server-side, like a session.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

from sagents.agent._messages import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolResultPart,
)
from sagents.audit._store import default_data_dir
from sagents.errors import RunStateError
from sagents.tool._approval import APPROVAL_ANSWERS, ApprovalAnswer
from sagents.tool.questions import (
    Question,
    Questionnaire,
    QuestionnaireAnswer,
    check_answers,
)

__all__ = [
    "STATE_KEY_ENV",
    "STATE_KEY_FILE",
    "STATE_VERSION",
    "Approvals",
    "Interruption",
    "InterruptionKind",
    "RunResult",
    "RunState",
    "message_from_json",
    "message_to_json",
    "state_key",
]

STATE_VERSION: Final = 1
"""The version of :meth:`RunState.to_json`'s document this sagents writes and reads."""

STATE_KEY_ENV: Final = "SAGENTS_STATE_KEY"
"""The environment variable holding the signing key (at least 32 characters), shared by every
process that resumes runs."""

STATE_KEY_FILE: Final = "state.key"
"""The key's file in the data directory when :data:`STATE_KEY_ENV` is unset (mode 0600)."""

_MIN_KEY_CHARS: Final = 32
_KEY_BYTES: Final = 32

Approvals: TypeAlias = Literal["wait", "defer"]
"""What a run does when a call needs a person: ``wait`` for the approver or questioner (the
default), or ``defer``: end the run as interrupted with a :class:`RunState`."""

InterruptionKind: TypeAlias = Literal["approval", "questionnaire"]


def state_key() -> bytes:
    """The key that signs run states: :data:`STATE_KEY_ENV`, else the data directory's
    :data:`STATE_KEY_FILE` (created with 32 random bytes, mode 0600, when missing).

    Raises:
        RunStateError: the variable is too short, or the key file is readable by others or
            cannot be read or created (the message names the file).
    """
    given = os.environ.get(STATE_KEY_ENV)
    if given is not None:
        if len(given) < _MIN_KEY_CHARS:
            raise RunStateError(
                f"{STATE_KEY_ENV} must hold at least {_MIN_KEY_CHARS} characters",
                hint='generate one with: python -c "import secrets; print(secrets.token_hex(32))"',
                details={"reason": "key"},
            )
        return given.encode()
    path = default_data_dir() / STATE_KEY_FILE
    try:
        return _key_file(path)
    except OSError as error:
        raise RunStateError(
            f"cannot read or create the run-state key {str(path)!r}: {error}",
            hint=f"set {STATE_KEY_ENV}, or make the data directory writable",
            details={"reason": "key"},
        ) from error


def _key_file(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(descriptor, "w") as file:
            file.write(os.urandom(_KEY_BYTES).hex())
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise RunStateError(
            f"the run-state key {str(path)!r} is readable by other users (mode {mode & 0o777:o})",
            hint=f"chmod 600 {path}",
            details={"reason": "key"},
        )
    key = path.read_text(encoding="ascii").strip()
    if len(key) < _MIN_KEY_CHARS:
        raise RunStateError(
            f"the run-state key {str(path)!r} is empty or too short",
            hint="remove it: a new one is made (states signed with the old key are then refused)",
            details={"reason": "key"},
        )
    return key.encode()


_ARTICLE: Final[dict[str, str]] = {"approval": "an", "questionnaire": "a"}


def _refused(message: str, reason: str, hint: str = "") -> RunStateError:
    return RunStateError(message, hint=hint or None, details={"reason": reason})


# -- messages as JSON --------------------------------------------------------------------------


def message_to_json(message: Message) -> dict[str, Any]:
    """A :class:`Message` as JSON, every part kept (reasoning signatures and ids, and the
    output items' ids of text and calls, which the Responses API pairs with reasoning)."""
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            text: dict[str, Any] = {"type": "text", "text": part.text}
            if part.item_id is not None:  # the output item's id (Responses pairs by it)
                text["item_id"] = part.item_id
            parts.append(text)
        elif isinstance(part, ReasoningPart):
            parts.append(
                {
                    "type": "reasoning",
                    "text": part.text,
                    "signature": part.signature,
                    "id": part.id,
                    "provider": part.provider,
                }
            )
        elif isinstance(part, ToolCall):
            call: dict[str, Any] = {
                "type": "tool_call",
                "id": part.id,
                "name": part.name,
                "arguments": part.arguments,
            }
            if part.item_id is not None:
                call["item_id"] = part.item_id
            parts.append(call)
        else:
            parts.append(
                {"type": "tool_result", "tool_call_id": part.tool_call_id, "content": part.content}
            )
    return {"role": message.role, "parts": parts, "extra": dict(message.extra)}


def message_from_json(data: Mapping[str, Any]) -> Message:
    """The :class:`Message` of :func:`message_to_json`'s document.

    Raises:
        ValueError, KeyError, TypeError: the document is not one.
    """
    parts: list[Part] = []
    for part in data["parts"]:
        kind = part["type"]
        if kind == "text":
            parts.append(TextPart(text=str(part["text"]), item_id=_item_id(part)))
        elif kind == "reasoning":
            parts.append(
                ReasoningPart(
                    text=str(part["text"]),
                    signature=part.get("signature"),
                    id=part.get("id"),
                    provider=part.get("provider"),
                )
            )
        elif kind == "tool_call":
            parts.append(
                ToolCall(
                    id=str(part["id"]),
                    name=str(part["name"]),
                    arguments=str(part["arguments"]),
                    item_id=_item_id(part),
                )
            )
        elif kind == "tool_result":
            parts.append(
                ToolResultPart(tool_call_id=str(part["tool_call_id"]), content=str(part["content"]))
            )
        else:
            raise ValueError(f"unknown part type {kind!r}")
    return Message(role=data["role"], parts=tuple(parts), extra=dict(data.get("extra") or {}))


def _item_id(part: Mapping[str, Any]) -> str | None:
    """A part's ``item_id`` (absent in a document of an earlier sagents: None)."""
    value = part.get("item_id")
    return None if value is None else str(value)


# -- the paused run ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Interruption:
    """One thing a paused run waits for.

    Attributes:
        id: The tool call's id (the model's; one questionnaire is one ``questionnaire`` call).
        kind: ``approval`` (the session's mode asks before this call runs) or
            ``questionnaire`` (the model asks the user questions).
        tool_name: The tool's registered name.
        arguments: The call's arguments, as the model sent them.
        permission: The tool's permission class (approvals).
        offered: The answers an approval offers: ``allow_session`` is never offered for a
            destructive tool.
        title: A questionnaire's title.
        questions: A questionnaire's questions (see ``sagents.tool.questions``).
    """

    id: str
    kind: InterruptionKind
    tool_name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    permission: str = ""
    offered: tuple[ApprovalAnswer, ...] = ()
    title: str = ""
    questions: tuple[Question, ...] = ()

    def questionnaire(self) -> Questionnaire:
        """The questionnaire of a ``questionnaire`` item."""
        return Questionnaire(title=self.title, questions=self.questions)

    def to_json(self) -> dict[str, Any]:
        """As JSON (the questions as the ``questionnaire`` tool takes them)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "tool_name": self.tool_name,
            "arguments": dict(self.arguments),
            "permission": self.permission,
            "offered": list(self.offered),
            "title": self.title,
            "questions": [q.model_dump(mode="json") for q in self.questions],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Interruption:
        """The item of :meth:`to_json`'s document."""
        offered = tuple(a for a in APPROVAL_ANSWERS if a in data.get("offered", ()))
        kind: InterruptionKind = "questionnaire" if data["kind"] == "questionnaire" else "approval"
        return cls(
            id=str(data["id"]),
            kind=kind,
            tool_name=str(data["tool_name"]),
            arguments=dict(data.get("arguments") or {}),
            permission=str(data.get("permission") or ""),
            offered=offered,
            title=str(data.get("title") or ""),
            questions=tuple(Question.model_validate(q) for q in data.get("questions") or ()),
        )


@dataclass(frozen=True, kw_only=True)
class Resolution:
    """How one item was decided: an approval's answer (and a denial's reason), a
    questionnaire's answer, or ``cancelled`` (:meth:`RunState.cancel`)."""

    answer: ApprovalAnswer | None = None
    reason: str = ""
    questionnaire: QuestionnaireAnswer | None = None
    cancelled: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "reason": self.reason,
            "questionnaire": None if self.questionnaire is None else self.questionnaire.to_dict(),
            "cancelled": self.cancelled,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Resolution:
        answer = data.get("answer")
        asked = data.get("questionnaire")
        return cls(
            answer=next((a for a in APPROVAL_ANSWERS if a == answer), None),
            reason=str(data.get("reason") or ""),
            questionnaire=None
            if asked is None
            else QuestionnaireAnswer(
                status=asked["status"],
                answers=dict(asked.get("answers") or {}),
                message=str(asked.get("message") or ""),
            ),
            cancelled=bool(data.get("cancelled")),
        )


class RunState:
    """A paused run: what it waits for, and everything needed to continue it.

    Built by the agent loop (``RunResult.state``, ``done(reason="interrupted", state=...)``)
    or by :meth:`from_json`. Decide each of :attr:`interruptions` (:meth:`approve`,
    :meth:`deny`, :meth:`answer`; or :meth:`cancel` them all), then pass it to
    ``SAgent.run(state=...)`` or ``SAgent.run_stream(state=...)``, in this process or another
    one with the same key and store. A state is resumed at most once.
    """

    def __init__(
        self,
        *,
        agent: str,
        session_id: str,
        history: Sequence[Message],
        pending: Sequence[Interruption],
        settled: Mapping[str, str],
        turns: int,
        usage: Mapping[str, int] | None = None,
        audit_status: Mapping[str, Any] | None = None,
        offered_tools: Sequence[str] = (),
        granted: Sequence[str] = (),
        skills: Sequence[str] = (),
        system_extra: str = "",
        tool_choice_spent: bool = False,
        output_retries: int = 0,
        state_id: str | None = None,
        created_at: float | None = None,
        decisions: Mapping[str, Resolution] | None = None,
    ) -> None:
        self.state_id = state_id or uuid.uuid4().hex
        self.agent = agent
        self.session_id = session_id
        self.history: tuple[Message, ...] = tuple(history)
        """The history, its last message the assistant message whose calls wait."""
        self.pending: tuple[Interruption, ...] = tuple(pending)
        self.settled: dict[str, str] = dict(settled)
        """Tool call id to result text: the calls of that message already settled (run
        before the pause, or refused), never run again."""
        self.turns = turns
        self.usage: dict[str, int] = dict(usage or {})
        self.audit_status: dict[str, Any] = dict(audit_status or {})
        self.offered_tools = list(offered_tools)
        self.granted = list(granted)
        self.skills = list(skills)
        self.system_extra = system_extra
        self.tool_choice_spent = tool_choice_spent
        """The model called the tool a named ``tool_choice`` names before the pause: the
        resumed run leaves it unset (docs/agent.md, "The model seam")."""
        self.output_retries = output_retries
        """Answers sent back before the pause for not fitting ``output_type``: the resumed run
        counts on from there (docs/agent.md, "Structured output")."""
        self.created_at = time.time() if created_at is None else created_at
        self.decisions: dict[str, Resolution] = dict(decisions or {})

    # -- what it waits for ----------------------------------------------------------------------

    @property
    def interruptions(self) -> tuple[Interruption, ...]:
        """The items that wait, in call order."""
        return self.pending

    @property
    def undecided(self) -> tuple[Interruption, ...]:
        """The items not decided yet."""
        return tuple(item for item in self.pending if item.id not in self.decisions)

    def approve(self, item_id: str, *, scope: Literal["once", "session"] = "once") -> None:
        """Let the call ``item_id`` run; ``scope="session"`` also lets later calls of the same
        tool in this session run without asking (not offered for a destructive tool).

        Raises:
            RunStateError: no approval item has this id, or ``session`` is not offered.
        """
        item = self._item(item_id, "approval")
        answer: ApprovalAnswer = "allow_session" if scope == "session" else "allow_once"
        if scope not in ("once", "session"):
            raise _refused(f"scope is 'once' or 'session', not {scope!r}", "item")
        if answer not in item.offered:
            raise _refused(
                f"the call {item_id!r} of {item.tool_name!r} cannot be approved for the "
                f"session (a {item.permission or 'destructive'} tool is approved once)",
                "item",
                hint='approve it with scope="once"',
            )
        self.decisions[item_id] = Resolution(answer=answer)

    def deny(self, item_id: str, *, reason: str = "") -> None:
        """Do not run the call ``item_id``: the model is told it was denied (and why).

        Raises:
            RunStateError: no approval item has this id.
        """
        self._item(item_id, "approval")
        self.decisions[item_id] = Resolution(answer="deny", reason=reason)

    def answer(self, item_id: str, answers: Mapping[str, Any]) -> None:
        """Answer the questionnaire ``item_id`` (question id to value).

        Raises:
            RunStateError: no questionnaire item has this id, or the answers do not fit its
                questions (the message names the question).
        """
        item = self._item(item_id, "questionnaire")
        try:
            checked = check_answers(item.questionnaire(), answers)
        except ValueError as error:
            raise _refused(f"the answers to {item_id!r} do not fit: {error}", "item") from None
        self.decisions[item_id] = Resolution(
            questionnaire=QuestionnaireAnswer(status="answered", answers=checked)
        )

    def decline(self, item_id: str) -> None:
        """The user chose not to answer the questionnaire ``item_id``."""
        self._item(item_id, "questionnaire")
        self.decisions[item_id] = Resolution(questionnaire=QuestionnaireAnswer(status="declined"))

    def cancel(self, *, reason: str = "") -> None:
        """Give up the paused run: every undecided item is settled as cancelled (nothing of it
        runs), and resuming ends the run with ``done(reason="cancelled")`` and a settled
        history, without another model call."""
        for item in self.undecided:
            self.decisions[item.id] = Resolution(cancelled=True, reason=reason)

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` settled any item."""
        return any(resolution.cancelled for resolution in self.decisions.values())

    def _item(self, item_id: str, kind: InterruptionKind) -> Interruption:
        for item in self.pending:
            if item.id == item_id:
                if item.kind != kind:
                    raise _refused(
                        f"{item_id!r} is a {item.kind} item, not {_ARTICLE[kind]} {kind}",
                        "item",
                        hint="use approve/deny for approvals, answer/decline for questionnaires",
                    )
                return item
        raise _refused(
            f"this run waits for no item {item_id!r}",
            "item",
            hint=f"its items: {', '.join(repr(i.id) for i in self.pending) or 'none'}",
        )

    # -- JSON -----------------------------------------------------------------------------------

    def to_document(self) -> dict[str, Any]:
        """The unsigned document (what :meth:`to_json` signs)."""
        return {
            "version": STATE_VERSION,
            "state_id": self.state_id,
            "agent": self.agent,
            "session_id": self.session_id,
            "created_at": self.created_at,
            "turns": self.turns,
            "history": [message_to_json(m) for m in self.history],
            "pending": [item.to_json() for item in self.pending],
            "settled": dict(self.settled),
            "decisions": {key: value.to_json() for key, value in self.decisions.items()},
            "usage": dict(self.usage),
            "audit_status": self.audit_status,
            "offered_tools": list(self.offered_tools),
            "granted": list(self.granted),
            "skills": list(self.skills),
            "system_extra": self.system_extra,
            "tool_choice_spent": self.tool_choice_spent,
            "output_retries": self.output_retries,
        }

    def to_json(self, *, key: bytes | None = None) -> str:
        """The state as one JSON text, signed (HMAC-SHA256 of its canonical form).

        Args:
            key: The signing key; :func:`state_key` when None.
        """
        document = self.to_document()
        signature = _sign(document, key if key is not None else state_key())
        return json.dumps({**document, "signature": signature}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes, *, key: bytes | None = None) -> RunState:
        """The state of :meth:`to_json`'s text.

        Args:
            text: The JSON text.
            key: The signing key; :func:`state_key` when None.

        Raises:
            RunStateError: not a state (``format``), edited or signed with another key
                (``signature``), or of a version this sagents does not read (``version``).
        """
        try:
            document = json.loads(text)
        except ValueError as error:
            raise _refused(f"a run state is JSON; this is not: {error}", "format") from None
        if not isinstance(document, dict) or "signature" not in document:
            raise _refused("this is not a signed run state (no 'signature')", "format")
        signature = document.pop("signature")
        expected = _sign(document, key if key is not None else state_key())
        if not isinstance(signature, str) or not hmac.compare_digest(signature, expected):
            raise _refused(
                "the run state's signature does not match: it was edited, or signed with "
                "another key",
                "signature",
                hint=f"every process that resumes runs needs the same {STATE_KEY_ENV}",
            )
        version = document.get("version")
        if version != STATE_VERSION:
            newer = isinstance(version, int) and version > STATE_VERSION
            raise _refused(
                f"the run state has version {version!r}; this sagents reads version "
                f"{STATE_VERSION}"
                + (" (it was made by a newer sagents)" if newer else " (an older format)"),
                "version",
                hint="resume it with the sagents release that paused it, or start the run again",
            )
        try:
            return cls(
                state_id=str(document["state_id"]),
                agent=str(document["agent"]),
                session_id=str(document["session_id"]),
                created_at=float(document["created_at"]),
                turns=int(document["turns"]),
                history=[message_from_json(m) for m in document["history"]],
                pending=[Interruption.from_json(i) for i in document["pending"]],
                settled={str(k): str(v) for k, v in document["settled"].items()},
                decisions={
                    str(k): Resolution.from_json(v) for k, v in document["decisions"].items()
                },
                usage={str(k): int(v) for k, v in document["usage"].items()},
                audit_status=document["audit_status"],
                offered_tools=[str(n) for n in document["offered_tools"]],
                granted=[str(n) for n in document["granted"]],
                skills=[str(n) for n in document["skills"]],
                system_extra=str(document["system_extra"]),
                # absent from a state saved by an earlier sagents: not spent
                tool_choice_spent=_flag(document, "tool_choice_spent"),
                output_retries=_count(document, "output_retries"),  # absent: none yet
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise _refused(f"the run state is malformed: {error!r}", "format") from None


def _flag(document: Mapping[str, Any], key: str) -> bool:
    value = document.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{key!r} is true or false, not {value!r}")
    return value


def _count(document: Mapping[str, Any], key: str) -> int:
    value = document.get(key, 0)
    if type(value) is not int or value < 0:  # bool is an int subclass: refused too
        raise ValueError(f"{key!r} is a count (0 or more), not {value!r}")
    return value


def _sign(document: Mapping[str, Any], key: bytes) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """What ``SAgent.run`` returns.

    Attributes:
        reason: Why the run ended: ``stop``, ``max_turns``, ``cancelled``, ``error`` or
            ``interrupted``.
        output: The final answer's text ("" when the run did not answer); with
            ``SAgent(output_type=...)`` the answer validated into that type (None when the
            run did not answer).
        messages: The history as OpenAI Chat Completions dicts.
        history: The history as :class:`~sagents.agent.Message` values.
        state: The paused run (``interrupted`` only).
        error: The error of an ``error`` run (``SagentsError.to_dict``); with another
            reason, the store's error when it did not keep the run's session or paused state
            (see ``DoneEvent.error``); else None.
        audit_status: The session's ``audit_status``.
        turns: Model calls the run made (counting those before a pause).
    """

    reason: str
    output: Any = ""
    messages: tuple[Mapping[str, Any], ...] = ()
    history: tuple[Message, ...] = ()
    state: RunState | None = None
    error: Mapping[str, Any] | None = None
    audit_status: Mapping[str, Any] = field(default_factory=dict)
    turns: int = 0

    @property
    def interrupted(self) -> bool:
        """Whether the run paused for a person (see :attr:`interruptions`)."""
        return self.state is not None

    @property
    def interruptions(self) -> tuple[Interruption, ...]:
        """What the paused run waits for (empty unless :attr:`interrupted`)."""
        return () if self.state is None else self.state.interruptions
