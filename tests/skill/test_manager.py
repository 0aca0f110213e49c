import os
from pathlib import Path

import pytest

from sagents.errors import SkillRootError
from sagents.skill import SkillManager, SkillProxy
from tests.skill.helpers import copy_fixture, spec_md, write_skill


def _touch_later(path: Path) -> None:
    """Move a file's mtime forward so a same-size rewrite within one tick is still seen."""
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))


def test_the_seed_example_runs_unchanged(tmp_path: Path) -> None:
    skills_root = copy_fixture("seed_root", tmp_path)
    skill_manager = SkillManager()
    skill_manager.add_skill_dir(str(skills_root))
    session = SkillProxy(skill_manager, available_skills=["my_skill"])
    assert [s.name for s in session.list_skills()] == ["my_skill"]
    skill = session.get_skill("my_skill")
    assert skill is not None
    assert skill.display_name == "My Skill"


def test_a_missing_root_raises_with_the_path() -> None:
    with pytest.raises(SkillRootError, match="does not exist"):
        SkillManager().add_skill_dir("/nonexistent/skills-root")


def test_a_file_as_root_raises(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(SkillRootError, match="not a directory"):
        SkillManager().add_skill_dir(file)


def test_one_bad_skill_never_costs_the_others(tmp_path: Path) -> None:
    write_skill(tmp_path, "good", spec_md("good"))
    write_skill(tmp_path, "broken", "---\n- list\n---\n")
    write_skill(tmp_path, "empty-dir", None)
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    assert manager.list_skill_names() == ["good"]
    problems = {(p.file.parent.name, p.severity) for p in manager.problems()}
    assert problems == {("broken", "error"), ("empty-dir", "error")}


def test_bad_skills_are_logged_loudly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_skill(tmp_path, "broken", "---\n- list\n---\n")
    SkillManager().add_skill_dir(tmp_path)
    assert "broken" in caplog.text
    assert "must be a mapping" in caplog.text


def test_the_first_root_wins_and_the_shadowed_skill_is_reported(tmp_path: Path) -> None:
    first = write_skill(tmp_path / "a", "same", spec_md("same", "First copy."))
    second = write_skill(tmp_path / "b", "same", spec_md("same", "Second copy."))
    manager = SkillManager()
    manager.add_skill_dir(tmp_path / "a")
    manager.add_skill_dir(tmp_path / "b")
    skill = manager.get_skill("same")
    assert skill is not None
    assert skill.description == "First copy."
    [problem] = manager.problems()
    assert problem.severity == "warning"
    assert problem.file == second / "SKILL.md"
    assert str(first) in problem.reason


def test_an_edited_skill_md_is_seen_without_restarting(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "live", spec_md("live", "Old."))
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    (path / "SKILL.md").write_text(spec_md("live", "New."))
    _touch_later(path / "SKILL.md")
    skill = manager.get_skill("live")
    assert skill is not None
    assert skill.description == "New."


def test_a_new_skill_directory_and_a_new_file_are_seen_without_restarting(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "one", spec_md("one"))
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    write_skill(tmp_path, "two", spec_md("two"))
    _touch_later(tmp_path)
    (path / "scripts").mkdir()
    (path / "scripts" / "go.py").write_text("print(1)")
    _touch_later(path / "scripts")
    assert manager.list_skill_names() == ["one", "two"]
    skill = manager.get_skill("one")
    assert skill is not None
    assert skill.files == ("SKILL.md", "scripts/go.py")


def test_a_skill_that_breaks_after_loading_disappears_with_a_problem(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "flaky", spec_md("flaky"))
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    (path / "SKILL.md").write_text("---\nname: flaky\n---\n")
    _touch_later(path / "SKILL.md")
    assert manager.get_skill("flaky") is None
    assert [p.field for p in manager.problems()] == ["description"]


def test_reload_rereads_everything(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "same-size", spec_md("same-size", "AAAA"))
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    stamp = (path / "SKILL.md").stat()
    (path / "SKILL.md").write_text(spec_md("same-size", "BBBB"))
    os.utime(path / "SKILL.md", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    manager.reload()
    skill = manager.get_skill("same-size")
    assert skill is not None
    assert skill.description == "BBBB"


def test_two_managers_do_not_share_skills(tmp_path: Path) -> None:
    write_skill(tmp_path, "solo", spec_md("solo"))
    first = SkillManager()
    first.add_skill_dir(tmp_path)
    assert SkillManager().list_skills() == []
    assert first.list_skill_names() == ["solo"]


def test_adding_the_same_root_twice_is_a_no_op(tmp_path: Path) -> None:
    write_skill(tmp_path, "solo", spec_md("solo"))
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    manager.add_skill_dir(tmp_path)
    assert manager.roots == (tmp_path,)
    assert manager.problems() == []
