"""``MCPSkillSource``: an MCP server's skills listed from ``skills/list`` and fetched on first
use, against an in-memory server (the gateway's end-to-end tests are in
tests/gateway/test_upstream_skills.py)."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import anyio
import mcp_types as mt
import pytest
from mcp.shared.exceptions import MCPError

from sagents.errors import SkillError, SkillNotFoundError
from sagents.mcp._ext_types import ListSkillsResult, SkillEntry, SkillFile
from sagents.skill import SkillProxy
from sagents.skill._disclosure import load_skill
from sagents.skill._mcp_source import MCPSkillSource, SkillServer
from sagents.skill._proxy import prepare_skill

pytestmark = pytest.mark.anyio


def _skill_md(name: str, body: str = "Do it.") -> bytes:
    return f"---\nname: {name}\ndescription: The {name} skill\n---\n{body}\n".encode()


class FakeServer:
    """One server's skills (``{name: {path: bytes}}``); counts what it is asked."""

    def __init__(self, skills: dict[str, dict[str, bytes]]) -> None:
        self.skills = skills
        self.reads: Counter[str] = Counter()
        self.lists = 0
        self.listed: dict[str, dict[str, bytes]] = {}  # what the last listing described
        self.fail_listing: str | None = None
        self.tampered = False  # every file read is sent as "x"

    def entry(self, name: str, files: dict[str, bytes]) -> SkillEntry:
        return SkillEntry(
            uri=f"skill://{name}/SKILL.md",
            frontmatter={"name": name, "description": f"The {name} skill"},
            resources=[
                SkillFile(
                    uri=f"skill://{name}/{path}",
                    digest="sha256:" + hashlib.sha256(data).hexdigest(),
                    size=len(data),
                )
                for path, data in files.items()
            ],
        )

    async def list_skills(self, server: str, cursor: str | None) -> ListSkillsResult:
        self.lists += 1
        if self.fail_listing is not None:
            raise MCPError(-32601, self.fail_listing)
        self.listed = {name: dict(files) for name, files in self.skills.items()}
        return ListSkillsResult(skills=[self.entry(n, f) for n, f in self.skills.items()])

    async def read_resource(self, server: str, uri: str) -> mt.ReadResourceResult:
        self.reads[uri] += 1
        name, _, path = uri.removeprefix("skill://").partition("/")
        text = "x" if self.tampered else self.skills[name][path].decode()
        return mt.ReadResourceResult(contents=[mt.TextResourceContents(uri=uri, text=text)])


def _source(server: FakeServer, tmp_path: Path, **options: int) -> MCPSkillSource:
    return MCPSkillSource(
        [SkillServer(name="docs", list_timeout_s=5, fetch_timeout_s=5)],
        server,
        tmp_path / "cache",
        **options,  # type: ignore[arg-type]
    )


async def test_listing_offers_namespaced_skills_and_reads_no_file(tmp_path: Path) -> None:
    server = FakeServer({"pdf-tools": {"SKILL.md": _skill_md("pdf-tools"), "a.txt": b"a\n"}})
    async with _source(server, tmp_path) as source:
        await source.refresh("docs")
        [skill] = source.list_skills()
        assert skill.name == "docs__pdf-tools"
        assert skill.description == "The pdf-tools skill"
        assert skill.files == ("SKILL.md", "a.txt")
        assert skill.body == ""  # not fetched yet
        assert sum(server.reads.values()) == 0
        await source.fetch_skill("docs__pdf-tools")
        fetched = source.get_skill("docs__pdf-tools")
        assert fetched is not None
        assert fetched.body.strip() == "Do it."
        assert fetched.path == tmp_path / "cache" / "docs" / "pdf-tools"
    assert not (tmp_path / "cache").exists()  # leaving removes the copies


async def test_two_readers_of_one_skill_fetch_it_once(tmp_path: Path) -> None:
    server = FakeServer({"one": {"SKILL.md": _skill_md("one")}})
    async with _source(server, tmp_path) as source:
        await source.refresh("docs")
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(source.fetch_skill, "docs__one")
    assert server.reads["skill://one/SKILL.md"] == 1


