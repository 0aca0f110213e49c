from pathlib import Path

import pytest

from sagents.errors import (
    PathNotAllowedError,
    SkillError,
    SkillNotFoundError,
    SkillResourceNotFoundError,
)
from sagents.skill import (
    SkillManager,
    SkillProxy,
    count_tokens,
    load_skill,
    read_skill_resource,
    render_skills_prompt,
)
from tests.skill.helpers import copy_fixture, spec_md, write_skill


@pytest.fixture
def manager(tmp_path: Path) -> SkillManager:
    manager = SkillManager()
    manager.add_skill_dir(copy_fixture("spec_root", tmp_path))
    manager.add_skill_dir(copy_fixture("seed_root", tmp_path))
    return manager


def test_the_prompt_holds_names_full_descriptions_and_activation_scenarios(
    manager: SkillManager,
) -> None:
    text = render_skills_prompt(manager, max_tokens=1000)
    pdf = manager.get_skill("pdf-tools")
    assert pdf is not None
    assert f"- pdf-tools: {pdf.description.strip()}" in text
    assert "- my_skill: Summarises a folder of notes" in text
    assert "  - Use when: The user wants a one-page digest" in text
    assert "load_skill" in text
    assert "# PDF tools" not in text  # the body is loaded on demand, never listed


def test_the_prompt_stays_within_budget_and_names_what_did_not_fit(tmp_path: Path) -> None:
    for index in range(30):
        name = f"skill-{index:02d}"
        write_skill(tmp_path, name, spec_md(name, f"Handles case {index}. " * 20))
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    for budget in (80, 200, 600):
        text = render_skills_prompt(manager, max_tokens=budget)
        assert count_tokens(text) <= budget
        listed = [n for n in manager.list_skill_names() if f"- {n}:" in text]
        named = [n for n in manager.list_skill_names() if n in text]
        assert listed == manager.list_skill_names()[: len(listed)]
        assert len(named) == 30 or "more." in text
        for name in listed:
            skill = manager.get_skill(name)
            assert skill is not None
            assert skill.description.strip() in text  # listed means listed in full


def test_the_prompt_is_empty_without_skills() -> None:
    assert render_skills_prompt([], max_tokens=100) == ""


@pytest.mark.parametrize("budget", [0, -5, 10])
def test_a_budget_too_small_for_the_header_is_refused(manager: SkillManager, budget: int) -> None:
    with pytest.raises(ValueError, match="too small"):
        render_skills_prompt(manager, max_tokens=budget)


def test_load_skill_returns_the_body_and_the_files(manager: SkillManager) -> None:
    loaded = load_skill(SkillProxy(manager, available_skills=["pdf-tools"]), "pdf-tools")
    assert loaded.body.startswith("# PDF tools")
    assert loaded.files == ("SKILL.md", "references/forms.md")
    assert loaded.allowed_tools == ("file_read", "run_script")
    text = loaded.to_text()
    assert "- references/forms.md" in text
    assert "you may call only: file_read, run_script" in text


def test_load_skill_refuses_a_skill_outside_the_session_and_lists_the_names(
    manager: SkillManager,
) -> None:
    proxy = SkillProxy(manager, available_skills=["my_skill"])
    with pytest.raises(SkillNotFoundError) as caught:
        load_skill(proxy, "pdf-tools")
    assert caught.value.hint == "available skills: my_skill"


def test_a_resource_is_read_on_demand(manager: SkillManager) -> None:
    data = read_skill_resource(manager, "pdf-tools", "references/forms.md")
    assert data.startswith(b"# Forms")


@pytest.mark.parametrize(
    "path", ["../my_skill/SKILL.md", "/etc/passwd", "references/../../x", "", "..\\x"]
)
def test_paths_out_of_the_skill_are_refused(manager: SkillManager, path: str) -> None:
    with pytest.raises(PathNotAllowedError):
        read_skill_resource(manager, "pdf-tools", path)


def test_a_symlink_out_of_the_skill_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("key")
    path = write_skill(tmp_path / "root", "linky", spec_md("linky"))
    (path / "leak").symlink_to(tmp_path / "secret")
    manager = SkillManager()
    manager.add_skill_dir(tmp_path / "root")
    with pytest.raises(PathNotAllowedError, match="symbolic link"):
        read_skill_resource(manager, "linky", "leak")


def test_a_missing_resource_names_the_files_that_exist(manager: SkillManager) -> None:
    with pytest.raises(SkillResourceNotFoundError) as caught:
        read_skill_resource(manager, "pdf-tools", "references/nope.md")
    assert "references/forms.md" in (caught.value.hint or "")


def test_a_resource_larger_than_the_limit_is_refused_not_cut(manager: SkillManager) -> None:
    with pytest.raises(SkillError, match="larger than 4 bytes"):
        read_skill_resource(manager, "pdf-tools", "references/forms.md", max_bytes=4)


def test_count_tokens_counts_cl100k_tokens() -> None:
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
