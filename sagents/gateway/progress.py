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
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning

from sagents.gateway.seams import ScriptProgressLike, ToolProgressLike

__all__ = ["ProgressForwarder"]

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
        meta: Mapping[str, Any] = ctx.meta or {}
        self._has_token = meta.get("progress_token", meta.get("progressToken")) is not None
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
