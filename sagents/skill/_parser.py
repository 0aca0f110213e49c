"""Reading one skill directory into a :class:`SkillSchema` and its problems.

Two forms load (docs/skills.md): the Agent Skills specification (``SKILL.md`` with front
matter) and the ``seed`` form (``skill.yaml`` beside a ``SKILL.md`` without front matter).
When both front matter and ``skill.yaml`` are present they combine by one rule:

* the front matter is authoritative for every field it sets (``name``, ``description``,
  ``license``, ``compatibility``, ``metadata``, ``allowed-tools``);
* ``skill.yaml`` fills in what the front matter leaves out, and is the only source of the
  activation scenarios and of the display name (its ``name``; its ``id`` is the skill's name);
* a value set in both and different is a problem (an ``error`` for the name, a ``warning``
  otherwise) saying which one won.

A skill loads when ``SKILL.md`` is a readable regular file, its front matter (if any) is a YAML
mapping, its name can name a skill at all (one path component, no control characters) and it has
a non-empty description; everything else that is wrong is reported as a problem but does not stop
it loading. Nothing here writes to the skill directory.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sagents.skill._files import MAX_SKILL_FILES, list_skill_files
from sagents.skill._frontmatter import (
    FrontMatterError,
    YamlMapping,
    decode_text,
    load_yaml_document,
    split_front_matter,
)
from sagents.skill._rules import (
    MAX_COMPATIBILITY_CHARS,
    check_description,
    check_name,
    check_optional_text,
    normalise_metadata,
    split_allowed_tools,
)
from sagents.skill._schema import ProblemSeverity, SkillProblem, SkillSchema, SourceForm

__all__ = [
    "MAX_SKILL_FILES",
    "MAX_SKILL_MD_BYTES",
    "SEED_FILE",
    "SKILL_FILE",
    "SkillLoad",
    "is_skill_dir",
    "list_skill_files",
    "parse_skill_dir",
]

MAX_SKILL_MD_BYTES = 1024 * 1024  # SKILL.md and skill.yaml; the spec suggests < 500 lines
SKILL_FILE = "SKILL.md"
SEED_FILE = "skill.yaml"

_FRONT_MATTER_KEYS = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
)
_SEED_KEYS = frozenset(
    {
        "id",
        "name",
        "description",
        "activation_scenarios",
        "scenarios",
        "license",
        "compatibility",
        "metadata",
        "allowed-tools",
        "allowed_tools",
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillLoad:
    """The outcome of reading one skill directory.

    Attributes:
        skill: The skill, or ``None`` when it cannot be loaded (the problems say why).
        problems: Everything wrong with it, in file order.
    """

    skill: SkillSchema | None
    problems: tuple[SkillProblem, ...]


def is_skill_dir(path: Path) -> bool:
    """Whether ``path`` is a directory that holds ``SKILL.md`` or ``skill.yaml``."""
    return path.is_dir() and ((path / SKILL_FILE).exists() or (path / SEED_FILE).exists())


def _absent_reason(file: Path) -> str:
    """Why ``file``, which is not a regular file, cannot be read (for a problem's reason)."""
    if file.is_symlink() and not file.exists():
        return "is a broken symbolic link (its target is missing, or it loops)"
    if file.exists():
        return "is not a regular file (a directory, FIFO or device)"
    return "is missing"


def _read_yaml(file: Path, text: str, out: _Collector, first_line: int = 1) -> dict[str, Any]:
    """Parse a YAML mapping and report its duplicated keys. Raises FrontMatterError."""
    parsed: YamlMapping = load_yaml_document(text, first_line=first_line)
    for duplicate in parsed.duplicate_keys:
        reason = (
            f"is given more than once (lines {duplicate.first_line} and {duplicate.line}); "
            "YAML forbids it and the last value is used: keep one"
        )
        out.add(file, duplicate.key, reason, "error")
    for key in parsed.non_string_keys:
        reason = (
            f"key {key.key!r} (line {key.line}) is not a string to YAML 1.1 readers, which "
            "read on/off/yes/no as booleans and digits as numbers: quote it"
        )
        out.add(file, key.key, reason, "non_portable")
    return parsed.data


def _read_text(file: Path) -> str:
    """Read and normalise a regular text file. Raises OSError or FrontMatterError.

    The file is opened non-blocking and checked to be a regular file before reading, so that a
    FIFO or a device in a skill directory is refused instead of blocking the scan forever.
    """
    fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FrontMatterError("is not a regular file (a directory, FIFO or device)")
        data = handle.read(MAX_SKILL_MD_BYTES + 1)
    if len(data) > MAX_SKILL_MD_BYTES:
        raise FrontMatterError(
            f"is larger than {MAX_SKILL_MD_BYTES} bytes; move details into references/"
        )
    return decode_text(data)


class _Collector:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.name: str | None = None
        self.problems: list[SkillProblem] = []

    def add(self, file: Path, field: str | None, reason: str, severity: ProblemSeverity) -> None:
        skill = self.name or self.directory.name
        self.problems.append(
            SkillProblem(file=file, field=field, reason=reason, severity=severity, skill=skill)
        )

    def extend(self, problems: list[SkillProblem]) -> None:
        self.problems.extend(problems)

    def result(self, skill: SkillSchema | None) -> SkillLoad:
        return SkillLoad(skill=skill, problems=tuple(self.problems))


def parse_skill_dir(path: Path) -> SkillLoad:
    """Read the skill in ``path`` without modifying anything.

    Args:
        path: A skill directory (holding ``SKILL.md`` and optionally ``skill.yaml``).

    Returns:
        The skill (or ``None``) and its problems; this never raises for a bad skill.
    """
    directory = path.absolute()
    out = _Collector(directory)
    skill_md = directory / SKILL_FILE
    seed_file = directory / SEED_FILE
    if not skill_md.is_file():
        absent = _absent_reason(skill_md)
        reason = (
            "missing SKILL.md: every skill needs one (instructions, with front matter)"
            if absent == "is missing"
            else f"SKILL.md {absent}; every skill needs one as a regular file"
        )
        out.add(skill_md, None, reason, "error")
        return out.result(None)
    try:
        split = split_front_matter(_read_text(skill_md))
        front = (
            None
            if split.front_matter is None
            else _read_yaml(skill_md, split.front_matter, out, first_line=2)
        )
    except (OSError, FrontMatterError) as error:
        out.add(skill_md, None, f"cannot be read: {error}", "error")
        return out.result(None)
    seed: dict[str, Any] | None = None
    if seed_file.exists() or seed_file.is_symlink():
        try:
            seed = _read_yaml(seed_file, _read_text(seed_file), out)
        except (OSError, FrontMatterError) as error:
            out.add(seed_file, None, f"cannot be read: {error}", "error")
            if front is None:
                return out.result(None)
    if front is None and seed is None:
        reason = "has no YAML front matter (a '---' line, name and description, '---')"
        if split.body.lstrip().startswith("---"):
            reason = (
                "has its front matter after blank lines or text: it must start on line 1 "
                "(remove what comes before the first '---')"
            )
        out.add(skill_md, None, reason, "error")
        return out.result(None)
    form: SourceForm = "spec+seed" if front is not None and seed is not None else "spec"
    if front is None:
        form = "seed"
        reason = "has no front matter: the seed form loads here, but other hosts need it"
        out.add(skill_md, None, reason, "non_portable")
    return _combine(directory, out, front or {}, seed, split.body, form)


def _combine(
    directory: Path,
    out: _Collector,
    front: dict[str, Any],
    seed: dict[str, Any] | None,
    body: str,
    form: SourceForm,
) -> SkillLoad:
    skill_md = directory / SKILL_FILE
    seed_file = directory / SEED_FILE
    seed = seed or {}
    has_front = form != "seed"

    name = _resolve_name(directory, out, front, seed, has_front)
    if not _usable_name(name):
        reason = (
            f"{name!r} cannot be used as a skill name (it must be a single path component "
            "without control characters: the name becomes a sandbox directory and a line of "
            "the system prompt); the skill is not loaded"
        )
        out.add(skill_md if has_front else seed_file, "name", reason, "error")
        return out.result(None)
    out.name = name
    description = _pick_text(out, front, seed, "description", skill_md, seed_file)
    if description is None:
        file = skill_md if has_front else seed_file
        reason = "is missing; say what the skill does and when to use it"
        out.add(file, "description", reason, "error")
        return out.result(None)
    out.extend(
        check_description(description, file=skill_md if has_front else seed_file, skill=name)
    )
    if not description.strip():
        return out.result(None)

    metadata, problems = normalise_metadata(seed.get("metadata"), file=seed_file, skill=name)
    front_meta, more = normalise_metadata(front.get("metadata"), file=skill_md, skill=name)
    metadata.update(front_meta)
    out.extend(problems + more)

    text_fields: dict[str, str | None] = {}
    for field, limit in (("license", None), ("compatibility", MAX_COMPATIBILITY_CHARS)):
        source, raw = (skill_md, front[field]) if field in front else (seed_file, seed.get(field))
        value, problems = check_optional_text(
            raw, field=field, limit=limit, file=source, skill=name
        )
        text_fields[field] = value
        out.extend(problems)

    tools_key = next((k for k in ("allowed-tools", "allowed_tools") if k in seed), None)
    tools_source, tools_raw = (
        (skill_md, front["allowed-tools"])
        if "allowed-tools" in front
        else (seed_file, seed.get(tools_key) if tools_key else None)
    )
    allowed_tools, problems = split_allowed_tools(tools_raw, file=tools_source, skill=name)
    out.extend(problems)

    for key in sorted(set(front) - _FRONT_MATTER_KEYS):
        metadata.setdefault(key, _stringify(front[key]))
        out.add(skill_md, key, "unknown front-matter key, kept in metadata", "non_portable")
    for key in sorted(set(seed) - _SEED_KEYS):
        metadata.setdefault(key, _stringify(seed[key]))
        out.add(seed_file, key, "unknown skill.yaml key, kept in metadata", "non_portable")

    files, file_problems = list_skill_files(directory, skill=name)
    out.extend(file_problems)
    skill = SkillSchema(
        name=name,
        description=description,
        body=body,
        path=directory,
        metadata=metadata,
        allowed_tools=allowed_tools,
        files=files,
        activation_scenarios=_scenarios(out, seed, seed_file),
        source_form=form,
        display_name=_display_name(seed, body),
        license=text_fields["license"],
        compatibility=text_fields["compatibility"],
    )
    return out.result(skill)


def _resolve_name(
    directory: Path,
    out: _Collector,
    front: dict[str, Any],
    seed: dict[str, Any],
    has_front: bool,
) -> str:
    skill_md = directory / SKILL_FILE
    seed_file = directory / SEED_FILE
    seed_id = seed.get("id")
    if seed_id is not None and not isinstance(seed_id, str):
        out.add(seed_file, "id", f"must be a string, not {seed_id!r}", "error")
        seed_id = str(seed_id)
    if has_front:
        raw = front.get("name")
        if raw is None:
            out.add(skill_md, "name", "is missing; the directory's name is used", "error")
            name = seed_id or directory.name
        else:
            if not isinstance(raw, str):
                out.add(skill_md, "name", f"must be a string, not {raw!r}", "error")
            name = str(raw)
            if seed_id is not None and seed_id != name:
                reason = f"{seed_id!r} differs from the front matter's name {name!r}, which wins"
                out.add(seed_file, "id", reason, "error")
        out.extend(check_name(name, directory=directory.name, file=skill_md, seed_form=False))
        return name
    name = seed_id or directory.name
    out.extend(check_name(name, directory=directory.name, file=seed_file, seed_form=True))
    return name


def _usable_name(name: str) -> bool:
    """Whether ``name`` can name a skill at all: one path component, no control characters.

    Names outside the specification (capitals, underscores, unicode) still load with an error;
    these cannot, because ``SandboxSkillManager`` turns the name into a sandbox path and the
    system prompt lists it on one line.
    """
    if name in ("", ".", "..") or "/" in name or "\\" in name:
        return False
    return not any(unicodedata.category(char)[0] in ("C", "Z") and char != " " for char in name)


def _pick_text(
    out: _Collector,
    front: dict[str, Any],
    seed: dict[str, Any],
    field: str,
    front_file: Path,
    seed_file: Path,
) -> str | None:
    front_value, seed_value = front.get(field), seed.get(field)
    for value, file in ((front_value, front_file), (seed_value, seed_file)):
        if value is not None and not isinstance(value, str):
            out.add(file, field, f"must be a string, not a YAML {type(value).__name__}", "error")
    if front_value is not None and seed_value is not None and front_value != seed_value:
        reason = "differs from the front matter's, which wins"
        out.add(seed_file, field, reason, "warning")
    chosen = front_value if front_value is not None else seed_value
    return None if chosen is None else _stringify(chosen)


def _scenarios(out: _Collector, seed: dict[str, Any], seed_file: Path) -> tuple[str, ...]:
    key = "activation_scenarios" if "activation_scenarios" in seed else "scenarios"
    raw = seed.get(key)
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        return tuple(raw)
    out.add(seed_file, key, "must be a string or a list of strings", "error")
    return ()


def _display_name(seed: dict[str, Any], body: str) -> str | None:
    if isinstance(seed.get("name"), str):
        return str(seed["name"])
    for line in body.split("\n"):
        if line.strip():
            return _seed_heading(line.strip())
    return None


def _seed_heading(line: str) -> str | None:
    """The name of a ``# Skill: NAME ##`` heading, read without a regex: the heading is a
    skill author's (an upstream server's) text, and the regex this replaces
    (``#\\s*Skill:\\s*(.+?)\\s*#*\\s*``) backtracked cubically over runs of spaces."""
    if not line.startswith("#"):
        return None
    rest = line[1:].lstrip()
    if not rest.startswith("Skill:"):
        return None
    name = rest.removeprefix("Skill:").strip().rstrip("#").rstrip()
    return name or None


def _stringify(value: Any) -> str:
    """A string for metadata: scalars as text, lists and maps as one line of YAML flow style.

    YAML (not JSON) keeps aliases as aliases, so a front matter full of nested aliases cannot
    blow up into gigabytes here.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        dumped = yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True)
        return str(dumped).strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
