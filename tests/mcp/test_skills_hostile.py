"""fetch_mcp_skills against a hostile upstream: every bad skill is refused clearly, and nothing
is written outside the cache."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from sagents.errors import SkillError
from sagents.mcp._ext_types import ListSkillsResult, SkillEntry, SkillFile
from sagents.skill.mcp_skills import fetch_mcp_skills

pytestmark = pytest.mark.anyio


def _md(name: str) -> bytes:
    return f"---\nname: {name}\ndescription: d\n---\nbody\n".encode()


def _file(uri: str, data: bytes) -> SkillFile:
    return SkillFile(uri=uri, digest="sha256:" + hashlib.sha256(data).hexdigest(), size=len(data))


def hostile(
    entries: list[SkillEntry], files: dict[str, bytes], *, hang: anyio.Event | None = None
) -> Server[Any]:
    async def read(
        ctx: ServerRequestContext[Any, Any], params: mt.ReadResourceRequestParams
    ) -> mt.ReadResourceResult:
        if hang is not None:
            await hang.wait()
        uri = str(params.uri)
        blob = base64.b64encode(files[uri]).decode()
        return mt.ReadResourceResult(contents=[mt.BlobResourceContents(uri=uri, blob=blob)])

    server: Server[Any] = Server("hostile", on_read_resource=read)

    async def list_skills(
        ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> ListSkillsResult:
        return ListSkillsResult(skills=entries)

    server.add_request_handler("skills/list", mt.PaginatedRequestParams, list_skills)
    return server


def entry(
    name: str, extra: dict[str, bytes] | None = None, *, base: str | None = None
) -> tuple[SkillEntry, dict[str, bytes]]:
    base = base if base is not None else f"skill://{name}/"
    files = {f"{base}SKILL.md": _md(name), **{f"{base}{k}": v for k, v in (extra or {}).items()}}
    resources = [_file(uri, data) for uri, data in files.items()]
    front = {"name": name, "description": "d"}
    return SkillEntry(uri=f"{base}SKILL.md", frontmatter=front, resources=resources), files


async def fetch(server: Server[Any], cache: Path, **kwargs: Any) -> Path:
    async with Client(server) as client:
        with anyio.fail_after(20):
            return await fetch_mcp_skills(client.session, "up", cache, **kwargs)


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a\x00b", "A B", "x" * 65])
async def test_a_skill_whose_name_is_not_a_skill_name_is_left_out(
    tmp_path: Path, name: str
) -> None:
    bad, bad_files = entry(name)
    good, good_files = entry("good")
    cache = tmp_path / "inner" / "cache"
    root = await fetch(hostile([bad, good], {**bad_files, **good_files}), cache)
    assert sorted(p.name for p in root.iterdir()) == ["good"]
    assert sorted(p.name for p in cache.iterdir()) == ["up"]
    assert sorted(p.name for p in (tmp_path / "inner").iterdir()) == ["cache"]


async def test_a_skill_with_a_file_and_a_folder_of_the_same_path_is_left_out(
    tmp_path: Path,
) -> None:
    bad, bad_files = entry("clash", {"a": b"file", "a/b": b"nested"})
    good, good_files = entry("good")
    root = await fetch(hostile([bad, good], {**bad_files, **good_files}), tmp_path / "cache")
    assert sorted(p.name for p in root.iterdir()) == ["good"]


async def test_a_file_whose_uri_is_percent_encoded_out_of_the_skill_is_left_out(
    tmp_path: Path,
) -> None:
    bad, bad_files = entry("enc", {"%2E%2E/%2E%2E/evil": b"x", "a%2Fb": b"y"})
    root = await fetch(hostile([bad], bad_files), tmp_path / "cache")
    assert list(root.iterdir()) == []
    assert not (tmp_path / "evil").exists()


async def test_a_server_that_never_answers_a_read_is_refused_in_time(tmp_path: Path) -> None:
    good, files = entry("good")
    never = anyio.Event()
    cache = tmp_path / "cache"
    async with Client(hostile([good], files, hang=never)) as client:
        with anyio.fail_after(20), pytest.raises(SkillError, match="did not answer") as raised:
            await fetch_mcp_skills(client.session, "up", cache, request_timeout_s=0.2)
        never.set()
    assert "resources/read" in raised.value.message
    assert list(cache.iterdir()) == []  # the partial fetch is not kept


async def test_skills_with_too_many_files_lying_sizes_or_front_matter_are_left_out(
    tmp_path: Path,
) -> None:
    many, many_files = entry("many", {f"f{i}.txt": b"x" for i in range(2000)})
    lying, lying_files = entry("lying", {"big.bin": b"small"})
    assert isinstance(lying.resources, list)
    lying.resources[1] = SkillFile(uri=lying.resources[1].uri, digest="sha256:00", size=5)
    front, front_files = entry("front")
    front.frontmatter["description"] = "something the SKILL.md does not say"
    good, good_files = entry("good")
    files = {**many_files, **lying_files, **front_files, **good_files}
    root = await fetch(hostile([many, lying, front, good], files), tmp_path / "cache")
    assert sorted(p.name for p in root.iterdir()) == ["good"]