async def test_the_least_recently_used_copy_is_dropped_past_the_bound(tmp_path: Path) -> None:
    server = FakeServer({name: {"SKILL.md": _skill_md(name)} for name in ("one", "two")})
    async with _source(server, tmp_path, max_cached_skills=1) as source:
        await source.refresh("docs")
        await source.fetch_skill("docs__one")
        await source.fetch_skill("docs__two")
        assert not (source.cache / "docs" / "one").exists()
        assert (source.cache / "docs" / "two" / "SKILL.md").exists()
        await source.fetch_skill("docs__one")
    assert server.reads["skill://one/SKILL.md"] == 2


async def test_a_file_changed_without_announcement_is_relisted_and_fetched_anew(
    tmp_path: Path,
) -> None:
    server = FakeServer({"one": {"SKILL.md": _skill_md("one", "Old.")}})
    async with _source(server, tmp_path) as source:
        await source.refresh("docs")
        server.skills["one"]["SKILL.md"] = _skill_md("one", "New.")  # no announcement
        await source.fetch_skill("docs__one")
        skill = source.get_skill("docs__one")
    assert skill is not None
    assert skill.body.strip() == "New."
    assert server.lists == 2  # the mismatch relisted once


async def test_a_file_that_never_matches_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    server = FakeServer({"one": {"SKILL.md": _skill_md("one")}})
    async with _source(server, tmp_path) as source:
        await source.refresh("docs")
        server.tampered = True
        with pytest.raises(SkillError, match="does not match its digest") as caught:
            await source.fetch_skill("docs__one")
        assert caught.value.details["skill"] == "docs__one"
        assert not (source.cache / "docs" / "one").exists()
        assert any("docs__one" in p.reason for p in source.problems())


async def test_a_failed_listing_hides_the_servers_skills_with_the_reason(tmp_path: Path) -> None:
    server = FakeServer({"one": {"SKILL.md": _skill_md("one")}})
    async with _source(server, tmp_path) as source:
        await source.refresh("docs")
        assert source.list_skill_names() == ["docs__one"]
        server.fail_listing = "Method not found"
        assert await source.refresh("docs") is True
        [status] = source.statuses()
        assert source.list_skills() == []
        assert status.state == "failed"
        assert status.reason is not None
        assert "Method not found" in status.reason
        assert any("are hidden" in p.reason for p in source.problems())


async def test_a_server_that_is_not_ready_hides_its_skills(tmp_path: Path) -> None:
    server = FakeServer({"one": {"SKILL.md": _skill_md("one")}})
    up = {"docs": True}
    source = MCPSkillSource(
        [SkillServer(name="docs")], server, tmp_path / "cache", ready=lambda name: up[name]
    )
    async with source:
        await source.refresh("docs")
        assert source.list_skill_names() == ["docs__one"]
        up["docs"] = False
        assert source.list_skills() == []
        assert source.get_skill("docs__one") is None


async def test_a_proxy_fetches_before_loading_and_only_skills_it_offers(tmp_path: Path) -> None:
    server = FakeServer({name: {"SKILL.md": _skill_md(name)} for name in ("one", "two")})
    async with _source(server, tmp_path) as source:
        await source.refresh("docs")
        proxy = SkillProxy(source, available_skills=["docs__one"])
        await prepare_skill(proxy, "docs__one")
        await prepare_skill(proxy, "docs__two")
        assert load_skill(proxy, "docs__one").body.strip() == "Do it."
        with pytest.raises(SkillNotFoundError):
            load_skill(proxy, "docs__two")
    assert server.reads["skill://two/SKILL.md"] == 0


async def test_a_server_that_is_not_ready_is_reported_as_such(tmp_path: Path) -> None:
    source = MCPSkillSource(
        [SkillServer(name="docs")], FakeServer({}), tmp_path / "cache", ready=lambda name: False
    )
    [status] = source.statuses()
    assert status.state == "failed"
    assert status.reason == "the MCP server is not ready"
