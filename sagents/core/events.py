"""The typed events of the live progress channel, shared by every layer.

Each event is a frozen value with a ``type`` tag and a ``to_dict()`` giving its NDJSON object
(docs/progress.md, "Event types (NDJSON)"):

==========================  ====================  ==============================================
class                       ``type``              never dropped by the channel?
==========================  ====================  ==============================================
:class:`ToolProgressEvent`  ``tool_progress``     only when ``closed`` is true
:class:`ScriptProgressEvent` ``script.progress``  only when ``status`` is final (not ``running``)
:class:`ApprovalRequestEvent` ``approval.request`` always kept
:class:`ApprovalResultEvent` ``approval.result``  always kept
:class:`BackgroundDoneEvent` ``background.done``  always kept
==========================  ====================  ==============================================

:func:`event_from_dict` rebuilds any event from its NDJSON object and raises
:class:`~sagents.errors.EventFormatError` for anything else. Events carry no session id: the
channel routes them by session (docs/progress.md).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, TypeVar, get_args

import pydantic

from sagents.errors import EventFormatError

__all__ = [
    "EVENT_TYPES",
    "FINAL_SCRIPT_STATUSES",
    "ApprovalRequestEvent",
    "ApprovalResultEvent",
    "BackgroundDoneEvent",
    "BackgroundStatus",
    "Event",
    "EventType",
    "ProgressStream",
    "ScriptProgressEvent",
    "ScriptStatus",
    "ToolProgressEvent",
    "event_from_dict",
    "is_droppable",
]

ProgressStream: TypeAlias = Literal["stdout", "stderr", "info"]
"""The stream a piece of ``tool_progress`` text belongs to."""

ScriptStatus: TypeAlias = Literal[
    "running",
    "ok",
    "error",
    "timeout",
    "cancelled",
    "rejected",
    "output_limit",
    "killed",
    "sandbox_error",
]
"""The state of a run_script run: ``running``, or one final status per cause
(docs/run_script.md, "Statuses")."""

FINAL_SCRIPT_STATUSES: Final[frozenset[str]] = frozenset(get_args(ScriptStatus)) - {"running"}
"""Every :data:`ScriptStatus` but ``running``: the run has ended."""

BackgroundStatus: TypeAlias = Literal["ok", "error", "timeout", "cancelled"]
"""How a background call ended."""

EventType: TypeAlias = Literal[
    "tool_progress", "script.progress", "approval.request", "approval.result", "background.done"
]
"""The ``type`` tag of every event on the channel."""

EVENT_TYPES: Final[tuple[str, ...]] = get_args(EventType)
"""Every :data:`EventType`, in a stable order."""


@dataclass(frozen=True, kw_only=True)
class ToolProgressEvent:
    """Incremental output of a running tool (``tool_progress``; docs/progress.md).

    Attributes:
        tool_call_id: The assistant tool call the text belongs to; the UI groups by it.
        text: Incremental text (may be empty on the ``closed`` event).
        stream: ``stdout``, ``stderr`` or ``info``.
        closed: True on the last event of the call: the UI may stop its spinner.
        ts: Wall-clock time of the event, seconds since the Unix epoch.
    """

    type: Literal["tool_progress"] = "tool_progress"
    tool_call_id: str
    text: str
    stream: ProgressStream = "stdout"
    closed: bool = False
    ts: float

    def to_dict(self) -> dict[str, Any]:
        """Return the NDJSON object ``{"type": "tool_progress", "tool_call_id", ...}``."""
        return {
            "type": self.type,
            "tool_call_id": self.tool_call_id,
            "text": self.text,
            "stream": self.stream,
            "closed": self.closed,
            "ts": self.ts,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolProgressEvent:
        """Rebuild from :meth:`to_dict`'s shape. Raises :class:`EventFormatError`."""
        return _validate(cls, data)


@dataclass(frozen=True, kw_only=True)
class ScriptProgressEvent:
    """A snapshot of a run_script run (``script.progress``): push-only, never stored.

    See docs/progress.md, "Event types (NDJSON)".

    Attributes:
        script_id: The run's id (its records directory name).
        tool_call_id: The run_script tool call, when the run came from a model's call.
        calls: Tool calls the script has made so far.
        failures: Those of them that failed.
        done: Progress the script reported with ``progress(done, total, message)``, if any.
        total: The total it reported, if any (the UI draws a bar when it is set).
        message: The message it reported, if any.
        elapsed_s: Seconds since the run started.
        status: ``running``, or the final status once the run has ended.
        ts: Wall-clock time of the snapshot, seconds since the Unix epoch.
    """

    type: Literal["script.progress"] = "script.progress"
    script_id: str
    tool_call_id: str | None = None
    calls: int = 0
    failures: int = 0
    done: float | None = None
    total: float | None = None
    message: str | None = None
    elapsed_s: float = 0.0
    status: ScriptStatus = "running"
    ts: float

    @property
    def is_final(self) -> bool:
        """True when the run has ended (``status`` is not ``running``)."""
        return self.status != "running"

    def to_dict(self) -> dict[str, Any]:
        """Return the NDJSON object ``{"type": "script.progress", "script_id", ...}``."""
        return _shallow_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScriptProgressEvent:
        """Rebuild from :meth:`to_dict`'s shape. Raises :class:`EventFormatError`."""
        return _validate(cls, data)


