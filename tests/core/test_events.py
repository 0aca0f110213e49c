import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagents.core.events import (
    EVENT_TYPES,
    ApprovalRequestEvent,
    ApprovalResultEvent,
    BackgroundDoneEvent,
    Event,
    ScriptProgressEvent,
    ToolProgressEvent,
    event_from_dict,
    is_droppable,
)
from sagents.errors import EventFormatError

TS = 1_700_000_000.5

SAMPLES: list[Event] = [
    ToolProgressEvent(tool_call_id="call_1", text="héllo\n", stream="stderr", ts=TS),
    ToolProgressEvent(tool_call_id="call_1", text="", stream="info", closed=True, ts=TS),
    ScriptProgressEvent(
        script_id="run-1",
        tool_call_id="call_2",
        calls=12,
        failures=1,
        done=3,
        total=500,
        message="汇总",
        elapsed_s=1.5,
        ts=TS,
    ),
    ScriptProgressEvent(script_id="run-1", status="timeout", ts=TS),
    ApprovalRequestEvent(request_id="r1", tools=("fleet__reboot",), message="Reboot?", ts=TS),
    ApprovalResultEvent(request_id="r1", approved=False, reason="no", ts=TS),
    BackgroundDoneEvent(handle="bg-1", status="ok", text="done", ts=TS),
]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: f"{e.type}")
def test_every_event_round_trips_through_ndjson(event: Event) -> None:
    line = json.dumps(event.to_dict())
    assert event_from_dict(json.loads(line)) == event
    assert type(event).from_dict(json.loads(line)) == event


def test_tool_progress_has_the_seed_design_shape() -> None:
    data = ToolProgressEvent(tool_call_id="call_abc", text="x", ts=TS).to_dict()
    assert data == {
        "type": "tool_progress",
        "tool_call_id": "call_abc",
        "text": "x",
        "stream": "stdout",
        "closed": False,
        "ts": TS,
    }


def test_every_event_type_has_a_sample() -> None:
    assert {e.type for e in SAMPLES} == set(EVENT_TYPES)


def test_approval_tools_serialise_as_a_json_array() -> None:
    assert SAMPLES[4].to_dict()["tools"] == ["fleet__reboot"]


def test_unknown_event_type_is_a_clear_error() -> None:
    with pytest.raises(EventFormatError, match=r"unknown event type 'tool\.progress'"):
        event_from_dict({"type": "tool.progress", "text": "x"})


def test_missing_field_is_named_in_the_error() -> None:
    with pytest.raises(EventFormatError, match="tool_call_id") as caught:
        event_from_dict({"type": "tool_progress", "text": "x", "ts": TS})
    assert caught.value.code == "invalid_event"
    assert caught.value.details["type"] == "tool_progress"


@pytest.mark.parametrize(
    "data",
    [
        {"type": "tool_progress", "tool_call_id": "c", "text": "x", "closed": "yes", "ts": TS},
        {"type": "tool_progress", "tool_call_id": "c", "text": "x", "stream": "err", "ts": TS},
        {"type": "script.progress", "script_id": "s", "status": "finished", "ts": TS},
        {"type": "approval.result", "request_id": "r", "approved": 1, "ts": TS},
        {"type": "background.done", "handle": 7, "status": "ok", "ts": TS},
    ],
)
def test_fields_of_the_wrong_type_are_refused(data: dict[str, Any]) -> None:
    with pytest.raises(EventFormatError, match=repr(data["type"])):
        event_from_dict(data)


@pytest.mark.parametrize("data", [None, [1], "tool_progress"])
def test_an_event_must_be_an_object(data: Any) -> None:
    with pytest.raises(EventFormatError, match="JSON object"):
        event_from_dict(data)


def test_only_progress_is_droppable() -> None:
    assert [is_droppable(e) for e in SAMPLES] == [True, False, True, False, False, False, False]


@given(
    text=st.text(),
    stream=st.sampled_from(["stdout", "stderr", "info"]),
    closed=st.booleans(),
    ts=st.floats(min_value=0, max_value=4e9),
)
def test_any_tool_progress_text_round_trips(
    text: str, stream: Any, closed: bool, ts: float
) -> None:
    event = ToolProgressEvent(tool_call_id="c", text=text, stream=stream, closed=closed, ts=ts)
    assert event_from_dict(json.loads(json.dumps(event.to_dict()))) == event
