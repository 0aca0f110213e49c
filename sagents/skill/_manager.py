"""``SkillManager``: scans skill roots, keeps them fresh, reports every problem.

Usage::

    skill_manager = SkillManager()
    skill_manager.add_skill_dir("/path/to/skills_root")

Precedence: roots are searched in the order they were added, and the first root that holds a
skill name wins (as with ``PATH``). The skill it shadows stays out of ``list_skills`` and a
``warning`` problem names both directories. Within one root, two directories declaring the same
name is the same case (the first in sorted order wins).

Freshness: every ``list_skills``/``problems`` call compares cheap ``stat`` stamps (the root
directory, each skill's ``SKILL.md``, ``skill.yaml`` and directories) with the last scan and
re-reads only what changed, so an edited ``SKILL.md`` or a new skill directory is seen without a
restart; ``get_skill(name)`` re-checks only the directories that may hold ``name``.
``reload()`` forces a full rescan. Nothing here writes to a skill directory.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from sagents.errors import SkillRootError
from sagents.skill._parser import SEED_FILE, SKILL_FILE, SkillLoad, is_skill_dir, parse_skill_dir
from sagents.skill._schema import SkillProblem, SkillSchema

__all__ = ["SkillManager", "scan_root"]

logger = logging.getLogger(__name__)

_Stamp = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class _Entry:
    directory: Path
    stamp: _Stamp
    load: SkillLoad


def _stat(path: Path) -> tuple[int, int]:
    try:
        info = path.stat()
    except OSError:
        return (-1, -1)
    return (info.st_mtime_ns, info.st_size)


def _skill_stamp(directory: Path) -> _Stamp:
    """``(path, mtime_ns, size)`` of the files that define a skill and of its directories."""
    items = [(name, *_stat(directory / name)) for name in (SKILL_FILE, SEED_FILE)]
    for current, dirs, _ in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        items.append((current, *_stat(Path(current))))
    return tuple(items)


def scan_root(root: Path) -> list[Path]:
    """List a root's candidate skill directories (its non-hidden subdirectories), sorted.

    Raises:
        SkillRootError: The root is missing, not a directory, or unreadable.
    """
    return [child for child in _children(root) if child.is_dir()]


def _scan(root: Path) -> tuple[list[Path], list[SkillProblem]]:
    """A root's skill directories, and what is wrong with the root itself.

    A root that is itself a skill directory (a common slip: ``--dir skills/pdf-tools``) yields no
    skills and one problem saying to pass its parent, rather than a ``missing SKILL.md`` for each
    of its ``scripts/`` and ``references/``. An entry that is a symbolic link leading nowhere
    (broken, or a loop) is reported, not skipped silently.

    Raises:
        SkillRootError: The root is missing, not a directory, or unreadable.
    """
    children = _children(root)
    if is_skill_dir(root):
        reason = (
            f"{str(root)!r} is a skill directory, not a root of skills: pass its parent "
            f"{str(root.parent)!r} instead"
        )
        problem = SkillProblem(
            file=root / SKILL_FILE, field=None, reason=reason, severity="error", skill=root.name
        )
        return [], [problem]
    problems = [
        SkillProblem(
            file=child,
            field=None,
            reason="is a symbolic link that leads nowhere (broken, or a loop); not loaded",
            severity="error",
            skill=child.name,
        )
        for child in children
        if child.is_symlink() and not child.exists()
    ]
    return [child for child in children if child.is_dir()], problems


def _children(root: Path) -> list[Path]:
    """A root's non-hidden entries, sorted. Raises SkillRootError."""
    try:
        children = sorted(root.iterdir())
    except FileNotFoundError as error:
        raise SkillRootError(
            f"skill root {str(root)!r} does not exist", hint="check the path"
        ) from error
    except NotADirectoryError as error:
        raise SkillRootError(
            f"skill root {str(root)!r} is not a directory",
            hint="pass the directory that holds skill directories",
        ) from error
    except OSError as error:
        raise SkillRootError(
            f"skill root {str(root)!r} cannot be read: {error.strerror}"
        ) from error
    return [child for child in children if not child.name.startswith(".")]


