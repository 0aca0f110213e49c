"""Patterns that someone else wrote (a model, a script, a client, an upstream server), matched in
linear time.

Python's ``re`` and ``fnmatch`` backtrack: ``(a+)+$`` over 30 ``a`` and a ``!``, or the glob
``*a*a*a*a*a*a*a*a*b`` over a 60-character name, holds the interpreter for minutes, and every
session of the process with it. Every pattern that did not come from this code base is compiled
here, by RE2 (``google-re2``), whose matching time is linear in the text
(docs/builtin_tools.md, "Regular expressions"; docs/security.md).

RE2's syntax is Python's without backreferences (``\\1``, ``(?P=name)``) and lookaround
(``(?=``, ``(?!``, ``(?<=``, ``(?<!``); such a pattern is refused with a :class:`ValueError`
that says so (https://github.com/google/re2/wiki/Syntax).
"""

from __future__ import annotations

from typing import Protocol

import re2

__all__ = ["LinearRegex", "compile_regex", "glob_regex"]


class LinearRegex(Protocol):
    """A compiled RE2 pattern: ``search`` and ``fullmatch`` as in ``re``, in linear time."""

    @property
    def programsize(self) -> int:
        """The size of the compiled program, in RE2 instructions: a match's worst case costs
        about this many steps for every character of the text."""

    def search(self, text: str) -> object | None:
        """A match anywhere in ``text``, or None."""

    def fullmatch(self, text: str) -> object | None:
        """A match of the whole of ``text``, or None."""


MAX_PATTERN_CHARS = 10_000  # longer patterns are refused before compiling
MAX_PROGRAM_BYTES = 8 * 1024 * 1024  # RE2's memory for one compiled pattern (its ``max_mem``)

_UNSUPPORTED = (
    ("(?=", "lookahead"),
    ("(?!", "negative lookahead"),
    ("(?<=", "lookbehind"),
    ("(?<!", "negative lookbehind"),
    ("(?P=", "a named backreference"),
)


def compile_regex(pattern: str, *, ignore_case: bool = False) -> LinearRegex:
    """Compile ``pattern`` (RE2 syntax) for linear-time matching.

    Args:
        pattern: The regular expression, as written by whoever sent it.
        ignore_case: Match letters without regard to case.

    Returns:
        The compiled pattern.

    Raises:
        ValueError: a pattern RE2 cannot compile, saying why: backreferences and lookaround
            are named as unsupported; a pattern over :data:`MAX_PATTERN_CHARS` characters.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(
            f"the regular expression is {len(pattern):,} characters long "
            f"(at most {MAX_PATTERN_CHARS:,})"
        )
    options = re2.Options()
    options.log_errors = False  # the error is raised here; RE2 would also print it to stderr
    options.case_sensitive = not ignore_case
    options.max_mem = MAX_PROGRAM_BYTES
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        raise ValueError(_explain(pattern, error)) from None


def _explain(pattern: str, error: re2.error) -> str:
    reason = error.args[0].decode(errors="replace") if error.args else str(error)
    for marker, feature in _UNSUPPORTED:
        if marker in pattern:
            reason = f"{feature} ({marker!r}) is not supported"
            break
    else:
        if "invalid escape sequence: \\" in reason and reason[-1:].isdigit():
            reason = f"backreferences ({reason.rsplit(' ', 1)[-1]!r}) are not supported"
    return (
        f"invalid regular expression {pattern!r}: {reason}; patterns use RE2 syntax "
        "(Python's without backreferences or lookaround)"
    )


def glob_regex(pattern: str) -> LinearRegex:
    """Compile a glob ``pattern`` (``/``-separated) to a pattern over whole paths or URIs.

    ``*`` matches within one segment (never ``/``), ``?`` one character but ``/``, ``[...]`` a
    character class (``[!...]`` its complement, never ``/``), and ``**`` any run of characters,
    ``/`` included (``**/`` also none at all). Use :meth:`LinearRegex.fullmatch`.

    Empty segments (``a//b``): a ``*`` that is a whole segment matches one or more characters,
    so ``a/*/b`` never matches ``a//b`` (which a server that reads ``//`` as ``/`` takes for
    ``a/b``, a path the pattern does not name); ``**`` spans them, as it spans any depth
    (an upstream URI nested in a gateway URI holds ``://``).

    Raises:
        ValueError: a character class RE2 cannot compile (``[z-a]``), saying why.
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            whole = pattern[i - 1 : i] in ("", "/") and pattern[i + 1 : i + 2] in ("", "/")
            out.append("[^/]+" if whole else "[^/]*")  # a segment of its own is never empty
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)  # a "]" right after "[" (or "[!") is literal
            body = pattern[i + 1 : end]
            negated = body.startswith("!")
            if negated:
                body = body[1:]
            body = body.replace("\\", "\\\\").replace("[", "\\[").replace("^", "\\^")
            out.append("[^/" + body + "]" if negated else "[" + body + "]")
            i = end + 1
        else:
            out.append(re2.escape(pattern[i]))
            i += 1
    options = re2.Options()
    options.log_errors = False
    options.dot_nl = True
    try:
        return re2.compile("".join(out), options)
    except re2.error as error:
        reason = error.args[0].decode(errors="replace") if error.args else str(error)
        raise ValueError(f"invalid glob pattern {pattern!r}: {reason}") from None
