"""Show text that a model, a tool or a script wrote to a person exactly as it was written.

Text from a model (a run_script ``description``, a script, tool arguments) or from a tool (names,
errors) reaches a person in terminal prompts, MCP elicitation messages and logs. It must not be
able to style itself (Rich markup such as ``[bold red]``) or drive the terminal (ANSI escape
sequences, carriage returns that overwrite a line, bidirectional overrides that reorder it). The
output layer passes such text through :func:`printable` and never through a markup parser: Rich
output uses :func:`literal_text` (a ``rich.text.Text``, which is never parsed as markup).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["LiteralFormatter", "literal_text", "printable", "quoted_line"]

# C0 controls but tab and newline, DEL, C1 controls, the Unicode bidirectional controls
# (embeddings, overrides, isolates, marks) that can make a line read differently than it runs,
# and lone surrogates (undecodable file names), which no UTF-8 output can carry.
_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = True) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``).

    Args:
        text: Any text.
        newlines: Keep newlines as line breaks (else shown as ``\\x0a``). Tabs are kept.

    Returns:
        Text that prints as the characters it holds; markup characters (``[``, ``]``) are kept
        as they are, so the caller must not hand the result to a markup parser.
    """
    escaped = _UNPRINTABLE.sub(_escape, text)
    return escaped if newlines else escaped.replace("\n", "\\x0a")


def quoted_line(text: str) -> str:
    """``text`` in double quotes on one line: its quotes, backslashes, newlines and control
    characters shown as escapes, so that nothing in it can start a line of its own or close
    the quotes (model text placed inside a frame of ours: an approval's description, a
    questionnaire's title)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + printable(escaped, newlines=False) + '"'


def literal_text(text: str, *, style: str = "") -> Text:
    """A Rich ``Text`` that shows ``text`` literally (no markup, control characters escaped)."""
    from rich.text import Text

    return Text(printable(text), style=style)


class LiteralFormatter(logging.Formatter):
    """A log formatter whose messages show their arguments literally: control characters
    escaped, one message per line (a newline inside a message cannot forge another log line).
    A traceback attached to the record keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        """Format the message as usual, then escape what is not printable."""
        return printable(super().formatMessage(record), newlines=False)
