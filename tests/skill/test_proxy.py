from pathlib import Path

import pytest

from sagents.skill import SkillManager, SkillProxy
from tests.skill.helpers import spec_md, write_skill


def _manager(root: Path, *names: str, description: str = "d") -> SkillManager:
    for name in names:
        write_skill(root, name, spec_md(name, description))
    manager = SkillManager()
    manager.add_skill_dir(root)
    return manager


def test_a_proxy_lists_only_the_available_skills_in_the_given_order(tmp_path: Path) -> None:
    manager = _manager(tmp_path, "alpha", "beta", "gamma")
    proxy = SkillProxy(manager, available_skills=["gamma", "alpha"])
    assert proxy.list_skill_names() == ["gamma", "alpha"]
    assert proxy.get_skill("beta") is None
    assert proxy.get_skill("alpha") is not None


def test_without_a_whitelist_a_proxy_shows_everything(tmp_path: Path) -> None:
    proxy = SkillProxy(_manager(tmp_path, "alpha", "beta"))
    assert proxy.list_skill_names() == ["alpha", "beta"]


def test_several_managers_are_searched_in_priority_order(tmp_path: Path) -> None:
    first = _manager(tmp_path / "a", "shared", description="first")
    second = _manager(tmp_path / "b", "shared", "only-b", description="second")
    proxy = SkillProxy([first, second])
    skill = proxy.get_skill("shared")
    assert skill is not None
    assert skill.description == "first"
    assert proxy.list_skill_names() == ["shared", "only-b"]


def test_an_unknown_name_is_a_warning_not_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = SkillProxy(_manager(tmp_path, "alpha"), available_skills=["alpha", "ghost"])
    assert "'ghost'" in caplog.text
    assert proxy.list_skill_names() == ["alpha"]
    [problem] = proxy.problems()
    assert (problem.skill, problem.severity) == ("ghost", "warning")


def test_a_whitelisted_skill_added_later_on_disk_is_served(tmp_path: Path) -> None:
    manager = _manager(tmp_path, "alpha")
    proxy = SkillProxy(manager, available_skills=["late"])
    write_skill(tmp_path, "late", spec_md("late"))
    manager.reload()
    assert proxy.list_skill_names() == ["late"]
    assert proxy.problems() == []


def test_a_proxy_reports_only_its_own_skills_problems(tmp_path: Path) -> None:
    manager = _manager(tmp_path, "alpha")
    write_skill(tmp_path, "broken", "---\nname: broken\n---\n")
    manager.reload()
    assert SkillProxy(manager, available_skills=["alpha"]).problems() == []
    assert [p.skill for p in SkillProxy(manager).problems()] == ["broken"]


def test_a_single_string_instead_of_a_list_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="list of names"):
        SkillProxy(_manager(tmp_path, "alpha"), available_skills="alpha")


def test_a_proxy_of_a_proxy_narrows_further(tmp_path: Path) -> None:
    manager = _manager(tmp_path, "alpha", "beta")
    outer = SkillProxy(SkillProxy(manager, available_skills=["alpha"]), available_skills=["beta"])
    assert outer.list_skills() == []
