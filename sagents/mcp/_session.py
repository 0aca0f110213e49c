"""Open one MCP client session on any transport, with a bounded protocol negotiation.

The SDK's ``mode="auto"`` probe waits up to 10 s for an answer to ``server/discover``; a legacy
server that ignores unknown requests would stall every connect that long. :func:`negotiate`
follows the SDK's policy (``mcp.client._probe``: discover at the newest modern version, fall back
to ``initialize`` on anything that is not positive modern evidence, re-probe once on ``-32022``)
with the probe bounded by ``ServerSettings.discover_timeout``.

The read stream of every stream transport is watched, so that the supervisor learns at once
when the server's side ends (a dead stdio server, a dropped SSE stream), and the write stream
records whether the current call's request was handed to the transport at all (a request that
never was can be retried safely).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import httpx2
import mcp_types as types
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.session import MessageHandlerFnT
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.methods import validate_server_result
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import ValidationError

from sagents.mcp._ext_types import TASKS_EXTENSION
from sagents.mcp._params import ServerParams, SseServerParameters, StreamableHttpServerParameters
from sagents.mcp._sandboxed import open_sandboxed_stdio_transport
from sagents.mcp._settings import ServerSettings
from sagents.mcp._stdio import StdioProcess, open_stdio_transport
from sagents.mcp._streams import ReadStream, WriteStream
from sagents.mcp._tasks_client import TasksClient, TaskStatuses

__all__ = [
    "CLIENT_INFO",
    "OpenedSession",
    "SendMark",
    "ToolListFilter",
    "negotiate",
    "open_session",
    "track_send",
]

CLIENT_INFO = types.Implementation(name="sagents", version="0.1.0")


class SendMark:
    """Set by the write stream when the current call's request was handed to the transport."""

    def __init__(self) -> None:
        self.sent = False


_CURRENT_MARK: ContextVar[SendMark | None] = ContextVar("sagents_mcp_send_mark", default=None)


class ToolListFilter:
    """Drops, from ``tools/list`` answers, each tool that fails the SDK's validation alone.

    The SDK validates a listing as a whole, so one tool with, say, a non-object root schema
    would cost every other tool of the server (docs/mcp.md, "Tools"). The filter checks
    each tool separately against the negotiated version's ``ListToolsResult`` and keeps the
    rejected ones, with reasons, in :attr:`rejected` for the server's status.
    """

    def __init__(self) -> None:
        self.version: str | None = None
        self.rejected: dict[str, str] = {}
        self._pending: set[types.RequestId] = set()

    def note_request(self, message: types.JSONRPCMessage) -> None:
        """Remember the id of an outgoing ``tools/list`` request."""
        if isinstance(message, types.JSONRPCRequest) and message.method == "tools/list":
            self._pending.add(message.id)

    def filter(self, item: SessionMessage) -> SessionMessage:
        """Return ``item``, without the invalid tools when it answers ``tools/list``."""
        message = item.message
        if not isinstance(message, types.JSONRPCResponse) or message.id not in self._pending:
            return item
        self._pending.discard(message.id)
        tools = message.result.get("tools")
        if not isinstance(tools, list):
            return item
        version = self.version or "2025-11-25"
        kept: list[Any] = []
        for tool in tools:
            try:
                validate_server_result("tools/list", version, {**message.result, "tools": [tool]})
            except ValidationError as error:
                name = tool.get("name") if isinstance(tool, dict) else None
                first = error.errors()[0]
                where = ".".join(str(p) for p in first["loc"][2:]) or "tool"
                self.rejected[str(name)] = f"invalid tool definition at {where}: {first['msg']}"
                continue
            except (KeyError, ValueError):
                return item  # a version without a tools/list surface: leave it to the SDK
            kept.append(tool)
        if len(kept) == len(tools):
            return item
        result = {**message.result, "tools": kept}
        response = types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)
        return SessionMessage(response, metadata=item.metadata)


class _WatchedRead:
    """A read stream that calls ``on_end`` once when the transport's side ends."""

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        on_end: Callable[[], None],
        tools: ToolListFilter,
    ) -> None:
        self._inner = inner
        self._on_end = on_end
        self._tools = tools

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise
        if isinstance(item, SessionMessage):
            return self._tools.filter(item)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        # receive(), inlined: one frame less per message.
        try:
            item = await self._inner.receive()
        except anyio.EndOfStream:
            self._on_end()
            raise StopAsyncIteration from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise
        if isinstance(item, SessionMessage):
            return self._tools.filter(item)
        return item

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


class _MarkedWrite:
    """A write stream that marks the calling task's :class:`SendMark` when a request goes out."""

    def __init__(self, inner: WriteStream[SessionMessage], tools: ToolListFilter) -> None:
        self._inner = inner
        self._tools = tools

    async def send(self, item: SessionMessage, /) -> None:
        self._tools.note_request(item.message)
        mark = _CURRENT_MARK.get()
        if mark is not None and isinstance(item.message, types.JSONRPCRequest):
            mark.sent = True
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


class _SendTracking:
    """The context manager of :func:`track_send` (a class: no generator per call)."""

    __slots__ = ("_mark", "_token")

    def __init__(self) -> None:
        self._mark = SendMark()

    def __enter__(self) -> SendMark:
        self._token = _CURRENT_MARK.set(self._mark)
        return self._mark

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        _CURRENT_MARK.reset(self._token)


def track_send() -> _SendTracking:
    """Within the block, note whether the current task hands a request to the transport."""
    return _SendTracking()


def _supported(data: Any) -> list[str] | None:
    try:
        return types.UnsupportedProtocolVersionErrorData.model_validate(data).supported
    except ValidationError:
        return None


