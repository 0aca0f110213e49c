"""Writing small skill directories for tests."""

from __future__ import annotations

import posixpath
import shutil
from collections.abc import Iterable
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


class FakeToolProxy:
    """The whitelist part of ToolProxy: restrict() only narrows."""

    def __init__(self, allowed: Iterable[str]) -> None:
        self.allowed = set(allowed)

    def restrict(self, names: Iterable[str]) -> None:
        self.allowed &= set(names)

    def can_call(self, name: str) -> bool:
        return name in self.allowed


class MemoryFiles:
    """A sandbox file API whose files live in a dict, not on the host.

    Relative paths resolve against ``/workspace``, as the sandbox package's providers do.
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {"/", "/workspace"}
        self.writes: list[str] = []

    @staticmethod
    def norm(path: str) -> str:
        return posixpath.normpath(path if path.startswith("/") else f"/workspace/{path}")

    async def read_file(self, path: str) -> bytes:
        return self.files[self.norm(path)]

    async def write_file(self, path: str, data: bytes) -> str:
        full = self.norm(path)
        assert posixpath.dirname(full) in self.dirs, f"parent of {path} missing"
        self.files[full] = data
        self.writes.append(full)
        return full

    async def exists(self, path: str) -> bool:
        full = self.norm(path)
        return full in self.files or full in self.dirs

    async def mkdir(self, path: str) -> str:
        full = self.norm(path)
        assert posixpath.dirname(full) in self.dirs, f"parent of {path} missing"
        assert full not in self.dirs
        self.dirs.add(full)
        return full
