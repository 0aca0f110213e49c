from pathlib import Path

from sagents.skill import SkillManager, activate_skill
from tests.skill.helpers import FakeToolProxy, copy_fixture, spec_md, write_skill


def test_an_active_skill_holds_the_session_to_its_allowed_tools(tmp_path: Path) -> None:
    manager = SkillManager()
    manager.add_skill_dir(copy_fixture("spec_root", tmp_path))
    skill = manager.get_skill("pdf-tools")
    assert skill is not None
    proxy = FakeToolProxy(["file_read", "file_write", "run_script", "load_skill", "shell"])
    names = activate_skill(proxy, skill, always_allowed=["load_skill"])
    assert names == frozenset({"file_read", "run_script", "load_skill"})
    assert proxy.can_call("file_read")
    assert not proxy.can_call("file_write")
    assert not proxy.can_call("shell")
    assert proxy.can_call("load_skill")


def test_a_skill_without_allowed_tools_restricts_nothing(tmp_path: Path) -> None:
    manager = SkillManager()
    manager.add_skill_dir(copy_fixture("seed_root", tmp_path))
    skill = manager.get_skill("my_skill")
    assert skill is not None
    proxy = FakeToolProxy(["a", "b"])
    assert activate_skill(proxy, skill) is None
    assert proxy.allowed == {"a", "b"}


def test_activation_never_widens_the_whitelist_and_two_skills_intersect(tmp_path: Path) -> None:
    md_one = spec_md("one").replace("---\n\n", "allowed-tools: a b secret\n---\n\n", 1)
    md_two = spec_md("two").replace("---\n\n", "allowed-tools: b c\n---\n\n", 1)
    write_skill(tmp_path, "one", md_one)
    write_skill(tmp_path, "two", md_two)
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    one, two = manager.get_skill("one"), manager.get_skill("two")
    assert one is not None
    assert two is not None
    proxy = FakeToolProxy(["a", "b", "c"])
    activate_skill(proxy, one)
    assert proxy.allowed == {"a", "b"}  # "secret" was never allowed: not added
    activate_skill(proxy, two)
    assert proxy.allowed == {"b"}
