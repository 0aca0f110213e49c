"""Benchmark of skills: freshness checks, parsing, prompt rendering and sandbox projection.

Run: .venv/bin/python bench/bench_skills.py

Each figure is a ratio against a baseline measured in the same run, so machines compare:
- ``get_skill`` and ``list_skills`` (freshness checks) vs a full ``reload()``;
- ``parse_skill_dir`` vs a bare YAML load (same loader) of the same front matter;
- ``load_yaml_document`` (duplicate-key and alias-expansion checks) vs that bare YAML load, and
  refusing an alias bomb vs the bare YAML load of the same bomb (which only builds references);
- ``render_skills_prompt`` under a tight budget vs one ``count_tokens`` of the full listing;
- an unchanged re-projection vs the first projection into an in-memory sandbox.
"""

from __future__ import annotations

import posixpath
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import yaml

from sagents.skill import SandboxSkillManager, SkillManager, count_tokens, render_skills_prompt
from sagents.skill._frontmatter import FrontMatterError, load_yaml_document
from sagents.skill._parser import parse_skill_dir

SKILLS = 200  # skills in the benchmark root
FILES_PER_SKILL = 5  # extra files shipped by each skill
REPEATS = 5


def _best(action: Callable[[], object], repeats: int = REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def _make_root(root: Path) -> None:
    for index in range(SKILLS):
        name = f"skill-{index:03d}"
        directory = root / name
        (directory / "scripts").mkdir(parents=True)
        description = f"Handles task family {index}. Use when the user asks about {index}. " * 3
        (directory / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {description}\nallowed-tools: a b c\n---\n"
            + "Step.\n" * 50
        )
        for number in range(FILES_PER_SKILL):
            (directory / "scripts" / f"s{number}.py").write_text("print(1)\n" * 20)


class _MemoryFiles:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {"/"}

    async def read_file(self, path: str) -> bytes:
        return self.files[path]

    async def write_file(self, path: str, data: bytes) -> None:
        self.files[path] = data

    async def exists(self, path: str) -> bool:
        return path in self.files or path in self.dirs

    async def mkdir(self, path: str) -> None:
        self.dirs.add(posixpath.normpath(path))


def main() -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        _make_root(root)
        manager = SkillManager()
        manager.add_skill_dir(root)
        assert len(manager.list_skills()) == SKILLS

        reload_time = _best(manager.reload)
        access_time = _best(manager.list_skills)
        get_time = _best(lambda: manager.get_skill("skill-100"))
        print(
            f"{SKILLS} skills: get_skill (freshness check) / reload = {get_time / reload_time:.4f}"
        )
        print(
            f"{SKILLS} skills: list_skills (freshness check) / reload = "
            f"{access_time / reload_time:.3f}  ({access_time * 1e3:.1f} ms vs "
            f"{reload_time * 1e3:.1f} ms)"
        )

        one = root / "skill-000"
        text = (one / "SKILL.md").read_text()
        front = text.split("---\n")[1]
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        yaml_time = _best(lambda: [yaml.load(front, Loader=loader) for _ in range(100)])
        parse_time = _best(lambda: [parse_skill_dir(one) for _ in range(100)])
        print(
            f"parse_skill_dir / a bare YAML load of its front matter = {parse_time / yaml_time:.2f}"
        )
        checked_time = _best(lambda: [load_yaml_document(front) for _ in range(100)])
        print(
            "load_yaml_document / a bare YAML load of the same front matter = "
            f"{checked_time / yaml_time:.2f}"
        )
        bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]\n" for n in range(1, 9)
        )

        def refuse_bomb() -> None:
            try:
                load_yaml_document(bomb)
            except FrontMatterError:
                return
            raise AssertionError("the alias bomb was not refused")

        bare_bomb = _best(lambda: yaml.load(bomb, Loader=loader))
        refuse_time = _best(refuse_bomb)
        print(
            "refusing a 10**9-value alias bomb / a bare YAML load of it = "
            f"{refuse_time / bare_bomb:.2f}"
        )

        skills = manager.list_skills()
        listing = render_skills_prompt(skills, max_tokens=10**9)
        count_time = _best(lambda: count_tokens(listing))
        render_time = _best(lambda: render_skills_prompt(skills, max_tokens=2000))
        print(
            f"render_skills_prompt(max_tokens=2000) / count_tokens(full listing) = "
            f"{render_time / count_time:.2f}"
        )

        async def project_all(sandbox: SandboxSkillManager) -> None:
            for skill in skills[:50]:
                await sandbox.project(skill.name)

        files = _MemoryFiles()
        sandbox = SandboxSkillManager(manager, files, root="/ws/skills")
        start = time.perf_counter()
        anyio.run(project_all, sandbox)
        first = time.perf_counter() - start
        again = _best(lambda: anyio.run(project_all, sandbox))
        print(f"50 skills: unchanged re-projection / first projection = {again / first:.2f}")


if __name__ == "__main__":
    main()
