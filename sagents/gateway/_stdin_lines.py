"""Line-by-line reading of the gateway's stdin with a cap on one line (docs/gateway.md).

A client that never sends a newline (``sagents serve < /dev/zero``) must not make one line grow
until the process is killed for memory. :data:`MAX_LINE_BYTES` is that cap and
:data:`OVERLONG_LINE` (not JSON, so the SDK reports it as a parse error and goes on) what takes
the place of a longer line; the gateway's stdio transport
(:mod:`sagents.gateway._stdio_transport`) applies them as it reads. :class:`BoundedLines` does
the same over a blocking binary stream read in a worker thread, for an ``mcp`` SDK
``stdio_server(stdin=...)`` of an embedding application.
"""

from __future__ import annotations

from typing import BinaryIO

import anyio.to_thread

__all__ = ["MAX_LINE_BYTES", "OVERLONG_LINE", "BoundedLines"]

MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest JSON-RPC line (bytes, newline excluded) the gateway reads from stdin."""

OVERLONG_LINE = "<line dropped: longer than the gateway's line limit>\n"
"""What :class:`BoundedLines` yields in place of a line over its cap."""

_CHUNK = 64 * 1024


class BoundedLines:
    """An async iterator of the text lines of a binary stream, each at most ``max_bytes``.

    Args:
        raw: The byte stream (e.g. ``sys.stdin.buffer``), read in a worker thread.
        max_bytes: The cap of one line in bytes (newline excluded); at least 1.

    Raises:
        ValueError: when ``max_bytes`` is below 1.

    Lines are decoded as UTF-8 with invalid bytes replaced; each keeps its newline.
    """

    def __init__(self, raw: BinaryIO, *, max_bytes: int = MAX_LINE_BYTES) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        self._raw = raw
        self._max = max_bytes

    def __aiter__(self) -> BoundedLines:
        return self

    async def __anext__(self) -> str:
        line = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
        if line is None:
            raise StopAsyncIteration
        return line

    def _read_line(self) -> str | None:
        data = self._raw.readline(self._max + 1)
        if not data:
            return None
        if len(data) > self._max and not data.endswith(b"\n"):
            while True:  # skip the rest of the line without keeping it
                chunk = self._raw.readline(_CHUNK)
                if not chunk or chunk.endswith(b"\n"):
                    return OVERLONG_LINE
        return data.decode("utf-8", errors="replace")
