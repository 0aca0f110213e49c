"""Forwarding a call's progress events to the MCP client (docs/gateway.md, "Progress").

``script.progress`` and ``tool_progress`` events become ``notifications/progress`` for the
request's progress token (MCP spec 2025-11-25, "Progress"): values strictly increase, and the
gateway drains what was emitted before it answers, so nothing arrives after the result.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import anyio
import mcp_types as mt
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagents.gateway._seams import ScriptProgressLike, ToolProgressLike

__all__ = ["ProgressForwarder", "has_progress_token", "progress_listened"]

# MCP spec 2025-06-18, "Logging": the RFC 5424 levels, least severe first.
_LOG_LEVELS: tuple[mt.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_PROGRESS_LOG_LEVELS = frozenset({"info", "warning"})  # the levels tool_progress text goes out at


def has_progress_token(ctx: ServerRequestContext[Any, Any]) -> bool:
    """True when the request carries a progress token (``_meta.progressToken``)."""
    meta: Mapping[str, Any] = ctx.meta or {}
    return meta.get("progress_token", meta.get("progressToken")) is not None


def progress_listened(ctx: ServerRequestContext[Any, Any], *, logs_requested: bool) -> bool:
    """Whether anything a :class:`ProgressForwarder` sends for this request reaches the client.

    True when the request carries a progress token; when it came in process (the SDK's direct
    dispatcher hands progress to the caller's callback, and carries no token); when
    ``tool_progress`` text would go out as log messages: on handshake-era connections whose
    client asked for log messages (``logs_requested``: it sent ``logging/setLevel``), on
    2026-07-28 ones when the request opted in to ``info`` or ``warning`` (MCP 2026-07-28,
    "Logging": the per-request log level).

    Args:
        ctx: The request's context.
        logs_requested: The client set a log level on this (handshake-era) connection.
    """
    if has_progress_token(ctx) or _in_process(ctx):
        return True
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return bool(allowed_log_levels(ctx.protocol_version, ctx.meta) & _PROGRESS_LOG_LEVELS)
    return logs_requested


def _in_process(ctx: ServerRequestContext[Any, Any]) -> bool:
    # The SDK exposes the dispatch context's transport only on its private request channel;
    # when it cannot be read, the request counts as in process (listened: the safe side).
    outbound = getattr(ctx.session, "_request_outbound", None)
    transport = getattr(outbound, "transport", None)
    return getattr(transport, "kind", "direct") == "direct"


class ProgressForwarder:
    """Turns a call's events into ``notifications/progress`` for the request's token.

    Values strictly increase: a script's ``done`` (with its ``total``) or call count when it
    advances (the first value is sent as it is, 0 included), otherwise halfway from the last
    value to the next whole number (0.5, 0.75, ...), so whole counts still advance after it; a
    ``tool_progress`` text adds one and is the message. Without a progress token,
    ``tool_progress`` text also goes out as a logging notification (``logger="tool_progress"``)
    on handshake-era connections (on 2026-07-28 ones only when the request opted in to logs, as
    the SDK enforces).
    """

    def __init__(
        self, ctx: ServerRequestContext[Any, Any], *, log_level: mt.LoggingLevel = "debug"
    ) -> None:
        self._ctx = ctx
        self._min_log = _LOG_LEVELS.index(log_level)
        self._has_token = has_progress_token(ctx)
        self._last: float | None = None  # nothing sent yet

    async def forward(self, events: MemoryObjectReceiveStream[object]) -> None:
        """Send every event of ``events`` until it ends or the caller cancels."""
        async for event in events:
            await self.send(event)

    async def drain(self, events: MemoryObjectReceiveStream[object]) -> None:
        """Send what was emitted before the result, then close (nothing after the result)."""
        with events:
            while True:
                try:
                    event = events.receive_nowait()
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    return
                await self.send(event)

    async def send(self, event: object) -> None:
        """Send one event (unknown kinds and empty texts send nothing)."""
        if isinstance(event, ScriptProgressLike):
            if event.done is not None and event.total:
                candidate, total = float(event.done), float(event.total)
            else:
                candidate, total = float(event.calls), None
            text = f"{event.calls} call{'' if event.calls == 1 else 's'}, {event.failures} failed"
            if event.message:
                text += f": {event.message}"
            await self._progress(candidate, total, text)
        elif isinstance(event, ToolProgressLike):
            if not event.text:
                return
            await self._progress((self._last or 0.0) + 1, None, event.text)
            if not self._has_token:
                await self._log(event.text, event.stream)

    async def _progress(self, candidate: float, total: float | None, message: str) -> None:
        # A no-op unless the client asked for progress (a token on the wire, or an in-process
        # client's callback, which carries no token).
        last = self._last
        if last is None or candidate > last:
            value = candidate
        else:
            value, total = (last + math.floor(last) + 1) / 2, None
            if value <= last:  # past float precision
                value = math.nextafter(last, math.inf)
        self._last = value
        await self._ctx.session.report_progress(value, total, message)

    async def _log(self, text: str, stream: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            level: mt.LoggingLevel = "warning" if stream == "stderr" else "info"
            if _LOG_LEVELS.index(level) < self._min_log:
                return  # below the level the client set with logging/setLevel
            await self._ctx.session.send_log_message(
                level, text, logger="tool_progress", related_request_id=self._ctx.request_id
            )
