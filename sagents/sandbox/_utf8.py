"""Decode a byte window of a growing log without ever splitting a UTF-8 character.

``read_background_output_range`` reads bytes at an offset; the window's end may fall inside a
multi-byte character. :func:`decode_utf8_window` holds back an incomplete trailing sequence (so
the next read starts on the character's first byte) and replaces invalid bytes with U+FFFD, so
that one bad byte can never stall a reader.
"""

from __future__ import annotations

__all__ = ["decode_utf8_window"]


def _sequence_length(lead: int) -> int:
    """Length of the UTF-8 sequence that starts with ``lead``; 0 when ``lead`` cannot start one."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _incomplete_tail_start(data: bytes) -> int | None:
    """Index where an incomplete (but so far valid-looking) trailing sequence starts, or None."""
    for back in range(1, min(4, len(data)) + 1):
        i = len(data) - back
        byte = data[i]
        if 0x80 <= byte <= 0xBF:
            continue  # a continuation byte: keep looking for its lead
        need = _sequence_length(byte)
        if need > back:
            return i
        return None
    return None


def decode_utf8_window(data: bytes, max_bytes: int, *, final: bool) -> tuple[str, int]:
    """Decode at most about ``max_bytes`` of ``data`` without ending inside a character.

    Args:
        data: Bytes from the current offset; may be longer than ``max_bytes`` (up to 3 extra
            bytes let a character that starts inside the window be completed when nothing else
            would fit).
        max_bytes: The caller's budget in bytes (>= 1).
        final: True when no more bytes will ever follow ``data`` (the writer has finished): an
            incomplete trailing sequence is then decoded (as U+FFFD) instead of held back.

    Returns:
        ``(text, consumed)``: the decoded text and how many bytes of ``data`` it covers. The
        next read starts at ``offset + consumed``. ``consumed`` is 0 only when ``data`` is empty
        or holds just the start of a character whose remaining bytes have not been written yet.

    Raises:
        ValueError: when ``max_bytes`` < 1.
    """
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be >= 1, got {max_bytes!r}")
    window = data[:max_bytes]
    tail = _incomplete_tail_start(window)
    if tail is None:
        cut = len(window)
    elif final and len(data) == len(window):
        cut = len(window)  # the writer is done: the sequence will never complete
    elif tail > 0:
        cut = tail  # hold the partial character back; the next read starts on its lead byte
    elif len(data) >= _sequence_length(window[0]):
        cut = _sequence_length(window[0])  # one character wider than the budget: return it
    else:
        cut = 0  # only the start of a character so far: wait for the rest
    return data[:cut].decode("utf-8", errors="replace"), cut
