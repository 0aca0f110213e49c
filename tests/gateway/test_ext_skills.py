"""The MCP Skills extension in the gateway: ``skills/list``, ``skills/get``, both protocol eras."""

from __future__ import annotations

import hashlib
from pathlib import Path

import mcp_types as mt
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from sagents.gateway import Gateway, Profile
from sagents.gateway._sources import SkillResources
from sagents.mcp._ext_types import (
    SKILLS_EXTENSION,
    GetSkillRequest,
    GetSkillRequestParams,
    GetSkillResult,
    ListSkillsRequest,
    ListSkillsResult,
)
from sagents.skill import SkillManager
from tests.gateway.fakes import FakeProvider

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "auto"]


def _skills(root: Path) -> SkillManager:
    pdf = root / "pdf-tools"
    (pdf / "scripts").mkdir(parents=True)
    (pdf / "SKILL.md").write_text(
        "---\nname: pdf-tools\ndescription: Fill PDF forms\nlicense: MIT\n"
        "metadata:\n  version: '2'\n---\n# PDF\nUse scripts/fill.py\n",
        encoding="utf-8",
    )
    (pdf / "scripts" / "fill.py").write_bytes(b"print('fill')\n")
    (pdf / ".secret").write_text("hidden", encoding="utf-8")
    other = root / "notes"
    other.mkdir()
    (other / "SKILL.md").write_text(
        "---\nname: notes\ndescription: Take notes\n---\nbody\n", encoding="utf-8"
    )
    manager = SkillManager()
    manager.add_skill_dir(root)
    return manager


async def _list(client: Client) -> ListSkillsResult:
    return await client.session.send_request(ListSkillsRequest(), ListSkillsResult)


async def _get(client: Client, uri: str) -> GetSkillResult:
    request = GetSkillRequest(params=GetSkillRequestParams(uri=uri))
    return await client.session.send_request(request, GetSkillResult)


@pytest.mark.parametrize("era", ERAS)
async def test_skills_list_describes_each_skill_with_front_matter_and_digests(
    tmp_path: Path, era: str
) -> None:
    resources = SkillResources(_skills(tmp_path / "skills"))
    async with (
        Gateway(FakeProvider(), resources=resources) as gateway,
        Client(gateway.server, mode=era) as client,
    ):
        # 2025-11-25 capabilities have no `extensions` field: announced on 2026-07-28 only
        announced = SKILLS_EXTENSION in (client.server_capabilities.extensions or {})
        assert announced == (era == "auto")
        listing = await _list(client)
    by_uri = {entry.uri: entry for entry in listing.skills}
    assert set(by_uri) == {"skill://pdf-tools/SKILL.md", "skill://notes/SKILL.md"}
    pdf = by_uri["skill://pdf-tools/SKILL.md"]
    assert pdf.frontmatter == {
        "name": "pdf-tools",
        "description": "Fill PDF forms",
        "license": "MIT",
        "metadata": {"version": "2"},
    }
    assert not isinstance(pdf.resources, str)
    files = {f.uri: f for f in pdf.resources}
    assert set(files) == {"skill://pdf-tools/SKILL.md", "skill://pdf-tools/scripts/fill.py"}
    script = b"print('fill')\n"
    assert files["skill://pdf-tools/scripts/fill.py"].digest == (
        "sha256:" + hashlib.sha256(script).hexdigest()
    )
    assert files["skill://pdf-tools/scripts/fill.py"].size == len(script)
    assert listing.cache_scope == "private"


@pytest.mark.parametrize("era", ERAS)
async def test_skills_get_answers_one_skill_and_digests_match_resources_read(
    tmp_path: Path, era: str
) -> None:
    resources = SkillResources(_skills(tmp_path / "skills"))
    async with (
        Gateway(FakeProvider(), resources=resources) as gateway,
        Client(gateway.server, mode=era) as client,
    ):
        got = await _get(client, "skill://pdf-tools/SKILL.md")
        assert not isinstance(got.skill.resources, str)
        for listed in got.skill.resources:
            read = await client.read_resource(listed.uri)
            block = read.contents[0]
            assert isinstance(block, mt.TextResourceContents)
            data = block.text.encode("utf-8")
            assert listed.digest == "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("era", ERAS)
async def test_skills_get_refuses_a_skill_outside_the_session_profile(
    tmp_path: Path, era: str
) -> None:
    resources = SkillResources(_skills(tmp_path / "skills"))
    profile = Profile(name="notes-only", skills=frozenset({"notes"}))
    async with (
        Gateway(FakeProvider(), resources=resources, profile=profile) as gateway,
        Client(gateway.server, mode=era) as client,
    ):
        listing = await _list(client)
        assert [entry.uri for entry in listing.skills] == ["skill://notes/SKILL.md"]
        with pytest.raises(MCPError) as raised:
            await _get(client, "skill://pdf-tools/SKILL.md")
        assert raised.value.error.code == -32602
        with pytest.raises(MCPError):
            await _get(client, "skill://notes/../pdf-tools/SKILL.md")


async def test_a_gateway_without_skills_does_not_advertise_the_extension() -> None:
    async with (
        Gateway(FakeProvider()) as gateway,
        Client(gateway.server) as client,
    ):
        assert SKILLS_EXTENSION not in (client.server_capabilities.extensions or {})
        with pytest.raises(MCPError) as raised:
            await _list(client)
        assert raised.value.error.code == -32601


async def test_a_skill_md_resource_is_named_as_its_skill(tmp_path: Path) -> None:
    resources = SkillResources(_skills(tmp_path / "skills"))
    async with (
        Gateway(FakeProvider(), resources=resources) as gateway,
        Client(gateway.server) as client,
    ):
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
    skill_md = listed["skill://pdf-tools/SKILL.md"]
    assert skill_md.name == "pdf-tools"
    assert skill_md.mime_type == "text/markdown"
    assert listed["skill://pdf-tools/scripts/fill.py"].name == "pdf-tools/scripts/fill.py"
