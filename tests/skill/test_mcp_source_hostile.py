"""``MCPSkillSource`` against hostile or unlucky servers: names the disk refuses and eviction
racing a fetch of the evicted skill (the friendly cases are in tests/skill/test_mcp_source.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import mcp_types as mt
import pytest

from sagents.errors import SkillError
from sagents.mcp._ext_types import ListSkillsResult
from sagents.skill import _mcp_source as mcp_source
from tests.skill.test_mcp_source import FakeServer, _skill_md, _source

pytestmark = pytest.mark.anyio


async def test_a_file_name_the_disk_refuses_is_a_skill_error_and_nothing_is_kept(
    tmp_path: Path,
) -> None:
    long_name = "a" * 300 + ".txt"  # past NAME_MAX (255 bytes)
    server = FakeServer({"one": {"SKILL.md": _skill_md("one"), long_name: b"x"}})
    async with _source(server, tmp_path) as source:
        await source.refresh("docs")
        with pytest.raises(SkillError, match="cannot be written") as caught:
            await source.fetch_skill("docs__one")
        assert caught.value.details["skill"] == "docs__one"
        assert not (source.cache / "docs" / "one").exists()
        assert list((source.cache / "docs").iterdir()) == []  # no staging left behind
        assert any("docs__one" in p.reason for p in source.problems())


async def test_an_eviction_never_removes_a_copy_fetched_again_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeServer({name: {"SKILL.md": _skill_md(name)} for name in ("one", "two")})
    removing = anyio.Event()
    go = threading.Event()
    real_remove = mcp_source._remove
    token = anyio.lowlevel.current_token()

    def slow_remove(path: Path) -> None:  # the eviction's removal, held until told to go
        if path.name == "one":
            anyio.from_thread.run_sync(removing.set, token=token)
            go.wait(10)
        real_remove(path)

    monkeypatch.setattr(mcp_source, "_remove", slow_remove)
    async with _source(server, tmp_path, max_cached_skills=1) as source:
        await source.refresh("docs")
        await source.fetch_skill("docs__one")
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(source.fetch_skill, "docs__two")  # evicts one
                await removing.wait()
                async with anyio.create_task_group() as again:
                    again.start_soon(source.fetch_skill, "docs__one")  # while one is removed
                    await anyio.wait_all_tasks_blocked()
                    go.set()
        skill = source.get_skill("docs__one")
        assert skill is not None
        assert source.is_current("docs__one")
        assert (skill.path / "SKILL.md").read_bytes() == _skill_md("one")


class BlobServer(FakeServer):
    """Answers every ``resources/read`` with a blob that is not base64."""

    async def read_resource(self, server: str, uri: str) -> mt.ReadResourceResult:
        self.reads[uri] += 1
        return mt.ReadResourceResult(contents=[mt.BlobResourceContents(uri=uri, blob="abc")])


async def test_a_blob_that_is_not_base64_is_a_skill_error(tmp_path: Path) -> None:
    server = BlobServer({"one": {"SKILL.md": _skill_md("one")}})
    async with _source(server, tmp_path) as source:
        await source.refresh("docs")
        with pytest.raises(SkillError, match="not base64") as caught:
            await source.fetch_skill("docs__one")
        assert caught.value.details["skill"] == "docs__one"
        assert not (source.cache / "docs" / "one").exists()


class EndlessServer(FakeServer):
    """Lists one new skill per page, with a new cursor every time."""

    async def list_skills(self, server: str, cursor: str | None) -> ListSkillsResult:
        self.lists += 1
        page = int(cursor or "0")
        name = f"s{page}"
        entry = self.entry(name, {"SKILL.md": _skill_md(name)})
        return ListSkillsResult(skills=[entry], next_cursor=str(page + 1))


async def test_a_listing_cut_after_its_last_page_says_so(tmp_path: Path) -> None:
    server = EndlessServer({})
    async with _source(server, tmp_path) as source:
        await source.refresh("docs")
        [status] = source.statuses()
    assert status.state == "listed"
    assert len(status.skills) == server.lists == 100
    assert status.reason is not None
    assert "100 pages" in status.reason


class SlowListingServer(FakeServer):
    """Holds each ``skills/list`` until :attr:`go` is set."""

    def __init__(self, skills: dict[str, dict[str, bytes]]) -> None:
        super().__init__(skills)
        self.go = anyio.Event()
        self.asked = anyio.Event()

    async def list_skills(self, server: str, cursor: str | None) -> ListSkillsResult:
        self.asked.set()
        await self.go.wait()
        return await super().list_skills(server, cursor)


async def test_announcements_in_a_loop_cost_at_most_one_more_listing(tmp_path: Path) -> None:
    server = SlowListingServer({"one": {"SKILL.md": _skill_md("one")}})
    async with _source(server, tmp_path) as source:
        with anyio.fail_after(10):
            source.refresh_soon("docs")
            await server.asked.wait()
            for _ in range(1000):  # list_changed, again and again, while one listing runs
                source.refresh_soon("docs")
            server.go.set()
            await source.settled()
    assert server.lists == 2


async def test_a_reload_removes_the_copies_it_drops(tmp_path: Path) -> None:
    server = FakeServer(
        {"one": {"SKILL.md": _skill_md("one")}, "two": {"SKILL.md": _skill_md("two")}}
    )
    async with _source(server, tmp_path) as source:
        await source.refresh("docs")
        await source.fetch_skill("docs__one")
        await source.fetch_skill("docs__two")
        del server.skills["two"]  # the relisting after the reload drops it
        source.reload()
        with anyio.fail_after(10):
            await source.settled()
        assert source.list_skill_names() == ["docs__one"]
        assert not (source.cache / "docs" / "two").exists()  # not left on disk, uncounted
        await source.fetch_skill("docs__one")
        skill = source.get_skill("docs__one")
        assert skill is not None
        assert (skill.path / "SKILL.md").read_bytes() == _skill_md("one")
