"""The seams the gateway is built against: what it serves, where progress comes from.

The gateway (``sagents serve``) does not own tools: it exposes a :class:`ToolProvider` (shaped like
``ToolProxy``: ``list_specs`` and ``run_tool``) and forwards the progress a :class:`ProgressSource`
reports for each call. The integration wires these to the tool core and the progress hub; tests
use the in-memory :class:`MemoryProgressSource` and fakes.

Progress events are matched structurally (:class:`ToolProgressLike`, :class:`ScriptProgressLike`),
so the typed events of ``sagents.core.events`` (``ToolProgressEvent``, ``ScriptProgressEvent``)
satisfy them without this module importing them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, runtime_checkable

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from sagents.core.result import EmbeddedResource, ResourceLink, ToolResult
from sagents.core.spec import ToolSpec
from sagents.tool.context import SessionContext

__all__ = [
    "PROGRESS_BUFFER",
    "MemoryProgressSource",
    "ProgressSource",
    "ProxyProvider",
    "ResourceSource",
    "ScriptProgressLike",
    "ToolProgressLike",
    "ToolProvider",
    "ToolProxyLike",
]

PROGRESS_BUFFER = 256
"""Events buffered per call between the source and the client (events, not bytes); past it the
source's own overflow policy applies (progress is droppable, see docs/progress.md)."""


class ToolProvider(Protocol):
    """What the gateway serves: the shape of ``ToolProxy`` (docs/tools.md)."""

    def list_specs(self) -> list[ToolSpec]:
        """Every tool the provider offers, before the session's policy filters them."""
        ...

    async def run_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        session_context: SessionContext | None,
        /,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the public API's run_tool signature
    ) -> ToolResult:
        """Run one call; failures come back as error results, never as exceptions.

        The first three parameters are positional-only here so that ``ToolProxy.run_tool(name,
        args, session_context, ...)`` matches whatever it names them.

        Args:
            name: The registered tool name.
            arguments: The arguments object the client sent.
            session_context: The calling session (mode, workspace, id).
            tool_call_id: Id of this call; progress events carry it.
            timeout: Seconds, or None for the tool's default.
        """
        ...


class ToolProxyLike(Protocol):
    """The public API's ``ToolProxy`` / ``ToolManager``: names, specs and ``run_tool``."""

    def list_all_tools_name(self) -> list[str]:
        """The names of the tools this session may call."""
        ...

    def get_tool_spec(self, name: str) -> ToolSpec:
        """The spec of one of those tools."""
        ...

    async def run_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        session_context: SessionContext | None,
        /,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the public API's run_tool signature
    ) -> ToolResult:
        """Run one call (see :meth:`ToolProvider.run_tool`)."""
        ...


class ProxyProvider:
    """Serves a ``ToolProxy`` (or ``ToolManager``) as a :class:`ToolProvider`."""

    def __init__(self, proxy: ToolProxyLike) -> None:
        self.proxy = proxy

    def list_specs(self) -> list[ToolSpec]:
        """The proxy's tools, in its order."""
        return [self.proxy.get_tool_spec(name) for name in self.proxy.list_all_tools_name()]

    async def run_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        session_context: SessionContext | None,
        /,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the public API's run_tool signature
    ) -> ToolResult:
        """Forward to the proxy's ``run_tool``."""
        return await self.proxy.run_tool(
            name, arguments, session_context, tool_call_id=tool_call_id, timeout=timeout
        )


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
