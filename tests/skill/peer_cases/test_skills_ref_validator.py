"""The Agent Skills reference validator's cases, run against sagents' parser.

Source: agentskills/agentskills, ``skills-ref/tests/test_validator.py`` and
``skills-ref/tests/test_parser.py`` (each case below names its test there). The reference
returns a list of error strings; sagents grades each problem ``error`` / ``non_portable`` /
``warning``. ``SAME`` cases agree; ``DIFFERENT`` ones are deliberate (see docs/tool-schema.md,
"Peer suites").
"""

from pathlib import Path

import pytest

from sagents.skill._parser import parse_skill_dir

LONG_NAME = "a" * 70

# (reference test, directory, SKILL.md, reference says valid, sagents' severities of the skill)
CASES: list[tuple[str, str, str, bool, set[str]]] = [
    ("test_valid_skill", "my-skill", "name: my-skill\ndescription: A test skill", True, set()),
    ("test_invalid_name_uppercase", "MySkill", "name: MySkill\ndescription: d", False, {"error"}),
    ("test_name_too_long", LONG_NAME, f"name: {LONG_NAME}\ndescription: d", False, {"error"}),
    ("test_name_leading_hyphen", "-my-skill", "name: -my-skill\ndescription: d", False, {"error"}),
    (
        "test_name_consecutive_hyphens",
        "my--skill",
        "name: my--skill\ndescription: d",
        False,
        {"error"},
    ),
    (
        "test_name_invalid_characters",
        "my_skill",
        "name: my_skill\ndescription: d",
        False,
        {"error"},
    ),
    (
        "test_name_directory_mismatch",
        "wrong-name",
        "name: correct-name\ndescription: d",
        False,
        {"error"},
    ),
    (
        "test_valid_with_all_fields",
        "my-skill",
        "name: my-skill\ndescription: d\nlicense: MIT\nmetadata:\n  author: Test",
        True,
        set(),
    ),
    (
        "test_allowed_tools_accepted",
        "my-skill",
        "name: my-skill\ndescription: d\nallowed-tools: Bash(jq:*) Bash(git:*)",
        True,
        set(),
    ),
    ("test_i18n_chinese_name", "技能", "name: 技能\ndescription: d", True, {"non_portable"}),
    (
        "test_i18n_russian_name_with_hyphens",
        "мой-навык",
        "name: мой-навык\ndescription: d",
        True,
        {"non_portable"},
    ),
    (
        "test_i18n_russian_lowercase_valid",
        "навык",
        "name: навык\ndescription: d",
        True,
        {"non_portable"},
    ),
    (
        "test_i18n_russian_uppercase_rejected",
        "НАВЫК",
        "name: НАВЫК\ndescription: d",
        False,
        {"error"},
    ),
    (
        "test_description_too_long",
        "my-skill",
        f"name: my-skill\ndescription: {'x' * 1100}",
        False,
        {"error"},
    ),
    (
        "test_valid_compatibility",
        "my-skill",
        "name: my-skill\ndescription: d\ncompatibility: Requires Python 3.11+",
        True,
        set(),
    ),
    (
        "test_compatibility_too_long",
        "my-skill",
        f"name: my-skill\ndescription: d\ncompatibility: {'x' * 550}",
        False,
        {"error"},
    ),
    (
        "test_nfkc_normalization",
        "caf\u00e9",
        "name: cafe\u0301\ndescription: d",
        True,
        {"non_portable"},
    ),
    # DIFFERENT: an unknown key is an error for the reference; sagents loads the skill and
    # reports the key as non-portable (other hosts may refuse it), as docs/skills.md says.
    (
        "test_unexpected_fields",
        "my-skill",
        "name: my-skill\ndescription: d\nunknown_field: should not be here",
        False,
        {"non_portable"},
    ),
    # test_parser.py: missing name / description.
    ("test_missing_description", "my-skill", "name: my-skill", False, {"error"}),
]


@pytest.mark.parametrize(
    ("directory", "front_matter", "valid", "severities"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_the_reference_validators_cases(
    tmp_path: Path, directory: str, front_matter: str, valid: bool, severities: set[str]
) -> None:
    skill_dir = tmp_path / directory
    skill_dir.mkdir()
    (skill_dir / "SKILL.md").write_text(f"---\n{front_matter}\n---\nBody\n", encoding="utf-8")
    load = parse_skill_dir(skill_dir)
    got = {p.severity for p in load.problems if p.severity != "warning"}
    assert got == severities, [(p.field, p.reason) for p in load.problems]
    if valid:  # every skill the reference accepts loads here too
        assert load.skill is not None


def test_a_skill_md_without_front_matter_is_an_error_as_in_the_reference(tmp_path: Path) -> None:
    # test_parser.py::test_missing_frontmatter: "must start with YAML frontmatter".
    (tmp_path / "my-skill").mkdir()
    (tmp_path / "my-skill" / "SKILL.md").write_text("# No front matter\n", encoding="utf-8")
    load = parse_skill_dir(tmp_path / "my-skill")
    assert "error" in {p.severity for p in load.problems}
