"""Merge a stream of messages with progress events into one NDJSON stream (seed ``stream_merge``).

``interleave_message_and_progress(messages, events)`` is an async context manager (its helper
tasks live in a task group that the ``async with`` block owns, so nothing leaks when the
consumer stops early) yielding an async iterator of NDJSON lines, each ending in ``"\\n"``:

* events waiting in the queue are written before each message, so a tool's progress precedes
  the result message that follows it; events arriving between messages go out as they come;
* when the messages end, the events already waiting are written, then the stream ends (the
  event queue itself stays open: it belongs to its subscription);
* an error from either side (the message iterator raising, a message that is not a JSON object,
  a lagged event queue) is raised, unchanged, from the iteration after the lines before it;
* a closed event queue ends only the progress side; messages keep flowing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from sagents.core.events import Event
from sagents.errors import ConsumerLaggedError
from sagents.progress._queue import EventQueue
from sagents.progress._scope import run_beside

__all__ = ["event_to_ndjson", "interleave_message_and_progress"]


def event_to_ndjson(event: Event) -> str:
    """Serialise an event as one NDJSON line (ending in ``"\\n"``, non-ASCII kept as is)."""
    return json.dumps(event.to_dict(), ensure_ascii=False) + "\n"


@dataclass(frozen=True, kw_only=True)
class _Failure:
    error: Exception


_Item = str | _Failure


@asynccontextmanager
async def interleave_message_and_progress(
    messages: AsyncIterable[Mapping[str, Any]], events: EventQueue
) -> AsyncIterator[AsyncIterator[str]]:
    """Merge ``messages`` and ``events`` into NDJSON lines (see the module docstring).

    Args:
        messages: The chat's messages, each a JSON-serialisable mapping.
        events: The consumer's event queue (from ``hub.subscribe(session_id)``).

    Yields:
        An async iterator of NDJSON lines. It raises what the message iterator raised,
        ``TypeError`` for a message that is not a JSON object or not serialisable
        (``ValueError`` for NaN or infinity, which JSON cannot carry), and
        :class:`~sagents.errors.ConsumerLaggedError` if the queue lagged.
    """
    send, receive = anyio.create_memory_object_stream[_Item](0)
    lock = anyio.Lock()
    events_scope = anyio.CancelScope()
    state = {"done": False}

    async def drain() -> None:
        while True:
            try:
                event = events.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream):
                return
            await send.send(event_to_ndjson(event))

    async def forward_events() -> None:
        with events_scope:
            try:
                while not state["done"]:
                    await events.wait_ready()
                    async with lock:
                        if state["done"]:
                            return
                        if events.closed and not len(events) and not events.lagged:
                            return  # the progress side has ended; messages continue
                        await drain()
            except ConsumerLaggedError as exc:  # reported to the reader
                await send.send(_Failure(error=exc))

    async def forward_messages() -> None:
        async with send:
            try:
                async for message in messages:
                    line = _message_to_ndjson(message)
                    async with lock:
                        await drain()
                        await send.send(line)
                async with lock:
                    await drain()
                    state["done"] = True
                    events_scope.cancel()
            except Exception as exc:  # noqa: BLE001 - handed to the reader, raised there unchanged
                state["done"] = True
                events_scope.cancel()
                await send.send(_Failure(error=exc))

    try:
        async with run_beside(forward_events, forward_messages):
            yield _lines(receive)
    finally:
        receive.close()  # only after the helpers ended: a send never meets a closed reader


async def _lines(receive: MemoryObjectReceiveStream[_Item]) -> AsyncIterator[str]:
    async for item in receive:
        if isinstance(item, _Failure):
            raise item.error
        yield item


def _message_to_ndjson(message: Mapping[str, Any]) -> str:
    if not isinstance(message, Mapping):
        raise TypeError(
            f"a message must be a mapping (a JSON object), not {type(message).__name__}"
        )
    return json.dumps(dict(message), ensure_ascii=False, allow_nan=False) + "\n"
