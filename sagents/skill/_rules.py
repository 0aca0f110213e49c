"""The Agent Skills specification's field rules, as checks that return problems.

Source: https://agentskills.io/specification ("Frontmatter"). Each check returns a list of
:class:`~sagents.skill._schema.SkillProblem`; none raises, so that one bad field never hides the
others.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

from sagents.skill._schema import ProblemSeverity, SkillProblem

__all__ = [
    "MAX_COMPATIBILITY_CHARS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_NAME_CHARS",
    "SEED_ID_PATTERN",
    "SPEC_NAME_PATTERN",
    "check_description",
    "check_name",
    "check_optional_text",
    "normalise_metadata",
    "split_allowed_tools",
]

MAX_NAME_CHARS = 64  # spec: name, 1-64 characters
MAX_DESCRIPTION_CHARS = 1024  # spec: description, 1-1024 characters
MAX_COMPATIBILITY_CHARS = 500  # spec: compatibility, 1-500 characters when given

SPEC_NAME_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
"""Lowercase letters and digits in runs joined by single hyphens (no leading/trailing hyphen)."""

SEED_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
"""A seed-form id (``my_skill``): letters, digits, ``_`` and ``-``; loads, but is not portable."""


def _problem(
    file: Path, field: str | None, reason: str, severity: ProblemSeverity, skill: str | None
) -> SkillProblem:
    return SkillProblem(file=file, field=field, reason=reason, severity=severity, skill=skill)


def check_name(name: str, *, directory: str, file: Path, seed_form: bool) -> list[SkillProblem]:
    """Check a skill's name against the specification.

    Spec-form names (from front matter) must be 1-64 characters of ``[a-z0-9]`` joined by
    single hyphens and equal the directory's name (compared in NFC: an NFD directory name is
    the same name); each breach is an ``error``. Lowercase letters outside ASCII (``мой-навык``,
    ``技能``) are only ``non_portable``: the reference validator accepts them, while the
    specification's wording (``a-z``) reads as ASCII. A seed-form id (from ``skill.yaml`` or
    the directory) may also hold ``_`` and capitals: that is only ``non_portable``, but a
    mismatch with the directory or other characters stay errors.

    Args:
        name: The name to check.
        directory: The skill directory's base name.
        file: The file the name comes from (for the problem).
        seed_form: Whether the name is a seed-form id.
    """
    problems: list[SkillProblem] = []
    field = "id" if seed_form and file.name == "skill.yaml" else "name"
    if len(name) > MAX_NAME_CHARS:
        problems.append(
            _problem(
                file,
                field,
                f"is {len(name)} characters long; the limit is {MAX_NAME_CHARS}",
                "error",
                name,
            )
        )
    if not SPEC_NAME_PATTERN.fullmatch(name):
        if _is_unicode_spec_name(name):
            problems.append(
                _problem(
                    file,
                    field,
                    f"{name!r} holds letters outside ASCII: the Agent Skills reference "
                    "validator accepts Unicode lowercase letters, but hosts that read the "
                    "specification's 'a-z' literally will refuse it",
                    "non_portable",
                    name,
                )
            )
        elif seed_form and SEED_ID_PATTERN.fullmatch(name):
            problems.append(
                _problem(
                    file,
                    field,
                    f"{name!r} is not a portable Agent Skills name (lowercase letters, digits "
                    "and single hyphens); other hosts will refuse it",
                    "non_portable",
                    name,
                )
            )
        else:
            problems.append(
                _problem(
                    file,
                    field,
                    f"{name!r} must be lowercase letters, digits and single hyphens, "
                    "not starting or ending with a hyphen",
                    "error",
                    name,
                )
            )
    # Some filesystems (macOS's) store names decomposed (NFD) while editors write NFC: the
    # same name either way.
    if unicodedata.normalize("NFC", name) != unicodedata.normalize("NFC", directory):
        reason = f"{name!r} must equal the directory's name {directory!r}: rename one of them"
        problems.append(_problem(file, field, reason, "error", name))
    return problems


def _is_unicode_spec_name(name: str) -> bool:
    """The reference validator's rule (``skills-ref``): lowercase Unicode letters and digits
    joined by single hyphens, compared in NFC."""
    name = unicodedata.normalize("NFC", name)
    return (
        bool(name)
        and name == name.lower()
        and not name.startswith("-")
        and not name.endswith("-")
        and "--" not in name
        and all(c.isalnum() or c == "-" for c in name)
    )


def check_description(description: str, *, file: Path, skill: str | None) -> list[SkillProblem]:
    """Check that a description is non-empty and at most 1024 characters (spec)."""
    if not description.strip():
        return [
            _problem(
                file,
                "description",
                "is empty; say what the skill does and when to use it",
                "error",
                skill,
            )
        ]
    if len(description) > MAX_DESCRIPTION_CHARS:
        return [
            _problem(
                file,
                "description",
                f"is {len(description)} characters long; the limit is {MAX_DESCRIPTION_CHARS}",
                "error",
                skill,
            )
        ]
    return []


def check_optional_text(
    value: Any, *, field: str, limit: int | None, file: Path, skill: str | None
) -> tuple[str | None, list[SkillProblem]]:
    """Check an optional string field (``license``, ``compatibility``).

    Returns:
        The value as a string (or ``None`` when absent or unusable) and its problems.
    """
    if value is None:
        return None, []
    if not isinstance(value, str):
        reason = f"must be a string, not a YAML {type(value).__name__}"
        return str(value), [_problem(file, field, reason, "error", skill)]
    if not value.strip():
        return None, [_problem(file, field, "is empty; remove it or fill it in", "error", skill)]
    if limit is not None and len(value) > limit:
        reason = f"is {len(value)} characters long; the limit is {limit}"
        return value, [_problem(file, field, reason, "error", skill)]
    return value, []


def normalise_metadata(
    value: Any, *, file: Path, skill: str | None
) -> tuple[dict[str, str], list[SkillProblem]]:
    """Turn the ``metadata`` field into a map of strings (spec: string keys, string values).

    Non-string scalar values (numbers, booleans, dates) are stringified with a ``non_portable``
    problem; a ``metadata`` that is not a mapping is an ``error`` and is dropped.
    """
    if value is None:
        return {}, []
    if not isinstance(value, dict):
        reason = f"must be a mapping of strings to strings, not a YAML {type(value).__name__}"
        return {}, [_problem(file, "metadata", reason, "error", skill)]
    result: dict[str, str] = {}
    problems: list[SkillProblem] = []
    for key, item in value.items():
        text_key = str(key)
        if isinstance(item, str) and isinstance(key, str):
            result[text_key] = item
            continue
        result[text_key] = _stringify(item)
        problems.append(
            _problem(
                file,
                f"metadata.{text_key}",
                f"value {item!r} is not a string; quote it so other hosts read it the same",
                "non_portable",
                skill,
            )
        )
    return result, problems


def _stringify(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def split_allowed_tools(
    value: Any, *, file: Path, skill: str | None
) -> tuple[tuple[str, ...] | None, list[SkillProblem]]:
    """Read ``allowed-tools``: a space-separated string (spec), or a YAML list (accepted).

    Commas also separate names (some hosts write ``Read, Grep``), except inside parentheses,
    so that patterns such as ``Bash(git status:*)`` stay one entry. A YAML list is accepted
    with a ``non_portable`` problem. An empty value means "no restriction" and is reported. Any
    other value (a map, a number, a list holding a non-string) is an error and fails closed:
    ``()``, no tool allowed, rather than dropping the restriction its author meant.

    Returns:
        The tool names in order, without duplicates (``None`` when absent or empty, ``()`` when
        malformed), and the problems.
    """
    if value is None:
        return None, []
    problems: list[SkillProblem] = []
    items: list[str]
    if isinstance(value, str):
        items = _tokenise(value)
        texts = [value]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = [token for item in value for token in _tokenise(item)]
        texts = list(value)
        problems.append(
            _problem(
                file,
                "allowed-tools",
                "is a YAML list; the specification wants one space-separated string",
                "non_portable",
                skill,
            )
        )
    else:
        reason = (
            f"must be a space-separated string of tool names, not {value!r}; until it is "
            "fixed the skill may call no tool but the skill tools (fail closed)"
        )
        return (), [_problem(file, "allowed-tools", reason, "error", skill)]
    for text in texts:
        if text.count("(") > text.count(")"):
            reason = (
                f"{text!r} has an unclosed '(': everything after it is read as one tool name, "
                "which matches no tool; close it"
            )
            problems.append(_problem(file, "allowed-tools", reason, "error", skill))
    names = tuple(dict.fromkeys(items))
    if not names:
        reason = "is empty, so it restricts nothing; remove it or list the tools"
        problems.append(_problem(file, "allowed-tools", reason, "error", skill))
        return None, problems
    return names, problems


def _tokenise(text: str) -> list[str]:
    tokens: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        if depth == 0 and (char.isspace() or char == ","):
            if current:
                tokens.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        tokens.append("".join(current))
    return tokens