async def negotiate(session: ClientSession, *, discover_timeout: float) -> None:
    """Negotiate the protocol generation: ``server/discover`` (2026-07-28), else ``initialize``.

    Args:
        session: An entered session that has not negotiated yet.
        discover_timeout: Seconds to wait for the discover answer before falling back.

    Raises:
        MCPError: the server is modern-only with no version in common, or the handshake failed.
        RuntimeError: the server answered ``initialize`` with an unknown protocol version.
    """
    version = LATEST_MODERN_VERSION
    for attempt in range(2):
        raw: dict[str, Any] | None = None
        error: MCPError | None = None
        with anyio.move_on_after(discover_timeout):
            try:
                raw = await session.send_discover(version)
            except MCPError as exc:
                error = exc
        if error is not None and error.code == UNSUPPORTED_PROTOCOL_VERSION:
            supported = _supported(error.error.data)
            mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in (supported or ())]
            if mutual and attempt == 0:
                version = mutual[-1]
                continue
            if supported is not None and not any(
                v in HANDSHAKE_PROTOCOL_VERSIONS for v in supported
            ):
                raise error
        if raw is not None:
            try:
                result = types.DiscoverResult.model_validate(raw)
            except ValidationError:
                result = None
            if result is not None and any(
                v in result.supported_versions for v in MODERN_PROTOCOL_VERSIONS
            ):
                session.adopt(result)
                return
        try:
            await session.initialize()
        except MCPError as exc:
            # -32022 here means a late discover locked the server modern: re-probe once.
            supported = (
                _supported(exc.error.data) if exc.code == UNSUPPORTED_PROTOCOL_VERSION else None
            )
            mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in (supported or ())]
            if not mutual or attempt != 0:
                raise
            version = mutual[-1]
            continue
        return
    raise RuntimeError("protocol negotiation did not settle")  # pragma: no cover


@dataclass(frozen=True, kw_only=True)
class OpenedSession:
    """A negotiated session and, for stdio servers, the server's pid."""

    session: ClientSession
    pid: int | None = None
    tool_filter: ToolListFilter | None = None
    task_statuses: TaskStatuses | None = None
    """The session's ``notifications/tasks`` (:func:`sagents.mcp._tasks_client.resolve_task`)."""


async def open_session(
    stack: AsyncExitStack,
    params: ServerParams,
    settings: ServerSettings,
    *,
    log_path: Path,
    message_handler: MessageHandlerFnT,
    on_end: Callable[[], None],
    on_process: Callable[[StdioProcess], None] | None = None,
    name: str = "server",
) -> OpenedSession:
    """Connect to ``params`` and negotiate; every resource is entered on ``stack``.

    Args:
        stack: Owns the transport and the session; closing it ends the connection (for stdio,
            the whole process group).
        params: Where the server is.
        settings: ``discover_timeout`` bounds the protocol probe.
        log_path: The stdio server's stderr log.
        message_handler: Receives server notifications (``tools/list_changed``, ...).
        on_end: Called once when the transport's read side ends (the server died or hung up).
        on_process: Called with a stdio server's process as soon as it runs (before the
            handshake), so that a failed start can be explained by its exit status and stderr.
        name: The server's registered name (a sandboxed server's home is named after it).

    Raises:
        OSError, MCPError, httpx2.HTTPError, RuntimeError: the server could not be reached or
            the handshake failed (the caller turns these into a failed status).
    """
    statuses = TaskStatuses()
    if not isinstance(
        params, StdioServerParameters | SseServerParameters | StreamableHttpServerParameters
    ):
        client = await stack.enter_async_context(
            Client(
                params,
                message_handler=message_handler,
                client_info=CLIENT_INFO,
                cache=None,
                extensions=[TasksClient(statuses)],
            )
        )
        return OpenedSession(session=client.session, task_statuses=statuses)
    pid: int | None = None
    read: ReadStream[SessionMessage | Exception]
    write: WriteStream[SessionMessage]
    if isinstance(params, StdioServerParameters):
        transport = (
            open_sandboxed_stdio_transport(
                name,
                params,
                settings.sandbox,
                log_path=log_path,
                on_start=on_process,
                redactor=settings.redactor,
            )
            if settings.sandbox is not None
            else open_stdio_transport(
                params, log_path=log_path, on_start=on_process, redactor=settings.redactor
            )
        )
        read, write, process = await stack.enter_async_context(transport)
        pid = process.pid
    elif isinstance(params, SseServerParameters):
        read, write = await stack.enter_async_context(
            sse_client(
                params.url,
                headers=params.effective_headers,
                timeout=params.timeout,
                sse_read_timeout=params.sse_read_timeout,
            )
        )
    else:
        auth = params.auth
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=params.effective_headers,
                timeout=httpx2.Timeout(params.timeout, read=None),
                auth=auth if auth is None or isinstance(auth, httpx2.Auth) else auth(),
            )
        )
        read, write = await stack.enter_async_context(
            streamable_http_client(params.url, http_client=http)
        )
    tool_filter = ToolListFilter()
    session = await stack.enter_async_context(
        ClientSession(
            _WatchedRead(read, on_end, tool_filter),
            _MarkedWrite(write, tool_filter),
            message_handler=message_handler,
            client_info=CLIENT_INFO,
            # long calls of an upstream offering the Tasks extension are polled, not held open
            extensions={TASKS_EXTENSION: {}},
            result_claims={TASKS_EXTENSION: TasksClient().claims()},
            notification_bindings=statuses.notifications(),
        )
    )
    await negotiate(session, discover_timeout=settings.discover_timeout)
    tool_filter.version = session.protocol_version
    return OpenedSession(session=session, pid=pid, tool_filter=tool_filter, task_statuses=statuses)
