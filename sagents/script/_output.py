"""A run's output: drained as it comes, capped, and turned into the model's text
(docs/run_script.md).

:class:`OutputCapture` takes chunks of stdout and stderr in arrival order, writes them straight to
the records' ``output.txt`` and keeps only what the model text needs: the head and tail of the
decoded text, and the tail of stderr (for the error). Memory stays bounded whatever the script
prints; past ``max_bytes`` it reports the cap so the runner ends the run.
"""

from __future__ import annotations

import codecs
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "ERROR_TAIL_CHARS",
    "MAX_MODEL_OUTPUT_CHARS",
    "OutputCapture",
    "RunSummary",
    "format_model_text",
    "format_summary_line",
]

MAX_MODEL_OUTPUT_CHARS = 20_000  # printed output shown to the model before head+tail cutting
ERROR_TAIL_CHARS = 2_000  # last characters of stderr shown on an error


class _TailText:
    """The last ``limit`` characters of a growing text."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._parts: deque[str] = deque()
        self._size = 0

    def add(self, text: str) -> None:
        self._parts.append(text)
        self._size += len(text)
        while self._parts and self._size - len(self._parts[0]) >= self.limit:
            self._size -= len(self._parts.popleft())

    def text(self) -> str:
        return "".join(self._parts)[-self.limit :] if self.limit else ""


@dataclass(kw_only=True)
class OutputCapture:
    """Collects a run's output.

    Args:
        write: Where every byte goes as it arrives (the records' ``output.txt``).
        max_bytes: Total output cap (``scripts.maxOutputBytes``).
        max_chars: Characters shown to the model before cutting to head and tail.
    """

    write: Callable[[bytes], None]
    max_bytes: int = 32 * 1024 * 1024
    max_chars: int = MAX_MODEL_OUTPUT_CHARS
    total_bytes: int = 0
    total_chars: int = 0
    over_limit: bool = False
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )
    _err_decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )
    _head: list[str] = field(default_factory=list)
    _head_chars: int = 0
    _tail: _TailText | None = None
    _stderr_tail: _TailText = field(default_factory=lambda: _TailText(ERROR_TAIL_CHARS))

    def __post_init__(self) -> None:
        self._tail = _TailText(self.max_chars // 2)

    def feed(self, data: bytes, *, stream: str = "stdout") -> bool:
        """Take one chunk. Returns True once the total passed ``max_bytes`` (the chunk is cut)."""
        if self.over_limit:
            return True
        room = self.max_bytes - self.total_bytes
        if len(data) > room:
            data = data[:room]
            self.over_limit = True
        self.total_bytes += len(data)
        if data:
            self.write(data)
            self._add_text(self._decoder.decode(data))
            if stream == "stderr":
                self._stderr_tail.add(self._err_decoder.decode(data))
        return self.over_limit

    def _add_text(self, text: str) -> None:
        self.total_chars += len(text)
        if self._head_chars < self.max_chars:
            piece = text[: self.max_chars - self._head_chars]
            self._head.append(piece)
            self._head_chars += len(piece)
        assert self._tail is not None
        self._tail.add(text)

    def finish(self) -> None:
        """Flush the decoders (a trailing partial character becomes U+FFFD)."""
        self._add_text(self._decoder.decode(b"", final=True))
        self._stderr_tail.add(self._err_decoder.decode(b"", final=True))

    @property
    def truncated(self) -> bool:
        """True when the model sees head and tail only (or the cap cut the output)."""
        return self.total_chars > self.max_chars or self.over_limit

    def model_output(self) -> str:
        """The printed output as the model sees it: whole, or head + marker + tail."""
        head = "".join(self._head)
        if self.total_chars <= self.max_chars:
            return head
        assert self._tail is not None
        keep = self.max_chars // 2
        omitted = self.total_chars - keep - min(self._tail.limit, self.total_chars)
        return (
            head[:keep]
            + f"\n[... {omitted} characters cut; the full output is in output.txt ...]\n"
            + self._tail.text()
        )

    def stderr_tail(self) -> str:
        """The last characters written to stderr (where a traceback ends up)."""
        return self._stderr_tail.text()


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """What the summary line states."""

    status: str
    calls: int
    failed: int
    duration_s: float
    records_dir: str | None
    exit_code: int | None = None


def format_summary_line(summary: RunSummary) -> str:
    """``run_script ok: 501 calls, 0 failed, 2.4 s, records .agent/scripts/<id>/``."""
    calls = f"{summary.calls} call" + ("" if summary.calls == 1 else "s")
    parts = [calls, f"{summary.failed} failed", f"{summary.duration_s:.1f} s"]
    if summary.status == "error" and summary.exit_code is not None:
        parts.insert(0, f"exit code {summary.exit_code}")
    if summary.records_dir:
        parts.append(f"records {summary.records_dir}")
    return f"run_script {summary.status}: " + ", ".join(parts)


def format_model_text(
    summary: RunSummary, output: str, *, error: str | None = None, note: str | None = None
) -> str:
    """The text the model receives: the summary line, a note, the output, the error's tail.

    Args:
        summary: For the first line.
        output: The printed output as :meth:`OutputCapture.model_output` gives it.
        error: The last part of the error (stderr tail), shown unless the output already ends
            with it.
        note: One line on why the run ended (timeout, output cap, refusal), if any.
    """
    lines = [format_summary_line(summary)]
    if note:
        lines.append(note)
    text = "\n".join(lines)
    if output:
        text += "\n" + output.rstrip("\n")
    if error and error.strip() and error.strip() not in output[-len(error) - 200 :]:
        text += "\n[error, last part]\n" + error.rstrip("\n")
    return text
