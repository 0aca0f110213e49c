import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
import pytest

from sagents.core.events import ApprovalRequestEvent, ToolProgressEvent
from sagents.errors import ConsumerLaggedError
from sagents.progress import EventQueue, event_to_ndjson, interleave_message_and_progress


def progress(text: str) -> ToolProgressEvent:
    return ToolProgressEvent(tool_call_id="c", text=text, ts=1.0)


async def from_list(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def kinds(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        assert line.endswith("\n")
        data = json.loads(line)
        out.append(data.get("text") or data.get("content") or data["type"])
    return out


@pytest.mark.anyio
async def test_waiting_progress_goes_out_before_the_next_message_and_the_end() -> None:
    events = EventQueue()
    events.offer(progress("p1"))
    events.offer(progress("p2"))

    async def messages() -> AsyncIterator[dict[str, Any]]:
        yield {"role": "assistant", "content": "m1"}
        events.offer(progress("p3"))
        yield {"role": "tool", "content": "m2"}
        events.offer(progress("p4"))

    with anyio.fail_after(2):
        async with interleave_message_and_progress(messages(), events) as lines:
            received = [line async for line in lines]
    assert kinds(received) == ["p1", "p2", "m1", "p3", "m2", "p4"]
    assert not events.closed  # the queue belongs to its subscription


@pytest.mark.anyio
async def test_progress_between_messages_is_streamed_as_it_comes() -> None:
    events = EventQueue()
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](0)
    with anyio.fail_after(2):
        async with interleave_message_and_progress(receive, events) as lines:
            events.offer(progress("live"))
            assert kinds([await anext(lines)]) == ["live"]
            await send.send({"content": "m"})
            assert kinds([await anext(lines)]) == ["m"]
            events.offer(ApprovalRequestEvent(request_id="r", message="ok?", ts=1.0))
            assert kinds([await anext(lines)]) == ["approval.request"]
            send.close()
            assert [line async for line in lines] == []


@pytest.mark.anyio
async def test_an_error_from_the_messages_is_raised_unchanged_after_earlier_lines() -> None:
    events = EventQueue()

    async def messages() -> AsyncIterator[dict[str, Any]]:
        yield {"content": "m1"}
        raise ConnectionResetError("model stream broke")

    received: list[str] = []

    async def consume() -> None:
        async with interleave_message_and_progress(messages(), events) as lines:
            async for line in lines:
                received.append(line)

    with anyio.fail_after(2), pytest.raises(ConnectionResetError, match="model stream broke"):
        await consume()
    assert kinds(received) == ["m1"]


@pytest.mark.anyio
async def test_a_message_that_is_not_an_object_is_a_type_error() -> None:
    async def consume() -> list[str]:
        async with interleave_message_and_progress(from_list(["oops"]), EventQueue()) as lines:
            return [line async for line in lines]

    with anyio.fail_after(2), pytest.raises(TypeError, match="must be a mapping"):
        await consume()


@pytest.mark.anyio
async def test_a_message_json_cannot_carry_is_refused() -> None:
    async def consume(message: Any) -> list[str]:
        async with interleave_message_and_progress(from_list([message]), EventQueue()) as lines:
            return [line async for line in lines]

    with anyio.fail_after(2), pytest.raises(ValueError, match="Out of range float"):
        await consume({"score": float("nan")})
    with anyio.fail_after(2), pytest.raises(TypeError, match="not JSON serializable"):
        await consume({"when": object()})


@pytest.mark.anyio
async def test_a_lagged_event_queue_is_raised_to_the_reader() -> None:
    events = EventQueue(max_critical=1)
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](0)

    async def consume() -> list[str]:
        received = []
        async with send, interleave_message_and_progress(receive, events) as lines:
            events.offer(ApprovalRequestEvent(request_id="1", message="a", ts=1.0))
            events.offer(ApprovalRequestEvent(request_id="2", message="b", ts=1.0))
            async for line in lines:
                received.append(line)
        return received

    with anyio.fail_after(2), pytest.raises(ConsumerLaggedError):
        await consume()


@pytest.mark.anyio
async def test_a_closed_event_queue_ends_only_the_progress_side() -> None:
    events = EventQueue()
    events.offer(progress("last"))
    events.close()
    with anyio.fail_after(2):
        async with interleave_message_and_progress(
            from_list([{"content": "m1"}, {"content": "m2"}]), events
        ) as lines:
            assert kinds([line async for line in lines]) == ["last", "m1", "m2"]


@pytest.mark.anyio
async def test_leaving_early_stops_the_helpers_and_closes_nothing_else() -> None:
    events = EventQueue()
    finished = anyio.Event()

    async def endless() -> AsyncGenerator[dict[str, Any], None]:
        try:
            n = 0
            while True:
                n += 1
                yield {"content": f"m{n}"}
        finally:
            finished.set()

    messages = endless()
    with anyio.fail_after(2):
        async with interleave_message_and_progress(messages, events) as lines:
            assert kinds([await anext(lines)]) == ["m1"]
        await messages.aclose()
        await finished.wait()
    assert not events.closed


def test_an_event_line_is_its_ndjson_object() -> None:
    line = event_to_ndjson(progress("日本"))
    assert line.endswith("\n")
    assert "日本" in line
    assert json.loads(line) == progress("日本").to_dict()
