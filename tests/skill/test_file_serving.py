"""Only the files of a skill's file list are served, and opening one never leaves the skill.

``read_skill_file``, ``skill://`` resources and the sandbox projection all read through
``read_skill_file_bytes``; these tests drive it through ``read_skill_resource`` and the gateway's
``SkillResources``.
"""

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sagents.errors import PathNotAllowedError, SkillResourceNotFoundError
from sagents.gateway._sources import SkillResources
from sagents.skill import SkillManager, read_skill_resource
from sagents.skill._files import SkillFileEscape, open_skill_file
from tests.skill.helpers import spec_md, write_skill

SECRET = "host secret"


@pytest.fixture
def skill_dir(tmp_path: Path) -> Path:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "notes.md").write_text(SECRET)
    (tmp_path / "outside" / "secret").write_text(SECRET)
    skill = write_skill(
        tmp_path / "root",
        "hidden",
        spec_md("hidden"),
        files={
            ".env": "API_KEY=" + SECRET,
            ".git/config": "[remote]\n" + SECRET,
            "sub/.token": SECRET,
            "references/notes.md": "# Notes",
        },
    )
    return skill


def _manager(skill_dir: Path) -> SkillManager:
    manager = SkillManager()
    manager.add_skill_dir(skill_dir.parent)
    return manager


@pytest.mark.parametrize("path", [".env", ".git/config", "sub/.token", "./.env", ".git//config"])
def test_hidden_files_are_not_served(skill_dir: Path, path: str) -> None:
    manager = _manager(skill_dir)
    skill = manager.get_skill("hidden")
    assert skill is not None
    assert ".env" not in skill.files
    with pytest.raises(SkillResourceNotFoundError):
        read_skill_resource(manager, "hidden", path)


@pytest.mark.anyio
async def test_hidden_files_are_not_served_as_skill_resources(skill_dir: Path) -> None:
    resources = SkillResources(_manager(skill_dir))
    uris = [link.uri for link in resources.list_resources(None)]
    assert "skill://hidden/.env" not in uris
    for path in (".env", ".git/config", "%2Eenv"):
        with pytest.raises(SkillResourceNotFoundError):
            await resources.read_resource(f"skill://hidden/{path}", None)
    read = await resources.read_resource("skill://hidden/references/notes.md", None)
    assert read.text == "# Notes"


def test_a_directory_link_out_of_the_skill_is_refused(skill_dir: Path) -> None:
    (skill_dir / "linked").symlink_to(skill_dir.parent.parent / "outside")
    manager = _manager(skill_dir)
    with pytest.raises(PathNotAllowedError, match="symbolic link"):
        read_skill_resource(manager, "hidden", "linked/notes.md")


def test_a_relative_link_climbing_out_is_refused(skill_dir: Path) -> None:
    (skill_dir / "up").symlink_to("../../outside/secret")
    with pytest.raises(PathNotAllowedError):
        read_skill_resource(_manager(skill_dir), "hidden", "up")


def test_links_that_stay_inside_the_skill_are_still_served(skill_dir: Path) -> None:
    (skill_dir / "guide.md").symlink_to("references/notes.md")
    (skill_dir / "abs.md").symlink_to(skill_dir / "references" / "notes.md")  # absolute, inside
    manager = _manager(skill_dir)
    skill = manager.get_skill("hidden")
    assert skill is not None
    assert {"guide.md", "abs.md"} <= set(skill.files)
    assert read_skill_resource(manager, "hidden", "guide.md") == b"# Notes"
    assert read_skill_resource(manager, "hidden", "abs.md") == b"# Notes"


def test_a_listed_file_replaced_by_a_link_out_after_listing_is_refused(skill_dir: Path) -> None:
    manager = _manager(skill_dir)
    skill = manager.get_skill("hidden")
    assert skill is not None
    assert "references/notes.md" in skill.files
    (skill_dir / "references" / "notes.md").unlink()
    (skill_dir / "references" / "notes.md").symlink_to(skill_dir.parent.parent / "outside/secret")
    with pytest.raises(PathNotAllowedError):
        read_skill_resource(manager, "hidden", "references/notes.md")


def _swap_before_first_open(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    real_open = os.open
    pending = [swap]

    def open_after_swap(*args: Any, **kwargs: Any) -> int:
        while pending:
            pending.pop()()
        return real_open(*args, **kwargs)

    monkeypatch.setattr(os, "open", open_after_swap)


def test_a_directory_swapped_for_a_link_between_check_and_open_is_refused(
    skill_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Everything a check by path can see is fine; the directory becomes a link out just before
    # the first open, as an attacker racing the server would do.
    manager = _manager(skill_dir)
    outside = skill_dir.parent.parent / "outside"

    def swap() -> None:
        shutil.rmtree(skill_dir / "references")
        (skill_dir / "references").symlink_to(outside)

    skill = manager.get_skill("hidden")
    assert skill is not None
    _swap_before_first_open(monkeypatch, swap)
    with pytest.raises(PathNotAllowedError):
        read_skill_resource(manager, "hidden", "references/notes.md")


def test_open_skill_file_walks_without_following_links_out(tmp_path: Path) -> None:
    (tmp_path / "skill" / "a").mkdir(parents=True)
    (tmp_path / "skill" / "a" / "f").write_text("in")
    (tmp_path / "secret").write_text(SECRET)
    (tmp_path / "skill" / "loop").symlink_to("loop")
    (tmp_path / "skill" / "back").symlink_to("a/../a/f")
    (tmp_path / "skill" / "fifo").parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "skill" / "fifo")
    root = tmp_path / "skill"
    fd = open_skill_file(root, "back")
    with os.fdopen(fd) as handle:
        assert handle.read() == "in"
    for escaping in ("../secret", "a/../../secret", "/etc/passwd"):
        with pytest.raises(SkillFileEscape):
            open_skill_file(root, escaping)
    for missing in ("loop", "fifo", "a", "a/f/x", "nope"):
        with pytest.raises(FileNotFoundError):
            open_skill_file(root, missing)
