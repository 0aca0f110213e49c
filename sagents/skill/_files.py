"""Listing the files a skill ships, and opening one of them, safely.

Listing (used by the parser and the sandbox projection): hidden files and directories are left
out; a symbolic link is listed only when it resolves inside the skill; a link that loops or leads
out, a directory that cannot be listed and a name that is not UTF-8 are each reported as a
``warning`` problem instead of crashing or vanishing silently.

Opening (:func:`open_skill_file`, used by ``read_skill_file``, ``skill://`` resources and the
sandbox projection): the path is walked one component at a time from a descriptor of the skill
directory, each component opened with ``O_NOFOLLOW`` relative to its parent's descriptor
(``openat``); a symbolic link met on the way is read (``readlinkat``) and followed by the walk
itself, only while it stays inside the skill. Nothing is checked by path and opened later, so
swapping a file or a directory for a link between a check and the open cannot lead out.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from pathlib import Path, PurePosixPath

from sagents.skill._schema import SkillProblem

__all__ = ["MAX_SKILL_FILES", "SkillFileEscape", "list_skill_files", "open_skill_file"]

MAX_SKILL_FILES = 2000  # files listed per skill; more is reported, not silently cut
_MAX_LINK_HOPS = 40  # as the kernel's own limit (MAXSYMLINKS): more is a loop
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO never blocks


class SkillFileEscape(Exception):
    """The path leads out of the skill directory (``..`` above it, or a symbolic link out)."""


def open_skill_file(directory: Path, relative: str) -> int:
    """Open the regular file ``relative`` inside ``directory`` without ever leaving it.

    Args:
        directory: The skill directory (itself may be a symbolic link: it is trusted).
        relative: A relative POSIX path inside it.

    Returns:
        A read-only file descriptor (close-on-exec) of a regular file; the caller closes it.

    Raises:
        SkillFileEscape: ``..`` above the skill, an absolute path, or a symbolic link whose
            target is outside the skill.
        FileNotFoundError: no such regular file (missing, a directory, a FIFO, a device, or a
            symbolic link loop).
    """
    if relative.startswith("/"):
        raise SkillFileEscape(relative)
    real_root = os.path.realpath(directory)
    stack = [os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
    pending = deque(relative.split("/"))
    hops = 0
    try:
        while pending:
            part = pending.popleft()
            if part in ("", "."):
                continue
            if part == "..":
                if len(stack) == 1:
                    raise SkillFileEscape(relative)
                os.close(stack.pop())
                continue
            last = not any(p not in ("", ".") for p in pending)
            try:
                fd = os.open(part, _FILE_FLAGS if last else _DIR_FLAGS, dir_fd=stack[-1])
            except OSError as error:
                if error.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise FileNotFoundError(errno.ENOENT, error.strerror, relative) from None
                target = _link_target(part, stack[-1], relative)
                hops += 1
                if hops > _MAX_LINK_HOPS:
                    raise FileNotFoundError(errno.ELOOP, "symbolic link loop", relative) from None
                if target.startswith("/"):
                    inside = PurePosixPath(os.path.normpath(target))
                    if not inside.is_relative_to(real_root):
                        raise SkillFileEscape(relative) from None
                    while len(stack) > 1:  # restart from the skill directory
                        os.close(stack.pop())
                    target = inside.relative_to(real_root).as_posix()
                pending.extendleft(reversed(target.split("/")))
                continue
            if last:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    os.close(fd)
                    raise FileNotFoundError(errno.ENOENT, "not a regular file", relative)
                return fd
            stack.append(fd)
        raise FileNotFoundError(errno.ENOENT, "not a regular file", relative)
    finally:
        for fd in stack:
            os.close(fd)


def _link_target(name: str, dir_fd: int, relative: str) -> str:
    """The target of symbolic link ``name`` in ``dir_fd``; not a link: not found."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:  # EINVAL: not a link (a file used as a directory); ENOENT: gone meanwhile
        raise FileNotFoundError(errno.ENOENT, "no such file", relative) from None


def _is_utf8(name: str) -> bool:
    """Whether a file name decoded by the OS is real UTF-8 (no surrogate escapes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _symlink_problem(link: Path, root: Path) -> str | None:
    """Why the symbolic link ``link`` is not shipped, or ``None`` when it stays inside ``root``."""
    try:
        target = link.resolve(strict=True)
    except FileNotFoundError:
        return None  # dangling: not a file, so not listed; nothing leaks
    except (OSError, RuntimeError):
        return "is a symbolic link loop; it is not shipped"
    if not target.is_relative_to(root):
        return "is a symbolic link out of the skill directory; it is not shipped"
    return None


def list_skill_files(
    directory: Path, *, skill: str | None = None
) -> tuple[tuple[str, ...], list[SkillProblem]]:
    """List the regular files a skill ships, as sorted relative POSIX paths.

    Hidden files and directories (``.git``, ``.DS_Store``) are left out. A symlink is listed only
    when it resolves inside the skill directory; one that points out, or loops, is reported and
    left out. A directory that cannot be listed (permissions) is reported, not silently empty,
    and so is a name that is not UTF-8 (it could not reach a model or a remote sandbox).
    At most :data:`MAX_SKILL_FILES` are listed; more is reported.
    """
    root = directory.resolve()
    found: list[str] = []
    problems: list[SkillProblem] = []

    def unlisted(error: OSError) -> None:
        reason = f"cannot be listed ({error.strerror}); its files are not shipped"
        where = Path(error.filename) if error.filename else directory
        problems.append(
            SkillProblem(file=where, field=None, reason=reason, severity="warning", skill=skill)
        )

    for current, dirs, names in os.walk(directory, onerror=unlisted):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        base = Path(current)
        refused: set[str] = set()
        for entry in [*dirs, *names]:
            full = base / entry
            reason: str | None
            if not _is_utf8(entry):
                reason = "has a name that is not valid UTF-8; it is not shipped (rename it)"
            elif full.is_symlink():
                reason = _symlink_problem(full, root)
            else:
                continue
            if reason is None:
                continue
            refused.add(entry)
            problems.append(
                SkillProblem(file=full, field=None, reason=reason, severity="warning", skill=skill)
            )
        dirs[:] = [d for d in dirs if d not in refused]
        for entry in names:
            full = base / entry
            if entry.startswith(".") or entry in refused or not full.is_file():
                continue
            found.append(full.relative_to(directory).as_posix())
    found.sort()
    if len(found) > MAX_SKILL_FILES:
        reason = f"ships {len(found)} files; only the first {MAX_SKILL_FILES} are listed"
        problems.append(
            SkillProblem(file=directory, field=None, reason=reason, severity="warning", skill=skill)
        )
        found = found[:MAX_SKILL_FILES]
    return tuple(found), problems