@dataclass(frozen=True, kw_only=True)
class ApprovalRequestEvent:
    """The user is asked to approve something (a run_script run, a write call).

    Attributes:
        request_id: Id that the matching :class:`ApprovalResultEvent` repeats.
        tool_call_id: The tool call waiting for the answer, if any.
        tools: The tools the approval covers.
        message: What the user is asked, in plain words.
        ts: Wall-clock time, seconds since the Unix epoch.
    """

    type: Literal["approval.request"] = "approval.request"
    request_id: str
    tool_call_id: str | None = None
    tools: tuple[str, ...] = ()
    message: str
    ts: float

    def to_dict(self) -> dict[str, Any]:
        """Return the NDJSON object (``tools`` as a JSON array)."""
        data = _shallow_dict(self)
        data["tools"] = list(self.tools)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApprovalRequestEvent:
        """Rebuild from :meth:`to_dict`'s shape. Raises :class:`EventFormatError`."""
        return _validate(cls, data)


@dataclass(frozen=True, kw_only=True)
class ApprovalResultEvent:
    """The answer to an :class:`ApprovalRequestEvent`.

    Attributes:
        request_id: The request's id.
        approved: Whether the user approved.
        reason: Why not (or a note), if given.
        ts: Wall-clock time, seconds since the Unix epoch.
    """

    type: Literal["approval.result"] = "approval.result"
    request_id: str
    approved: bool
    reason: str | None = None
    ts: float

    def to_dict(self) -> dict[str, Any]:
        """Return the NDJSON object ``{"type": "approval.result", ...}``."""
        return _shallow_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApprovalResultEvent:
        """Rebuild from :meth:`to_dict`'s shape. Raises :class:`EventFormatError`."""
        return _validate(cls, data)


@dataclass(frozen=True, kw_only=True)
class BackgroundDoneEvent:
    """A background call finished; its result arrives as this event (docs/run_script.md).

    Attributes:
        handle: The background call's handle, as returned to the caller.
        tool_call_id: The tool call that started it, if any.
        status: How it ended.
        text: The model-facing result text.
        ts: Wall-clock time, seconds since the Unix epoch.
    """

    type: Literal["background.done"] = "background.done"
    handle: str
    tool_call_id: str | None = None
    status: BackgroundStatus
    text: str = ""
    ts: float

    def to_dict(self) -> dict[str, Any]:
        """Return the NDJSON object ``{"type": "background.done", ...}``."""
        return _shallow_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackgroundDoneEvent:
        """Rebuild from :meth:`to_dict`'s shape. Raises :class:`EventFormatError`."""
        return _validate(cls, data)


Event: TypeAlias = (
    ToolProgressEvent
    | ScriptProgressEvent
    | ApprovalRequestEvent
    | ApprovalResultEvent
    | BackgroundDoneEvent
)
"""Any event of the channel."""

_CLASSES: Final[dict[str, type[Event]]] = {
    "tool_progress": ToolProgressEvent,
    "script.progress": ScriptProgressEvent,
    "approval.request": ApprovalRequestEvent,
    "approval.result": ApprovalResultEvent,
    "background.done": BackgroundDoneEvent,
}


def _shallow_dict(event: Any) -> dict[str, Any]:
    # dataclasses.asdict deep-copies every value: ten times slower on this hot path.
    return {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}


def is_droppable(event: Event) -> bool:
    """Whether the channel may coalesce or drop ``event`` under pressure.

    Progress may be (``tool_progress`` text, a running ``script.progress`` snapshot); a
    ``closed`` event, a final snapshot, approvals and completions may not
    (docs/progress.md, "Overflow policy").
    """
    if isinstance(event, ToolProgressEvent):
        return not event.closed
    if isinstance(event, ScriptProgressEvent):
        return not event.is_final
    return False


def event_from_dict(data: Any) -> Event:
    """Rebuild any event from its NDJSON object, dispatching on ``data["type"]``.

    Args:
        data: A decoded JSON object.

    Returns:
        The event value.

    Raises:
        EventFormatError: ``data`` is not an object, its ``type`` is unknown, or a field is
            missing or of the wrong type; the message names the type and the field.
    """
    if not isinstance(data, dict):
        raise EventFormatError(f"an event must be a JSON object, not {type(data).__name__}")
    kind = data.get("type")
    cls = _CLASSES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise EventFormatError(
            f"unknown event type {kind!r}", hint=f"expected one of {', '.join(EVENT_TYPES)}"
        )
    return _validate(cls, data)


_E = TypeVar("_E", bound=Event)


_ADAPTERS: Final[dict[type[Any], pydantic.TypeAdapter[Any]]] = {
    cls: pydantic.TypeAdapter(cls) for cls in _CLASSES.values()
}


def _validate(cls: type[_E], data: Any) -> _E:
    if not isinstance(data, dict):
        raise EventFormatError(f"an event must be a JSON object, not {type(data).__name__}")
    try:
        # Strict validation of the JSON form: no "yes" for a bool, no 7 for a str.
        raw = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EventFormatError(f"an event must be JSON-serialisable: {exc}") from None
    try:
        event: _E = _ADAPTERS[cls].validate_json(raw, strict=True)
    except pydantic.ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors()
        ]
        type_tag = cls.__dataclass_fields__["type"].default
        raise EventFormatError(
            f"invalid {type_tag!r} event: {'; '.join(problems)}",
            details={"type": type_tag, "problems": problems},
        ) from None
    return event
