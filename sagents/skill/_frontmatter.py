"""Splitting ``SKILL.md`` into YAML front matter and body, robustly.

The front matter is the block between a first line that is exactly ``---`` and the next line that
is exactly ``---`` (or YAML's ``...``), trailing spaces allowed. Only whole lines at column 0
close it, which is also where YAML itself ends a document, so a ``---`` inside a value (inline, in
a quoted string or an indented block scalar) never splits the file. A UTF-8 byte order mark is
dropped and CRLF / CR line endings become ``\\n`` before anything else.

YAML is read with PyYAML's safe loader, which keeps aliases as shared references; a document
whose aliases would expand to more than :data:`MAX_YAML_VALUES` values (a "billion laughs"), or
that refers to itself, is refused here, so that nothing downstream can blow it up by printing or
comparing it. Duplicated keys (which YAML forbids and PyYAML silently resolves to the last one)
are recorded with their lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = [
    "MAX_YAML_VALUES",
    "DuplicateKey",
    "FrontMatterError",
    "NonStringKey",
    "SplitMarkdown",
    "YamlMapping",
    "decode_text",
    "load_yaml_document",
    "load_yaml_mapping",
    "split_front_matter",
]

MAX_YAML_VALUES = 100_000  # values in a document once aliases are expanded

# libyaml's safe loader when PyYAML was built with it (same YAML 1.1 rules, several times faster)
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
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


@dataclass(frozen=True, kw_only=True, slots=True)
class DuplicateKey:
    """A mapping key given twice; PyYAML keeps the last value.

    Attributes:
        key: The key as written.
        first_line: 1-based file line of the first occurrence.
        line: 1-based file line of the repeated occurrence.
    """

    key: str
    first_line: int
    line: int


@dataclass(frozen=True, kw_only=True, slots=True)
class NonStringKey:
    """A mapping key that YAML reads as a non-string (``on`` is ``true`` in YAML 1.1).

    Attributes:
        key: The key as written (and as kept).
        line: 1-based file line.
    """

    key: str
    line: int


@dataclass(frozen=True, kw_only=True, slots=True)
class YamlMapping:
    """A YAML mapping and what was suspicious in it.

    Attributes:
        data: The mapping (string keys).
        duplicate_keys: Keys given more than once in one mapping, at any depth, in file order.
        non_string_keys: Keys that YAML 1.1 reads as something other than a string (``on``,
            ``yes``, ``1``, ``2024-01-01``), at any depth; they are kept as written, as strings.
    """

    data: dict[str, Any]
    duplicate_keys: tuple[DuplicateKey, ...] = ()
    non_string_keys: tuple[NonStringKey, ...] = ()


class _Loader(_LOADER):  # type: ignore[misc,valid-type]
    """The safe loader, recording duplicated keys (merge keys ``<<`` excluded) as it constructs.

    Scalar keys are always read as the string written (``on`` stays ``"on"``, not ``True``), and
    those YAML would have read otherwise are recorded.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[tuple[str, int, int]] = []
        self.non_string: list[tuple[str, int]] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            line = key_node.start_mark.line
            if key_node.tag != _STR_TAG:
                self.non_string.append((key_node.value, line))
                key_node.tag = _STR_TAG
            if key_node.value in seen:
                self.duplicates.append((key_node.value, seen[key_node.value], line))
            else:
                seen[key_node.value] = line
        result: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return result


def _check_expansion(document: Any) -> None:
    """Refuse a document that expands past :data:`MAX_YAML_VALUES` values or refers to itself.

    Shared (aliased) containers are measured once, so this is linear in the document's size
    as written, whatever its expanded size.
    """
    sizes: dict[int, int] = {}
    open_ids: set[int] = set()
    stack: list[Any] = [document]
    while stack:
        item = stack[-1]
        if not isinstance(item, (list, dict)) or id(item) in sizes:
            stack.pop()
            continue
        children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        if id(item) not in open_ids:
            open_ids.add(id(item))
            for child in children:
                if isinstance(child, (list, dict)) and id(child) not in sizes:
                    if id(child) in open_ids:
                        raise FrontMatterError("invalid YAML: an alias refers to itself")
                    stack.append(child)
            continue
        total = 1 + sum(sizes.get(id(child), 1) for child in children)
        if total > MAX_YAML_VALUES:
            raise FrontMatterError(
                f"invalid YAML: more than {MAX_YAML_VALUES} values once aliases are expanded "
                "(an alias bomb?); a skill's metadata needs far fewer"
            )
        sizes[id(item)] = total
        open_ids.discard(id(item))
        stack.pop()


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


def load_yaml_document(source: str, *, first_line: int = 1) -> YamlMapping:
    """Parse YAML that must be a mapping (PyYAML's safe loader).

    An empty document is an empty mapping. Scalar keys are kept as the strings written, and
    those YAML 1.1 reads as something else (``on``, ``1``) are returned in ``non_string_keys``;
    duplicated keys are returned, not refused.

    Args:
        source: The YAML text.
        first_line: The file line the text starts on, so that reported lines match the file.

    Raises:
        FrontMatterError: Invalid YAML (a sequence or mapping as a key, too), a document that
            is not a mapping, or aliases that expand past :data:`MAX_YAML_VALUES` values or refer to
            themselves.
    """
    loader = _Loader(source)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = None if mark is None else mark.line + first_line
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise FrontMatterError(f"invalid YAML: {problem}", line=line) from error
    finally:
        loader.dispose()
    _check_expansion(data)
    if data is None:
        return YamlMapping(data={})
    if not isinstance(data, dict):
        raise FrontMatterError(
            f"must be a mapping of keys to values, not a YAML {type(data).__name__}"
        )
    bad = [key for key in data if not isinstance(key, str)]
    if bad:
        raise FrontMatterError(f"keys must be strings, not {bad[0]!r}")
    duplicates = tuple(
        DuplicateKey(key=key, first_line=first + first_line, line=line + first_line)
        for key, first, line in loader.duplicates
    )
    non_string = tuple(
        NonStringKey(key=key, line=line + first_line) for key, line in loader.non_string
    )
    return YamlMapping(data=data, duplicate_keys=duplicates, non_string_keys=non_string)


def load_yaml_mapping(source: str, *, first_line: int = 1) -> dict[str, Any]:
    """Parse YAML that must be a mapping with string keys; see :func:`load_yaml_document`.

    Raises:
        FrontMatterError: As :func:`load_yaml_document`.
    """
    return load_yaml_document(source, first_line=first_line).data
