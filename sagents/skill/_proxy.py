"""``SkillProxy``: the subset of skills one session may see (a whitelist by name).

Usage::

    SkillProxy(skill_manager, available_skills=["my_skill"])

It has the same reading interface as :class:`~sagents.skill._manager.SkillManager`
(``list_skills``, ``list_skill_names``, ``get_skill``, ``problems``, ``reload``) and holds no copy
of the skills, so edits on disk show through it too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from sagents.skill._schema import SkillProblem, SkillSchema

__all__ = ["FetchingSkillSource", "SkillProxy", "SkillSource", "prepare_skill"]

logger = logging.getLogger(__name__)


@runtime_checkable
class SkillSource(Protocol):
    """What a ``SkillProxy`` reads from: a ``SkillManager`` or another ``SkillProxy``."""

    def list_skills(self) -> list[SkillSchema]:
        """Every skill this source offers, in its priority order."""
        ...

    def get_skill(self, name: str) -> SkillSchema | None:
        """The skill called ``name``, or ``None``."""
        ...

    def problems(self) -> list[SkillProblem]:
        """What is wrong with this source's skills."""
        ...

    def reload(self) -> None:
        """Re-read everything from disk."""
        ...


@runtime_checkable
class FetchingSkillSource(Protocol):
    """A source whose skills' files arrive on first use (the skills of an MCP server,
    :class:`~sagents.skill._mcp_source.MCPSkillSource`)."""

    async def fetch_skill(self, name: str) -> None:
        """Make sure skill ``name``'s files are present and current (nothing for a name the
        source does not have)."""
        ...


async def prepare_skill(source: SkillSource, name: str) -> None:
    """Await ``source``'s fetch of ``name`` when its files arrive on first use (a no-op for a
    ``SkillManager``); call it before reading a skill's body or files.

    Raises:
        SkillError: the source could not fetch the skill.
    """
    if isinstance(source, FetchingSkillSource):
        await source.fetch_skill(name)


def _not_a_source(value: object) -> str:
    return (
        f"a skill source must be a SkillManager or a SkillProxy (or a list of them), not "
        f"{type(value).__name__} {value!r}; for a directory, build a SkillManager and call "
        "add_skill_dir(path)"
    )


class SkillProxy:
    """A session's view of one or more skill sources.

    Args:
        skill_manager_or_list: One source, or several in priority order (the first that has a
            name wins).
        available_skills: The names this session may use, in the order they are listed to the
            model; ``None`` means every skill of the sources. A name that no source has is
            logged as a warning and reported by :meth:`problems` (it may appear later, after
            the skill is added on disk, and is then served).

    Raises:
        TypeError: A source is not a ``SkillManager``/``SkillProxy`` (a path, say), or
            ``available_skills`` is a single string (a common slip for a one-name list).
    """

    def __init__(
        self,
        skill_manager_or_list: SkillSource | Sequence[SkillSource],
        available_skills: Iterable[str] | None = None,
    ) -> None:
        if isinstance(skill_manager_or_list, SkillSource):
            self._sources: tuple[SkillSource, ...] = (skill_manager_or_list,)
        elif isinstance(skill_manager_or_list, (list, tuple)):
            self._sources = tuple(skill_manager_or_list)
        else:
            raise TypeError(_not_a_source(skill_manager_or_list))
        for index, source in enumerate(self._sources):
            if not isinstance(source, SkillSource):
                raise TypeError(f"item {index}: {_not_a_source(source)}")
        if isinstance(available_skills, str):
            raise TypeError(
                f"available_skills must be a list of names, not the string {available_skills!r}"
            )
        self._available = (
            None if available_skills is None else tuple(dict.fromkeys(available_skills))
        )
        for name in self._unknown():
            logger.warning("skill %r is in available_skills but no skill source has it", name)

    @property
    def available_skills(self) -> tuple[str, ...] | None:
        """The whitelist given at construction (``None``: everything)."""
        return self._available

    def _find(self, name: str) -> SkillSchema | None:
        for source in self._sources:
            skill = source.get_skill(name)
            if skill is not None:
                return skill
        return None

    def _unknown(self) -> list[str]:
        if self._available is None:
            return []
        return [name for name in self._available if self._find(name) is None]

    def list_skills(self) -> list[SkillSchema]:
        """The session's skills: in ``available_skills`` order, else in source priority order."""
        if self._available is not None:
            found = (self._find(name) for name in self._available)
            return [skill for skill in found if skill is not None]
        seen: dict[str, SkillSchema] = {}
        for source in self._sources:
            for skill in source.list_skills():
                seen.setdefault(skill.name, skill)
        return list(seen.values())

    def list_skill_names(self) -> list[str]:
        """The names of :meth:`list_skills`, in the same order."""
        return [skill.name for skill in self.list_skills()]

    def get_skill(self, name: str) -> SkillSchema | None:
        """The skill called ``name`` if this session may use it, else ``None``."""
        if self._available is not None and name not in self._available:
            return None
        return self._find(name)

    async def fetch_skill(self, name: str) -> None:
        """Fetch ``name`` from the source that serves it, if the session may use it and that
        source fetches on first use (see :func:`prepare_skill`)."""
        if self._available is not None and name not in self._available:
            return
        for source in self._sources:
            if source.get_skill(name) is not None:
                await prepare_skill(source, name)
                return

    def problems(self) -> list[SkillProblem]:
        """The sources' problems for the session's skills, plus unknown whitelisted names."""
        problems: list[SkillProblem] = []
        for source in self._sources:
            for problem in source.problems():
                if self._available is None or problem.skill in self._available:
                    problems.append(problem)
        for name in self._unknown():
            problems.append(
                SkillProblem(
                    file=Path(name),
                    field="available_skills",
                    reason=f"skill {name!r} is not provided by any skill source",
                    severity="warning",
                    skill=name,
                )
            )
        return problems

    def reload(self) -> None:
        """Reload every source."""
        for source in self._sources:
            source.reload()
