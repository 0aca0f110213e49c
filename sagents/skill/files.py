"""Listing the files a skill ships, safely (used by the parser and the sandbox projection).

Hidden files and directories are left out; a symbolic link is listed only when it resolves inside
the skill; a link that loops or leads out, a directory that cannot be listed and a name that is
not UTF-8 are each reported as a ``warning`` problem instead of crashing or vanishing silently.
"""

from __future__ import annotations

import os
from pathlib import Path

from sagents.skill.schema import SkillProblem

__all__ = ["MAX_SKILL_FILES", "list_skill_files"]

MAX_SKILL_FILES = 2000  # files listed per skill; more is reported, not silently cut


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
