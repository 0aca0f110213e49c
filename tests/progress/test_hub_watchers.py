"""A hub watcher (the web console) sees every session's events; ``show_watchers`` reaches it
and no session consumer."""

from __future__ import annotations

import pytest

from sagents.core.events import Event, ToolProgressEvent
from sagents.progress._hub import ProgressHub

pytestmark = pytest.mark.anyio


class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[str, Event]] = []

    def offer(self, session_id: str, event: Event) -> None:
        self.events.append((session_id, event))


def progress(text: str) -> ToolProgressEvent:
    return ToolProgressEvent(tool_call_id="c", text=text, ts=1.0)


async def test_a_watcher_sees_every_session_without_making_it_listening() -> None:
    hub = ProgressHub()
    seen = Seen()
    hub.watch(seen)
    assert hub.listening("a") is False  # watching costs quiet calls nothing
    async with hub.subscribe("b") as queue:
        hub.publish("a", progress("one"))
        hub.publish("b", progress("two"))
        hub.show_watchers("b", progress("raw"))
        queued = []
        while len(queue):
            event = queue.receive_nowait()
            assert isinstance(event, ToolProgressEvent)
            queued.append(event.text)
    hub.unwatch(seen)
    hub.publish("a", progress("after"))
    assert [(s, e.text) for s, e in seen.events if isinstance(e, ToolProgressEvent)] == [
        ("a", "one"),
        ("b", "two"),
        ("b", "raw"),
    ]
    assert hub.listening("a") is False
    assert "".join(queued) == "two"  # the session's consumer never got the raw text
