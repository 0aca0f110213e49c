"""The seams the gateway is built against: what it serves, where progress comes from.

The gateway (``sagents serve``) does not own tools: it serves a
:class:`~sagents.tool.ToolProvider` (the one provider protocol: ``ToolManager``, ``ToolProxy``,
the gateway's per-session ``SessionOffer``) and forwards the progress a :class:`ProgressSource`
reports for each call. The integration wires these to the tool core and the progress hub;
tests use the in-memory :class:`MemoryProgressSource` and fakes.

Progress events are matched structurally (:class:`ToolProgressLike`, :class:`ScriptProgressLike`),
so the typed events of ``sagents.core.events`` (``ToolProgressEvent``, ``ScriptProgressEvent``)
satisfy them without this module importing them.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol, runtime_checkable

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from sagents.core._result import EmbeddedResource, ResourceLink
from sagents.tool._provider import ToolProvider

__all__ = [
    "PROGRESS_BUFFER",
    "MemoryProgressSource",
    "ProgressSource",
    "ProxyProvider",
    "ResourceSource",
    "ScriptProgressLike",
    "ToolProgressLike",
]

PROGRESS_BUFFER = 256
"""Events buffered per call between the source and the client (events, not bytes); past it the
source's own overflow policy applies (progress is droppable, see docs/progress.md)."""


def ProxyProvider(proxy: ToolProvider) -> ToolProvider:
    """Deprecated: ``Gateway`` serves any :class:`~sagents.tool.ToolProvider` (a ``ToolProxy``,
    a ``ToolManager``) as it is; this returns ``proxy`` unchanged, with a warning."""
    warnings.warn(
        "ProxyProvider is deprecated: pass the ToolProxy or ToolManager to Gateway directly",
        DeprecationWarning,
        stacklevel=2,
    )
    return proxy


class ResourceSource(Protocol):
    """Resources served beside the gateway's own: skill files (``SKILL.md``, scripts, assets).

    ``skills`` is the session's profile filter (None: every skill); a source must apply it to
    listing and reading alike.
    """

    def list_resources(self, skills: frozenset[str] | None) -> list[ResourceLink]:
        """The resources the session may read."""
        ...

    async def read_resource(self, uri: str, skills: frozenset[str] | None) -> EmbeddedResource:
        """Read one resource (``text`` or base64 ``blob``).

        Raises:
            SagentsError: the resource does not exist or is not offered to the session (for
                example ``SkillNotFoundError``); the gateway answers "resource not found".
        """
        ...


@runtime_checkable
class ToolProgressLike(Protocol):
    """A ``tool_progress`` event: text a running tool printed (docs/progress.md)."""

    @property
    def tool_call_id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def stream(self) -> str: ...
    @property
    def closed(self) -> bool: ...


@runtime_checkable
class ScriptProgressLike(Protocol):
    """A ``script.progress`` event: counters of a running script (docs/progress.md)."""

    @property
    def calls(self) -> int: ...
    @property
    def failures(self) -> int: ...
    @property
    def done(self) -> float | None: ...
    @property
    def total(self) -> float | None: ...
    @property
    def message(self) -> str | None: ...
    @property
    def elapsed_s(self) -> float: ...
    @property
    def status(self) -> str: ...


class ProgressSource(Protocol):
    """Where the events of one call come from.

    The integration adapts the progress hub: subscribe to the session, keep the events whose
    ``tool_call_id`` is the call's.
    """

    def subscribe(
        self, session_id: str, tool_call_id: str
    ) -> AbstractAsyncContextManager[MemoryObjectReceiveStream[object]]:
        """Open a stream of the call's events; closing the context ends the subscription."""
        ...


class MemoryProgressSource:
    """An in-memory :class:`ProgressSource`: ``await emit(session_id, tool_call_id, event)``.

    Events for a call nobody subscribed to are dropped (there is nobody to show them to).
    """

    def __init__(self) -> None:
        self._subscribers: dict[tuple[str, str], MemoryObjectSendStream[object]] = {}

    @asynccontextmanager
    async def subscribe(
        self, session_id: str, tool_call_id: str
    ) -> AsyncIterator[MemoryObjectReceiveStream[object]]:
        """Receive the events emitted for ``(session_id, tool_call_id)`` while open."""
        send, receive = anyio.create_memory_object_stream[object](PROGRESS_BUFFER)
        key = (session_id, tool_call_id)
        self._subscribers[key] = send
        try:
            yield receive
        finally:
            self._subscribers.pop(key, None)
            send.close()
            receive.close()

    async def emit(self, session_id: str, tool_call_id: str, event: object) -> bool:
        """Deliver ``event`` to the call's subscriber; False when there is none or it is full."""
        send = self._subscribers.get((session_id, tool_call_id))
        if send is None:
            return False
        try:
            send.send_nowait(event)
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True