class _Root:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.stamp: tuple[int, int] = (-2, -2)
        self.entries: dict[Path, _Entry] = {}
        self.problems: list[SkillProblem] = []

    def refresh(self, force: bool, only: str | None = None) -> bool:
        """Re-read what changed (with ``only``: just the directories that may hold that name).

        Returns whether anything did.
        """
        changed = False
        root_stamp = _stat(self.path)
        if force or root_stamp != self.stamp:
            try:
                directories, problems = _scan(self.path)
            except SkillRootError as error:
                logger.warning("%s", error)
                directories, problems = [], []
            for problem in problems:
                logger.warning("skill root %s", problem)
            changed = changed or problems != self.problems
            self.problems = problems
            self.stamp = root_stamp
            kept = {d: self.entries[d] for d in directories if d in self.entries and not force}
            changed = changed or kept.keys() != self.entries.keys()
            self.entries = kept
            for directory in directories:
                if directory not in self.entries:
                    self.entries[directory] = _read(directory)
                    changed = True
        for directory, entry in list(self.entries.items()):
            if only is not None and not _may_hold(entry, only):
                continue
            stamp = _skill_stamp(directory)
            if stamp != entry.stamp:
                self.entries[directory] = _read(directory, stamp)
                changed = True
        return changed


def _may_hold(entry: _Entry, name: str) -> bool:
    skill = entry.load.skill
    return entry.directory.name == name or (skill is not None and skill.name == name)


def _read(directory: Path, stamp: _Stamp | None = None) -> _Entry:
    stamp = stamp if stamp is not None else _skill_stamp(directory)
    load = parse_skill_dir(directory)
    for problem in load.problems:  # every problem, once per change: loud, never silent
        logger.warning("skill %s", problem)
    if load.skill is None:
        logger.warning("skill directory %s was not loaded (see the problems above)", directory)
    return _Entry(directory=directory, stamp=stamp, load=load)


class SkillManager:
    """A registry of skills read from one or more root directories.

    Two managers never share state. Not thread-safe: use one per thread or guard it.
    """

    def __init__(self) -> None:
        self._roots: list[_Root] = []
        self._skills: dict[str, SkillSchema] = {}
        self._problems: list[SkillProblem] = []

    @property
    def roots(self) -> tuple[Path, ...]:
        """The roots added so far, highest priority first."""
        return tuple(root.path for root in self._roots)

    def add_skill_dir(self, root: str | os.PathLike[str]) -> list[SkillSchema]:
        """Add a root directory whose subdirectories are skills, at the lowest priority.

        Bad skills in the root are recorded in :meth:`problems` and logged; they never stop the
        others from loading. Adding a root twice is a no-op.

        Args:
            root: A directory holding skill directories.

        Returns:
            The skills that this root contributes (after precedence).

        Raises:
            SkillRootError: The root is missing, not a directory or unreadable.
        """
        path = Path(root).expanduser().absolute()
        scan_root(path)
        if path not in self.roots:
            self._roots.append(_Root(path))
        self._refresh(force=False)
        return [s for s in self._skills.values() if s.path.parent == path]

    def list_skills(self) -> list[SkillSchema]:
        """Every loaded skill, by root priority then directory name."""
        self._refresh(force=False)
        return list(self._skills.values())

    def list_skill_names(self) -> list[str]:
        """The names of :meth:`list_skills`, in the same order."""
        return [skill.name for skill in self.list_skills()]

    def get_skill(self, name: str) -> SkillSchema | None:
        """The skill called ``name`` (re-read first if its files changed), or ``None``.

        Only the directories that may hold ``name`` (same directory name, or that declared it)
        and the roots' listings are re-checked, so this stays cheap with many skills; on a miss
        everything is re-checked (a skill may have been renamed), as ``list_skills`` does.
        """
        self._refresh(force=False, only=name)
        if name not in self._skills:
            # a miss may be a skill renamed in its front matter: check everything, as
            # list_skills would, so the two never disagree
            self._refresh(force=False)
        return self._skills.get(name)

    def problems(self) -> list[SkillProblem]:
        """Every problem of every root, including skills that could not load and shadowing."""
        self._refresh(force=False)
        return list(self._problems)

    def reload(self) -> None:
        """Re-read every root and every skill from disk."""
        self._refresh(force=True)

    def _refresh(self, *, force: bool, only: str | None = None) -> None:
        changed = False
        for root in self._roots:
            changed = root.refresh(force, only) or changed
        if changed or force:
            self._rebuild()

    def _rebuild(self) -> None:
        skills: dict[str, SkillSchema] = {}
        problems: list[SkillProblem] = []
        for root in self._roots:
            problems.extend(root.problems)
            for entry in root.entries.values():
                problems.extend(entry.load.problems)
                skill = entry.load.skill
                if skill is None:
                    continue
                winner = skills.get(skill.name)
                if winner is None:
                    skills[skill.name] = skill
                    continue
                reason = (
                    f"skill {skill.name!r} is shadowed by {str(winner.path)!r}, which comes "
                    "first (earlier root, or earlier directory in the same root)"
                )
                problems.append(
                    SkillProblem(
                        file=skill.skill_md,
                        field="name",
                        reason=reason,
                        severity="warning",
                        skill=skill.name,
                    )
                )
                logger.warning("%s", reason)
        self._skills = skills
        self._problems = problems
