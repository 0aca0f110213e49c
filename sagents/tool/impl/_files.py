"""The built-in file tools on the sandbox's file API (docs/builtin_tools.md).

``file_read``, ``file_write``, ``file_update``, ``list_dir``, ``glob`` and ``grep`` never touch
the host filesystem: every access goes through the session's
:class:`~sagents.sandbox.Sandbox` (which may be remote), so confinement to the workspace
(``..`` and symlinks out are refused with ``path_not_allowed``) and atomic writes are the
sandbox's. Missing files give ``file_not_found``, binary files ``binary_file``, files over the
size cap ``file_too_large``; every cap that cuts a result says so in the result.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

import anyio

from sagents.core._result import TextContent, ToolResult
from sagents.errors import (
    BinaryFileError,
    EditAmbiguousError,
    EditNotFoundError,
    FileTooLargeError,
    FileToolError,
)
from sagents.sandbox import Sandbox
from sagents.sandbox._patterns import LinearRegex, compile_regex, glob_regex
from sagents.tool.impl._settings import BuiltinSettings

__all__ = ["FileTools", "decode_text", "is_binary"]

_SNIFF_BYTES = 8192


def is_binary(data: bytes) -> bool:
    """True when ``data`` looks binary: a NUL byte in its first 8 KiB, or more than 10 % of
    that window not decodable as UTF-8."""
    window = data[:_SNIFF_BYTES]
    if b"\x00" in window:
        return True
    try:
        window.decode()
        return False
    except UnicodeDecodeError as error:
        if error.start >= len(window) - 3:
            return False  # the window ends inside a character
    bad = window.decode(errors="replace").count("\ufffd")
    return bad * 10 > len(window)


def decode_text(data: bytes, path: str) -> str:
    """Decode a text file (UTF-8; stray invalid bytes become U+FFFD).

    Raises:
        BinaryFileError: when :func:`is_binary` says the content is binary.
    """
    if is_binary(data):
        raise BinaryFileError(
            f"{path!r} is a binary file ({len(data):,} bytes); this tool reads text only",
            hint="use execute_shell_command with a suitable program (xxd, file, ...) instead",
            details={"path": path},
        )
    return data.decode(errors="replace")


@dataclass(frozen=True, kw_only=True)
class _Edit:
    old_text: str
    new_text: str
    replace_all: bool


class FileTools:
    """Implementations of the six file tools over one sandbox per call.

    Args:
        settings: Caps and defaults.
    """

    def __init__(self, settings: BuiltinSettings) -> None:
        self._s = settings

    async def _load(self, sandbox: Sandbox, path: str) -> tuple[str, bytes]:
        stat = await sandbox.stat(path)
        if stat.kind == "dir":
            raise FileToolError(
                f"{path!r} is a directory, not a file",
                hint="use list_dir to see what it holds",
                details={"path": path},
            )
        if stat.size > self._s.file_max_bytes:
            raise FileTooLargeError(
                f"{path!r} has {stat.size:,} bytes; the limit is {self._s.file_max_bytes:,}",
                hint="use grep, or execute_shell_command with head/tail/sed, to see parts of it",
                details={"path": path},
            )
        return stat.path, await sandbox.read_file(path)

    async def read(
        self,
        sandbox: Sandbox,
        *,
        path: str,
        start_line: int = 1,
        end_line: int | None = None,
    ) -> ToolResult:
        """Return lines ``start_line``..``end_line`` (1-based, inclusive), numbered.

        Raises:
            ValueError: when ``end_line < start_line``.
            FileMissingError, BinaryFileError, FileTooLargeError, PathNotAllowedError.
        """
        if start_line < 1:
            raise ValueError(f"start_line must be >= 1, got {start_line}")
        if end_line is not None and end_line < start_line:
            raise ValueError(f"end_line ({end_line}) must be >= start_line ({start_line})")
        full, data = await self._load(sandbox, path)
        lines = decode_text(data, path).splitlines()
        total = len(lines)
        if start_line > max(total, 1):
            raise ValueError(f"start_line {start_line} is past the end: {path!r} has {total} lines")
        last = total if end_line is None else min(end_line, total)
        if end_line is None:
            last = min(last, start_line - 1 + self._s.file_default_lines)
        out: list[str] = []
        used = 0
        shown_last = start_line - 1
        for number in range(start_line, last + 1):
            line = lines[number - 1]
            if len(line) > self._s.max_line_chars:
                cut = len(line) - self._s.max_line_chars
                line = line[: self._s.max_line_chars] + f" [... {cut:,} more characters]"
            row = f"{number:6d}\t{line}"
            if out and used + len(row) > self._s.file_max_result_chars:
                break
            out.append(row)
            used += len(row) + 1
            shown_last = number
        note = f"[{path}: lines {start_line}-{shown_last} of {total}]"
        if total == 0:
            note = f"[{path}: empty file]"
        if shown_last < total:
            note += f" [more: call file_read with start_line={shown_last + 1}]"
        text = note + "\n" + "\n".join(out)
        structured = {"path": full, "start_line": start_line, "end_line": shown_last}
        return ToolResult(
            content=(TextContent(text=text),), structured={**structured, "total_lines": total}
        )

    async def write(
        self, sandbox: Sandbox, *, path: str, content: str, create_dirs: bool = True
    ) -> ToolResult:
        """Write ``content`` (UTF-8) to ``path`` atomically, creating parent directories.

        Raises:
            PathNotAllowedError: outside the workspace or in a read-only place.
        """
        parent = posixpath.dirname(path.rstrip("/"))
        if create_dirs and parent and not await sandbox.exists(parent):
            await sandbox.mkdir(parent, parents=True)
        data = content.encode()
        full = await sandbox.write_file(path, data)
        return ToolResult(
            content=(TextContent(text=f"wrote {len(data):,} bytes to {full}"),),
            structured={"path": full, "bytes": len(data)},
        )

    async def update(self, sandbox: Sandbox, *, path: str, edits: list[Any]) -> ToolResult:
        """Apply exact-match replacements in order; write the file once, atomically, only
        when every edit applies.

        Raises:
            EditNotFoundError: an edit's old text is missing (``details["edit"]`` is its index).
            EditAmbiguousError: it occurs several times without ``replace_all``.
            ValueError: an empty old text, or old and new text the same.
        """
        parsed = [
            _Edit(
                old_text=str(e["old_text"]),
                new_text=str(e["new_text"]),
                replace_all=bool(e.get("replace_all", False)),
            )
            for e in edits
        ]
        if not parsed:
            raise ValueError("edits must hold at least one edit")
        _, data = await self._load(sandbox, path)
        decode_text(data, path)  # BinaryFileError for binary content
        try:
            text = data.decode()
        except UnicodeDecodeError as error:
            raise BinaryFileError(
                f"{path!r} is not valid UTF-8; file_update would change the bytes it cannot decode",
                hint="use execute_shell_command (sed, iconv) for this file",
                details={"path": path},
            ) from error
        replaced = 0
        for index, edit in enumerate(parsed):
            if not edit.old_text:
                raise ValueError(f"edit {index}: old_text must not be empty")
            if edit.old_text == edit.new_text:
                raise ValueError(f"edit {index}: old_text and new_text are the same")
            count = text.count(edit.old_text)
            if count == 0:
                raise EditNotFoundError(
                    f"edit {index}: old_text does not occur in {path!r} (after earlier edits)",
                    hint="copy the exact text, whitespace included, from file_read (without "
                    "the line-number prefix)",
                    details={"path": path, "edit": index},
                )
            if count > 1 and not edit.replace_all:
                raise EditAmbiguousError(
                    f"edit {index}: old_text occurs {count} times in {path!r}",
                    hint="add surrounding lines to make it unique, or set replace_all",
                    details={"path": path, "edit": index, "matches": count},
                )
            text = text.replace(edit.old_text, edit.new_text)
            replaced += count
        full = await sandbox.write_file(path, text.encode())
        return ToolResult(
            content=(
                TextContent(text=f"{full}: {replaced} replacement(s) in {len(parsed)} edit(s)"),
            ),
            structured={"path": full, "replacements": replaced},
        )

    async def list_dir(self, sandbox: Sandbox, *, path: str = ".") -> ToolResult:
        """List a directory: ``name/`` for directories, sizes for files."""
        entries = await sandbox.list_dir(path)
        shown = entries[: self._s.list_max_entries]
        rows = [
            f"{e.name}/"
            if e.kind == "dir"
            else f"{e.name}\t{e.size:,} bytes"
            if e.kind == "file"
            else f"{e.name}\t(other)"
            for e in shown
        ]
        if len(entries) > len(shown):
            rows.append(f"[... {len(entries) - len(shown):,} more entries not shown]")
        structured = {
            "path": path,
            "entries": [{"name": e.name, "kind": e.kind, "size": e.size} for e in shown],
            "total": len(entries),
        }
        text = "\n".join(rows) if rows else f"{path}: empty directory"
        return ToolResult(content=(TextContent(text=text),), structured=structured)

    async def glob(self, sandbox: Sandbox, *, pattern: str) -> ToolResult:
        """Paths matching ``pattern`` (``**`` spans directories), sorted, capped."""
        if not pattern.strip():
            raise ValueError("pattern must not be empty")
        paths = await sandbox.glob(pattern)
        shown = paths[: self._s.glob_max_results]
        rows = list(shown)
        if len(paths) > len(shown):
            rows.append(f"[... {len(paths) - len(shown):,} more paths not shown]")
        text = "\n".join(rows) if rows else f"no path matches {pattern!r}"
        return ToolResult(
            content=(TextContent(text=text),),
            structured={"paths": shown, "total": len(paths)},
        )

    async def _files_under(self, sandbox: Sandbox, root: str, include: str | None) -> list[str]:
        stat = await sandbox.stat(root)
        if stat.kind != "dir":
            return [stat.path]
        matcher = glob_regex(include) if include else None
        found: list[str] = []
        pending = [stat.path]
        while pending and len(found) < self._s.grep_max_files:
            directory = pending.pop()
            files: list[tuple[str, str]] = []  # (path, name)
            for entry in await sandbox.list_dir(directory):
                child = posixpath.join(directory, entry.name)
                if entry.kind == "dir":
                    if entry.name not in (".git", "node_modules", "__pycache__", ".venv"):
                        pending.append(child)
                elif entry.kind == "file" and entry.size <= self._s.file_max_bytes:
                    files.append((child, entry.name))
            if matcher is not None:  # in a worker thread, as grep's search (RE2 frees the GIL)
                files = await anyio.to_thread.run_sync(
                    _included, matcher, stat.path, files, abandon_on_cancel=True
                )
            found.extend(child for child, _ in files)
        return sorted(found)[: self._s.grep_max_files]

    async def grep(
        self,
        sandbox: Sandbox,
        *,
        pattern: str,
        path: str = ".",
        include: str | None = None,
        ignore_case: bool = False,
    ) -> ToolResult:
        """Search text files under ``path`` for a regex (RE2 syntax, matched in linear time:
        docs/builtin_tools.md, "grep"); binary and oversized files are skipped.

        Raises:
            ValueError: for an invalid regular expression, or a backreference or lookaround
                (the message says why).
        """
        regex = compile_regex(pattern, ignore_case=ignore_case)
        files = await self._files_under(sandbox, path, include)
        matches: list[dict[str, Any]] = []
        more = False
        for file in files:
            data = await sandbox.read_file(file)
            if is_binary(data):
                continue
            # RE2 is linear in the text, not in the pattern (its NFA, once a pattern outgrows
            # its DFA's memory, takes thousands of steps per character): the search holds a
            # worker thread (RE2 releases the GIL), never the event loop every session shares.
            room = self._s.grep_max_matches - len(matches)
            found, more = await anyio.to_thread.run_sync(
                _matching_lines, regex, file, data, room, abandon_on_cancel=True
            )
            matches.extend(found)
            if more:
                break
        limit = self._s.max_line_chars
        rows = [f"{m['path']}:{m['line']}:{m['text'][:limit]}" for m in matches]
        if more:
            rows.append(f"[... stopped at {len(matches)} matches; narrow the pattern or path]")
        text = "\n".join(rows) if rows else f"no match for {pattern!r} in {len(files)} file(s)"
        return ToolResult(
            content=(TextContent(text=text),),
            structured={"matches": matches, "truncated": more, "files_searched": len(files)},
        )


def _matching_lines(
    regex: LinearRegex, file: str, data: bytes, room: int
) -> tuple[list[dict[str, Any]], bool]:
    """The lines of ``data`` that ``regex`` finds something in, at most ``room`` of them, and
    whether there were more. Blocking: run it in a worker thread."""
    found: list[dict[str, Any]] = []
    for number, line in enumerate(data.decode(errors="replace").splitlines(), 1):
        if regex.search(line):
            if len(found) >= room:
                return found, True
            found.append({"path": file, "line": number, "text": line})
    return found, False


def _included(
    matcher: LinearRegex, root: str, files: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The ``(path, name)`` of ``files`` whose path under ``root`` or name ``matcher`` matches.
    Blocking: run it in a worker thread."""
    return [
        (child, name)
        for child, name in files
        if matcher.fullmatch(posixpath.relpath(child, root)) or matcher.fullmatch(name)
    ]
