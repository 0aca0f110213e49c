"""``resources/directory/read`` (the Skills extension's "Reading Directories") in the gateway:
skill directories, forwarded directories of an upstream that declares ``directoryRead``, and
every other URI refused with -32602."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from sagents.gateway import Gateway, Profile
from sagents.gateway._ext_directory import DIRECTORY_PAGE_SIZE, skill_directory
from sagents.gateway._factory import open_gateway
from sagents.gateway._settings import GatewaySettings
from sagents.gateway._sources import SkillResources
from sagents.mcp._ext_types import (
    DIRECTORY_MIME_TYPE,
    SKILLS_EXTENSION,
    ReadResourceDirectoryRequest,
    ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult,
)
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_ext_skills import _skills

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
EXT_SERVER = ROOT / "tests" / "mcp" / "servers" / "ext_server.py"


async def read_dir(
    client: Client, uri: str, cursor: str | None = None
) -> ReadResourceDirectoryResult:
    request = ReadResourceDirectoryRequest(
        params=ReadResourceDirectoryRequestParams(uri=uri, cursor=cursor)
    )
    return await client.session.send_request(request, ReadResourceDirectoryResult)


async def refused(client: Client, uri: str) -> int:
    with pytest.raises(MCPError) as error:
        await read_dir(client, uri)
    return error.value.error.code


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_skill_directories_list_their_direct_children(tmp_path: Path, era: str) -> None:
    async with (
        Gateway(FakeProvider(), resources=SkillResources(_skills(tmp_path))) as gateway,
        Client(gateway.server, mode=era) as client,
    ):
        if era == "auto":
            settings = (client.server_capabilities.extensions or {})[SKILLS_EXTENSION]
            assert settings == {"directoryRead": True}
        with anyio.fail_after(10):
            root = await read_dir(client, "skill://pdf-tools")
            scripts = await read_dir(client, "skill://pdf-tools/scripts")
            codes = [
                await refused(client, uri)
                for uri in (
                    "skill://pdf-tools/SKILL.md",  # a file
                    "skill://pdf-tools/",  # a trailing slash
                    "skill://nothing",
                    "skill://pdf-tools/.secret",
                    "file:///etc",
                    "sagents://tasks/x",
                )
            ]
    assert [(r.uri, r.name, r.mime_type) for r in root.resources] == [
        ("skill://pdf-tools/SKILL.md", "SKILL.md", "text/markdown"),
        ("skill://pdf-tools/scripts", "scripts", DIRECTORY_MIME_TYPE),
    ]
    assert [r.uri for r in scripts.resources] == ["skill://pdf-tools/scripts/fill.py"]
    assert root.next_cursor is None
    assert codes == [-32602] * 6


async def test_a_skill_outside_the_profile_is_no_directory(tmp_path: Path) -> None:
    profile = Profile(name="notes-only", skills=frozenset({"notes"}))
    async with (
        Gateway(
            FakeProvider(), resources=SkillResources(_skills(tmp_path)), profile=profile
        ) as gateway,
        Client(gateway.server) as client,
    ):
        with anyio.fail_after(10):
            assert await refused(client, "skill://pdf-tools") == -32602
            notes = await read_dir(client, "skill://notes")
    assert [r.uri for r in notes.resources] == ["skill://notes/SKILL.md"]


def test_a_large_directory_is_paginated_by_the_page_size() -> None:
    files = [
        mt.Resource(uri=f"skill://big/f{i:04}.txt", name=f"f{i}")
        for i in range(DIRECTORY_PAGE_SIZE + 5)
    ]
    children = skill_directory(files, "skill://big")
    assert children is not None
    assert len(children) == DIRECTORY_PAGE_SIZE + 5
    assert skill_directory(files, "skill://big/f0000.txt") is None
    assert skill_directory(files, "skill://") is None


async def test_a_forwarded_directory_is_read_upstream_and_rewritten(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "pdf-tools"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: pdf-tools\ndescription: PDFs\n---\nx\n")
    (skill / "scripts" / "fill.py").write_text("print(1)\n")
    local = tmp_path / "local" / "mine"
    local.mkdir(parents=True)
    (local / "SKILL.md").write_text("---\nname: mine\ndescription: Mine\n---\nx\n")
    document = {
        "mcpServers": {
            "up": {
                "command": sys.executable,
                "args": [str(EXT_SERVER), str(tmp_path / "skills")],
                "env": {"PYTHONPATH": str(ROOT)},
            }
        },
        "skills": {"directories": [str(tmp_path / "local")]},
    }
    config = tmp_path / "sagents.json"
    config.write_text(json.dumps(document), encoding="utf-8")
    base = "sagents://upstream/up/skill://pdf-tools"
    with anyio.fail_after(60):
        async with (
            open_gateway(GatewaySettings(config=config, mode="auto")) as gateway,
            Client(gateway.server) as client,
        ):
            root = await read_dir(client, base)
            scripts = await read_dir(client, f"{base}/scripts")
            mine = await read_dir(client, "skill://mine")
            file_code = await refused(client, f"{base}/SKILL.md")
            other_code = await refused(client, "sagents://upstream/nobody/skill://x")
    assert [(r.uri, r.mime_type) for r in root.resources] == [
        (f"{base}/SKILL.md", "text/markdown"),
        (f"{base}/scripts", DIRECTORY_MIME_TYPE),
    ]
    assert [r.uri for r in scripts.resources] == [f"{base}/scripts/fill.py"]
    assert [r.uri for r in mine.resources] == ["skill://mine/SKILL.md"]
    assert file_code == -32602
    assert other_code == -32602
