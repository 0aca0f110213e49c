"""Hostile and careless input, found by using the skills feature as a new user (docs/skills.md)."""

import os
from pathlib import Path

import anyio
import pytest

from sagents.errors import PathNotAllowedError, SkillNotFoundError, SkillResourceNotFoundError
from sagents.skill import SandboxSkillManager, SkillManager, SkillProxy, SkillSession
from sagents.skill._activation import activate_skill
from sagents.skill._disclosure import load_skill, read_skill_resource, render_skills_prompt
from sagents.skill._frontmatter import FrontMatterError, load_yaml_mapping
from sagents.skill._parser import parse_skill_dir
from tests.skill.helpers import FakeToolProxy, MemoryFiles, spec_md, write_skill


def _bomb(levels: int, indent: str = "") -> str:
    """A YAML 'billion laughs': ``levels`` anchors, each a list of ten aliases of the last."""
    lines = [f"{indent}l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels):
        refs = ", ".join([f"*l{level - 1}"] * 10)
        lines.append(f"{indent}l{level}: &l{level} [{refs}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("field", ["name", "license", "allowed-tools", "metadata", "compatibility"])
def test_an_alias_bomb_in_any_field_is_refused_quickly_with_a_clear_reason(
    tmp_path: Path, field: str
) -> None:
    value = "{k: *l8}" if field == "metadata" else "*l8"
    text = f"---\nbombs:\n{_bomb(9, '  ')}name: b\ndescription: d\n{field}: {value}\n---\n"
    write_skill(tmp_path, "b", text)
    load = parse_skill_dir(tmp_path / "b")
    assert load.skill is None
    assert any("alias" in p.reason and p.severity == "error" for p in load.problems)


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(FrontMatterError, match="refers to itself"):
        load_yaml_mapping("a: &a [x, *a]\n")


def test_modest_use_of_anchors_and_merge_keys_still_loads(tmp_path: Path) -> None:
    text = (
        "---\nname: m\ndescription: &d Does m. Use when m.\nbase: &b {k: v}\n"
        "other:\n  <<: *b\n  k2: *d\n---\n"
    )
    write_skill(tmp_path, "m", text)
    load = parse_skill_dir(tmp_path / "m")
    assert load.skill is not None
    assert load.skill.metadata["other"] == "{k: v, k2: Does m. Use when m.}"


def test_a_duplicated_key_is_an_error_naming_both_lines(tmp_path: Path) -> None:
    text = "---\nname: d\ndescription: first\nlicense: MIT\ndescription: second\n---\n"
    write_skill(tmp_path, "d", text)
    load = parse_skill_dir(tmp_path / "d")
    errors = [p for p in load.problems if p.severity == "error"]
    assert [p.field for p in errors] == ["description"]
    assert "lines 3 and 5" in errors[0].reason
    assert load.skill is not None
    assert load.skill.description == "second"


def test_a_duplicated_key_in_skill_yaml_is_reported_too(tmp_path: Path) -> None:
    write_skill(tmp_path, "s", "# Skill: S\n", skill_yaml="id: s\ndescription: a\nid: s\n")
    load = parse_skill_dir(tmp_path / "s")
    assert any(p.field == "id" and "more than once" in p.reason for p in load.problems)


def test_a_merge_key_overridden_by_an_explicit_key_is_not_a_duplicate(tmp_path: Path) -> None:
    text = "---\nname: m\ndescription: d\nx: &x {a: 1}\ny:\n  <<: *x\n  a: 2\n---\n"
    write_skill(tmp_path, "m", text)
    load = parse_skill_dir(tmp_path / "m")
    assert not any("more than once" in p.reason for p in load.problems)


def test_a_symlink_loop_inside_a_skill_is_reported_and_never_costs_the_root(
    tmp_path: Path,
) -> None:
    write_skill(tmp_path, "good", spec_md("good"))
    looped = write_skill(tmp_path, "looped", spec_md("looped"), files={"ok.md": "x"})
    os.symlink("self", looped / "self")
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    assert manager.list_skill_names() == ["good", "looped"]
    skill = manager.get_skill("looped")
    assert skill is not None
    assert skill.files == ("SKILL.md", "ok.md")
    assert any(p.file == looped / "self" and "loop" in p.reason for p in manager.problems())


def test_reading_a_symlink_loop_as_a_resource_is_a_clear_error(tmp_path: Path) -> None:
    looped = write_skill(tmp_path, "looped", spec_md("looped"))
    os.symlink("self", looped / "self")
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    with pytest.raises((SkillResourceNotFoundError, PathNotAllowedError)):
        read_skill_resource(manager, "looped", "self")


def test_a_fifo_as_skill_yaml_is_refused_without_blocking(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "f", spec_md("f"))
    os.mkfifo(skill / "skill.yaml")
    load = parse_skill_dir(skill)  # opening a FIFO for reading would block forever
    assert load.skill is not None
    assert any("not a regular file" in p.reason for p in load.problems)


@pytest.mark.parametrize("kind", ["directory", "fifo", "dangling", "loop"])
def test_a_skill_md_that_is_not_a_readable_file_says_what_it_is(tmp_path: Path, kind: str) -> None:
    skill = tmp_path / "odd"
    skill.mkdir()
    target = skill / "SKILL.md"
    if kind == "directory":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "dangling":
        os.symlink("nowhere.md", target)
    else:
        os.symlink("SKILL.md", target)
    load = parse_skill_dir(skill)
    assert load.skill is None
    (problem,) = load.problems
    assert "missing SKILL.md" not in problem.reason
    expected = "broken symbolic link" if kind in ("dangling", "loop") else "not a regular file"
    assert expected in problem.reason


def test_a_dangling_skill_yaml_is_reported_not_ignored(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "s", spec_md("s"))
    os.symlink("gone.yaml", skill / "skill.yaml")
    load = parse_skill_dir(skill)
    assert load.skill is not None
    assert any(p.file == skill / "skill.yaml" and p.severity == "error" for p in load.problems)


@pytest.mark.parametrize("name", ["../../escape", "/abs", "..", ".", "", "two\nlines", "a\\b"])
def test_a_name_that_cannot_be_a_path_component_does_not_load(tmp_path: Path, name: str) -> None:
    quoted = name.replace("\\", "\\\\").replace("\n", "\\n")
    write_skill(tmp_path, "x", f'---\nname: "{quoted}"\ndescription: d\n---\n')
    load = parse_skill_dir(tmp_path / "x")
    assert load.skill is None
    assert any(p.field == "name" and "cannot be used" in p.reason for p in load.problems)


def test_a_root_that_is_itself_a_skill_says_to_pass_its_parent(tmp_path: Path) -> None:
    skill = write_skill(
        tmp_path,
        "pdf-tools",
        spec_md("pdf-tools"),
        files={"scripts/x.py": "", "references/r.md": ""},
    )
    manager = SkillManager()
    manager.add_skill_dir(skill)
    problems = manager.problems()
    assert len(problems) == 1
    assert "pass its parent" in problems[0].reason
    assert str(tmp_path) in problems[0].reason


def test_a_broken_symlink_in_a_root_is_reported_not_skipped(tmp_path: Path) -> None:
    write_skill(tmp_path, "good", spec_md("good"))
    os.symlink(tmp_path / "unmounted" / "skill", tmp_path / "linked")
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    assert manager.list_skill_names() == ["good"]
    assert any(p.file == tmp_path / "linked" and p.severity == "error" for p in manager.problems())


def test_a_skill_directory_that_is_a_symlink_loads(tmp_path: Path) -> None:
    elsewhere = write_skill(tmp_path / "elsewhere", "linked", spec_md("linked"))
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(elsewhere, root / "linked")
    manager = SkillManager()
    manager.add_skill_dir(root)
    assert manager.list_skill_names() == ["linked"]
    assert manager.problems() == []


def test_a_key_yaml_reads_as_a_boolean_is_an_unknown_key_not_a_lost_skill(tmp_path: Path) -> None:
    write_skill(tmp_path, "k", "---\nname: k\ndescription: d\non: push\n---\n")
    load = parse_skill_dir(tmp_path / "k")
    assert load.skill is not None
    assert load.skill.metadata == {"on": "push"}
    assert {p.severity for p in load.problems if p.field == "on"} == {"non_portable"}
    assert any("quote it" in p.reason for p in load.problems if p.field == "on")


def test_a_name_and_directory_that_differ_only_in_unicode_normalisation_are_the_same_name(
    tmp_path: Path,
) -> None:
    # macOS stores "café" decomposed (NFD); the front matter holds it composed (NFC).
    write_skill(tmp_path, "cafe\u0301", "---\nname: caf\u00e9\ndescription: d\n---\n")
    load = parse_skill_dir(tmp_path / "cafe\u0301")
    assert load.skill is not None
    assert not [p for p in load.problems if p.severity == "error"]


@pytest.mark.parametrize("name", ["技能", "мой-навык", "caf\u00e9-2"])
def test_non_ascii_lowercase_names_are_non_portable_not_errors(tmp_path: Path, name: str) -> None:
    # The reference validator (agentskills/agentskills skills-ref, validator.py _validate_name)
    # accepts Unicode lowercase letters; the specification's "a-z" reads as ASCII.
    write_skill(tmp_path, name, f"---\nname: {name}\ndescription: d\n---\n")
    load = parse_skill_dir(tmp_path / name)
    assert load.skill is not None
    assert load.skill.name == name
    assert [p.severity for p in load.problems if p.field == "name"] == ["non_portable"]


@pytest.mark.parametrize("name", ["Мой-навык", "мой--навык", "-技能", "技能!"])
def test_non_ascii_names_breaking_the_other_rules_stay_errors(tmp_path: Path, name: str) -> None:
    write_skill(tmp_path, name, f"---\nname: {name}\ndescription: d\n---\n")
    load = parse_skill_dir(tmp_path / name)
    assert "error" in {p.severity for p in load.problems if p.field == "name"}


@pytest.mark.parametrize("source", ["/path/to/skills_root", ["/path/to/skills_root"], None, 42])
def test_a_skill_proxy_over_something_that_is_not_a_skill_source_says_so_at_once(
    source: object,
) -> None:
    with pytest.raises(TypeError, match="SkillManager"):
        SkillProxy(source, available_skills=["a"])  # type: ignore[arg-type]


def test_a_skill_proxy_over_a_mixed_list_names_the_bad_item(tmp_path: Path) -> None:
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    with pytest.raises(TypeError, match="item 1"):
        SkillProxy([manager, "x"])  # type: ignore[list-item]


@pytest.mark.anyio
async def test_loading_an_unknown_skill_through_the_sandbox_lists_the_session_skills(
    tmp_path: Path,
) -> None:
    write_skill(tmp_path, "a", spec_md("a"))
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    session = SkillSession(manager, sandbox=SandboxSkillManager(manager, MemoryFiles()))
    with pytest.raises(SkillNotFoundError) as caught:
        with anyio.fail_after(5):
            await session.load_skill("ghost")
    assert caught.value.hint == "available skills: a"


def test_an_unclosed_parenthesis_in_allowed_tools_is_an_error_not_one_long_tool_name(
    tmp_path: Path,
) -> None:
    write_skill(
        tmp_path, "t", "---\nname: t\ndescription: d\nallowed-tools: Bash(git status:* Read\n---\n"
    )
    load = parse_skill_dir(tmp_path / "t")
    errors = [p for p in load.problems if p.field == "allowed-tools"]
    assert [p.severity for p in errors] == ["error"]
    assert "'('" in errors[0].reason


def test_a_multi_line_description_stays_inside_its_list_item_in_the_prompt(
    tmp_path: Path,
) -> None:
    text = "---\nname: m\ndescription: |\n  Line one.\n  Line two.\n---\n"
    write_skill(tmp_path, "m", text)
    write_skill(tmp_path, "n", spec_md("n"))
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    prompt = render_skills_prompt(manager, max_tokens=1000)
    assert "- m: Line one.\n  Line two.\n- n: " in prompt


def test_a_subdirectory_that_cannot_be_listed_is_reported_not_silently_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill = write_skill(tmp_path, "s", spec_md("s"), files={"references/r.md": "r"})
    real_scandir = os.scandir

    def scandir(path: str | os.PathLike[str] = ".") -> object:
        if Path(path).name == "references":  # root bypasses permissions, so fake a denial
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    load = parse_skill_dir(skill)
    assert load.skill is not None
    assert load.skill.files == ("SKILL.md",)
    assert any(
        p.file == skill / "references" and "cannot be listed" in p.reason for p in load.problems
    )


@pytest.mark.parametrize("value", ["{Read: yes}", "[Read, 42]", "42"])
def test_a_malformed_allowed_tools_fails_closed_not_open(tmp_path: Path, value: str) -> None:
    write_skill(tmp_path, "t", f"---\nname: t\ndescription: d\nallowed-tools: {value}\n---\n")
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    skill = manager.get_skill("t")
    assert skill is not None
    assert skill.allowed_tools == ()
    assert any(p.field == "allowed-tools" and p.severity == "error" for p in manager.problems())
    tools = FakeToolProxy(["file_read", "shell", "load_skill"])
    activate_skill(tools, skill, always_allowed=["load_skill"])
    assert tools.allowed == {"load_skill"}


def test_an_empty_sandbox_root_is_refused_rather_than_the_sandbox_filesystem_root(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="root"):
        SandboxSkillManager(SkillManager(), MemoryFiles(), root="")


def test_a_skill_whose_allowed_tools_is_invalid_tells_the_model_what_it_may_call(
    tmp_path: Path,
) -> None:
    write_skill(tmp_path, "t", "---\nname: t\ndescription: d\nallowed-tools: 42\n---\nbody\n")
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    text = load_skill(manager, "t").to_text()
    assert "you may call only: the skill tools (its allowed-tools is invalid)" in text


def test_a_file_name_that_is_not_utf8_is_reported_and_not_shipped(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "e", spec_md("e"))
    with open(os.fsencode(skill) + b"/bad\xff.txt", "wb") as handle:
        handle.write(b"x")
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    loaded = load_skill(manager, "e")
    assert loaded.files == ("SKILL.md",)
    loaded.to_text().encode("utf-8")  # what a model API needs
    assert any("not valid UTF-8" in p.reason for p in manager.problems())


def test_an_unknown_front_matter_key_is_logged_as_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_skill(tmp_path, "u", "---\nname: u\ndescription: d\nversion: 2\n---\n")
    manager = SkillManager()
    with caplog.at_level("WARNING"):
        manager.add_skill_dir(tmp_path)
    assert manager.get_skill("u") is not None
    assert any("version" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)


def test_front_matter_after_a_blank_line_is_named_as_the_problem(tmp_path: Path) -> None:
    write_skill(tmp_path, "late", "\n---\nname: late\ndescription: d\n---\nbody\n")
    load = parse_skill_dir(tmp_path / "late")
    assert load.skill is None
    assert "must start on line 1" in load.problems[0].reason


def test_get_skill_sees_a_skill_renamed_in_its_front_matter_as_list_skills_does(
    tmp_path: Path,
) -> None:
    skill = write_skill(tmp_path, "foo", spec_md("foo"))
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    (skill / "SKILL.md").write_text(spec_md("bar") + "\n")  # another size: a visible change
    assert manager.get_skill("bar") is not None
    assert manager.list_skill_names() == ["bar"]
