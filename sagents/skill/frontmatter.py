"""Splitting ``SKILL.md`` into YAML front matter and body, robustly.

The front matter is the block between a first line that is exactly ``---`` and the next line that
is exactly ``---`` (or YAML's ``...``), trailing spaces allowed. Only whole lines at column 0
close it, which is also where YAML itself ends a document, so a ``---`` inside a value (inline, in
a quoted string or an indented block scalar) never splits the file. A UTF-8 byte order mark is
dropped and CRLF / CR line endings become ``\\n`` before anything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = [
    "FrontMatterError",
    "SplitMarkdown",
    "decode_text",
    "load_yaml_mapping",
    "split_front_matter",
]

# libyaml's safe loader when PyYAML was built with it (same YAML 1.1 rules, several times faster)
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN = re.compile(r"---[ \t]*")
_CLOSE = re.compile(r"(?:---|\.\.\.)[ \t]*")


class FrontMatterError(ValueError):
    """The front matter cannot be read. ``line`` is 1-based in the file, when known."""

    def __init__(self, reason: str, *, line: int | None = None) -> None:
        super().__init__(reason if line is None else f"{reason} (line {line})")
        self.reason = reason
        self.line = line


@dataclass(frozen=True, kw_only=True, slots=True)
class SplitMarkdown:
    """A ``SKILL.md`` split in two.

    Attributes:
        front_matter: The YAML text between the delimiters, or ``None`` when the file has none.
        body: Everything after the closing delimiter (the whole text when there is no front
            matter), leading blank lines removed.
    """

    front_matter: str | None
    body: str


def decode_text(data: bytes) -> str:
    """Decode UTF-8 (a leading BOM dropped) and normalise line endings to ``\\n``.

    Raises:
        FrontMatterError: The bytes are not UTF-8 (the reason names the byte offset).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise FrontMatterError(f"not valid UTF-8 at byte {error.start}") from error
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_front_matter(text: str) -> SplitMarkdown:
    """Split normalised Markdown (see :func:`decode_text`) into front matter and body.

    Raises:
        FrontMatterError: The file opens a front matter block that is never closed.
    """
    lines = text.split("\n")
    if not lines or not _OPEN.fullmatch(lines[0]):
        return SplitMarkdown(front_matter=None, body=text)
    for index in range(1, len(lines)):
        if _CLOSE.fullmatch(lines[index]):
            front = "".join(line + "\n" for line in lines[1:index])
            body = "\n".join(lines[index + 1 :]).lstrip("\n")
            return SplitMarkdown(front_matter=front, body=body)
    raise FrontMatterError("the front matter opened by '---' on line 1 is never closed", line=1)


def load_yaml_mapping(source: str, *, first_line: int = 1) -> dict[str, Any]:
    """Parse YAML that must be a mapping with string keys (PyYAML's safe loader).

    An empty document is an empty mapping.

    Args:
        source: The YAML text.
        first_line: The file line the text starts on, so that reported lines match the file.

    Raises:
        FrontMatterError: Invalid YAML, or a document that is not a mapping, or a key that is
            not a string.
    """
    try:
        data = yaml.load(source, Loader=_LOADER)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = None if mark is None else mark.line + first_line
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise FrontMatterError(f"invalid YAML: {problem}", line=line) from error
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FrontMatterError(
            f"must be a mapping of keys to values, not a YAML {type(data).__name__}"
        )
    bad = [key for key in data if not isinstance(key, str)]
    if bad:
        raise FrontMatterError(f"keys must be strings, not {bad[0]!r}")
    return data
