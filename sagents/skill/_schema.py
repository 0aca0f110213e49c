"""The value types of skills: :class:`SkillSchema` and :class:`SkillProblem`.

A skill is a directory holding ``SKILL.md`` (Agent Skills specification,
https://agentskills.io/specification) and, in the ``seed`` form, a ``skill.yaml``. Parsing
lives in :mod:`sagents.skill._parser`; these are the plain frozen values it produces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = [
    "ProblemSeverity",
    "SkillProblem",
    "SkillSchema",
    "SourceForm",
]

SourceForm = Literal["spec", "seed", "spec+seed"]
"""How a skill was written.

``spec``: ``SKILL.md`` with YAML front matter (the Agent Skills specification). ``seed``: the
``skill.yaml`` form, beside a ``SKILL.md`` without front matter. ``spec+seed``: both front
matter and ``skill.yaml`` (see docs/skills.md for how they combine).
"""

ProblemSeverity = Literal["error", "non_portable", "warning"]
"""How bad a problem is.

``error``: breaks the Agent Skills specification (``sagents skills validate`` exits 1).
``non_portable``: loads here but not in other Agent Skills hosts (the ``seed`` form, unknown keys);
``validate --strict`` exits 1. ``warning``: about how skills were combined, not about one skill's
format (a skill shadowed by another root, an unknown name in a ``SkillProxy``); never fails
``validate``.
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillProblem:
    """One thing wrong with one skill file.

    Attributes:
        file: The file concerned (host path), or the skill directory when no file is.
        field: The front-matter or ``skill.yaml`` key concerned (``name``, ``description``,
            ``allowed-tools``, ...), or ``None`` when the problem is about the whole file.
        reason: What is wrong and what to do, in English.
        severity: See :data:`ProblemSeverity`.
        skill: The skill's name when it is known (else the directory's name).
    """

    file: Path
    field: str | None
    reason: str
    severity: ProblemSeverity
    skill: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}" + (f": {self.field}" if self.field else "")
        return f"{where}: {self.reason} [{self.severity}]"


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillSchema:
    """One loaded skill.

    Attributes:
        name: The skill's identifier: the front matter's ``name``, else ``skill.yaml``'s ``id``,
            else the directory's name. This is what ``get_skill`` and ``load_skill`` take.
        description: What the skill does and when to use it, in full (never cut).
        body: The instructions: ``SKILL.md`` after the front matter (the whole file in the ``seed``
            form), with line endings normalised to ``\\n``.
        path: The skill directory (host path, absolute).
        metadata: String keys and values: the front matter's ``metadata`` map (over
            ``skill.yaml``'s), and unknown keys, stringified (lists and maps as one line of YAML
            flow style), each with a problem recorded.
        allowed_tools: Tool names from ``allowed-tools``, or ``None`` when the field is absent
            (no restriction).
        files: Relative POSIX paths of the regular files the skill ships (``SKILL.md`` included),
            sorted; hidden files and directories are left out.
        activation_scenarios: When the skill should be used, from ``skill.yaml`` (``seed`` form).
        source_form: See :data:`SourceForm`.
        display_name: A human title (``skill.yaml``'s ``name`` or the ``# Skill: ...`` heading),
            or ``None``.
        license: The front matter's ``license``, or ``None``.
        compatibility: The front matter's ``compatibility``, or ``None``.
    """

    name: str
    description: str
    body: str
    path: Path
    metadata: dict[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] | None = None
    files: tuple[str, ...] = ()
    activation_scenarios: tuple[str, ...] = ()
    source_form: SourceForm = "spec"
    display_name: str | None = None
    license: str | None = None
    compatibility: str | None = None

    @property
    def skill_md(self) -> Path:
        """The skill's ``SKILL.md`` (host path)."""
        return self.path / "SKILL.md"
