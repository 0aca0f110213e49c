"""Writing small skill directories for tests."""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def write_skill(
    root: Path,
    directory: str,
    skill_md: str | bytes | None,
    *,
    skill_yaml: str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """Create ``root/directory`` with the given SKILL.md (text or raw bytes), skill.yaml, files."""
    path = root / directory
    path.mkdir(parents=True, exist_ok=True)
    if isinstance(skill_md, bytes):
        (path / "SKILL.md").write_bytes(skill_md)
    elif skill_md is not None:
        (path / "SKILL.md").write_text(skill_md, encoding="utf-8", newline="")
    if skill_yaml is not None:
        (path / "skill.yaml").write_text(skill_yaml, encoding="utf-8")
    for relative, content in (files or {}).items():
        target = path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    return path


def spec_md(name: str, description: str = "Does a thing. Use when a thing is needed.") -> str:
    """A minimal valid spec-form SKILL.md."""
    return f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nSteps.\n"


def copy_fixture(name: str, destination: Path) -> Path:
    """Copy a fixture root (``seed_root``, ``spec_root``) into ``destination``."""
    target = destination / name
    shutil.copytree(FIXTURES / name, target)
    return target
