"""The Skills extension attacked: skills/get and resources/read never serve a file outside the
offered skills, whatever the URI says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from sagents.gateway import Gateway, Profile
from sagents.gateway._sources import SkillResources
from sagents.skill import SkillManager
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_ext_skills import _get, _list

pytestmark = pytest.mark.anyio


def _skills(root: Path, outside: Path) -> SkillManager:
    for name in ("pdf-tools", "secret-ops"):
        skill = root / name
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: d\n---\nbody\n", encoding="utf-8"
        )
    pdf = root / "pdf-tools"
    (pdf / ".env").write_text("TOKEN=1", encoding="utf-8")
    os.symlink(outside, pdf / "link.txt")
    os.symlink(outside.parent, pdf / "up")
    manager = SkillManager()
    manager.add_skill_dir(root)
    return manager


URIS = [
    "skill://pdf-tools/../secret-ops/SKILL.md",
    "skill://pdf-tools/%2E%2E/secret-ops/SKILL.md",
    "skill://pdf-tools/..%2Fsecret-ops%2FSKILL.md",
    "skill://pdf-tools/%252E%252E/secret-ops/SKILL.md",
    "skill://pdf-tools/..\\secret-ops\\SKILL.md",
    "skill://pdf-tools/.env",
    "skill://pdf-tools/link.txt",
    "skill://pdf-tools/up/outside.txt",
    "skill://pdf-tools/%2Fetc%2Fpasswd",
    "skill://pdf-tools//etc/passwd",
    "skill://pdf-tools/SKILL.md%00.txt",
    "skill://secret-ops/SKILL.md",
    "skill://%2E%2E/SKILL.md",
    "skill://secret-ops%2F..%2Fpdf-tools/SKILL.md",
]


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_nothing_outside_the_offered_skills_is_served(tmp_path: Path, era: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host secret", encoding="utf-8")
    resources = SkillResources(_skills(tmp_path / "skills", outside))
    profile = Profile(name="p", skills=frozenset({"pdf-tools"}))
    async with (
        Gateway(FakeProvider(), resources=resources, profile=profile) as gateway,
        Client(gateway.server, mode=era) as client,
    ):
        listed = await _list(client)
        served: list[str] = []
        for uri in URIS:
            try:
                read = await client.read_resource(uri)
            except MCPError:
                pass
            else:
                served.append(f"read {uri}: {read.contents}")
            try:
                await _get(client, uri)
            except MCPError:
                pass
            else:
                served.append(f"get {uri}")
    assert served == []
    [entry] = listed.skills
    assert isinstance(entry.resources, list)
    assert [f.uri for f in entry.resources] == ["skill://pdf-tools/SKILL.md"]
