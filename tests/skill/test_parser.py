import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from sagents.skill._parser import parse_skill_dir
from sagents.skill._schema import SkillProblem
from tests.skill.helpers import FIXTURES, spec_md, write_skill


def _fields(problems: tuple[SkillProblem, ...], severity: str) -> list[str | None]:
    return [p.field for p in problems if p.severity == severity]


def test_a_valid_spec_skill_loads_every_field_without_problems() -> None:
    load = parse_skill_dir(FIXTURES / "spec_root" / "pdf-tools")
    assert load.problems == ()
    skill = load.skill
    assert skill is not None
    assert skill.name == "pdf-tools"
    assert skill.description.startswith("Extract text and tables from PDF files")
    assert "Use when the user mentions PDFs" in skill.description
    assert skill.license == "Apache-2.0"
    assert skill.compatibility == "Requires python3 and network: none"
    assert skill.metadata == {"author": "example-org", "version": "1.0"}
    assert skill.allowed_tools == ("file_read", "run_script")
    assert skill.files == ("SKILL.md", "references/forms.md")
    assert skill.body.startswith("# PDF tools\n")
    assert skill.source_form == "spec"


def test_the_seed_form_loads_with_id_scenarios_and_title_and_is_only_non_portable() -> None:
    load = parse_skill_dir(FIXTURES / "seed_root" / "my_skill")
    skill = load.skill
    assert skill is not None
    assert skill.name == "my_skill"
    assert skill.display_name == "My Skill"
    assert skill.source_form == "seed"
    assert skill.activation_scenarios == (
        "The user asks for a summary of several notes",
        "The user wants a one-page digest",
    )
    assert skill.body.startswith("# Skill: My Skill\n")
    assert skill.files == ("SKILL.md", "scripts/run.py", "skill.yaml")
    assert {p.severity for p in load.problems} == {"non_portable"}
    assert _fields(load.problems, "non_portable") == [None, "id"]


def test_a_name_that_differs_from_its_directory_is_an_error_but_the_skill_loads(
    tmp_path: Path,
) -> None:
    load = parse_skill_dir(write_skill(tmp_path, "actual-dir", spec_md("other-name")))
    assert load.skill is not None
    assert load.skill.name == "other-name"
    [problem] = load.problems
    assert (problem.field, problem.severity) == ("name", "error")
    assert "'actual-dir'" in problem.reason
    assert problem.file == tmp_path / "actual-dir" / "SKILL.md"


@pytest.mark.parametrize(
    "name", ["Bad_Name", "-lead", "trail-", "dou--ble", "a" * 65, "with space"]
)
def test_names_outside_the_specification_are_errors(tmp_path: Path, name: str) -> None:
    load = parse_skill_dir(write_skill(tmp_path, name, spec_md(f"'{name}'")))
    errors = [p for p in load.problems if p.severity == "error"]
    assert errors
    assert {p.field for p in errors} == {"name"}


def test_a_description_over_1024_characters_is_an_error_and_is_never_cut(tmp_path: Path) -> None:
    description = "x" * 1025
    load = parse_skill_dir(write_skill(tmp_path, "long", spec_md("long", description)))
    assert load.skill is not None
    assert load.skill.description == description
    [problem] = load.problems
    assert (problem.field, problem.severity) == ("description", "error")
    assert "1025" in problem.reason


def test_a_description_of_exactly_1024_characters_is_fine(tmp_path: Path) -> None:
    load = parse_skill_dir(write_skill(tmp_path, "edge", spec_md("edge", "y" * 1024)))
    assert load.problems == ()


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("name: no-desc\n", "is missing"),
        ("name: no-desc\ndescription: ''\n", "is empty"),
        ("name: no-desc\ndescription: '   '\n", "is empty"),
    ],
)
def test_a_skill_without_a_description_does_not_load_and_says_why(
    tmp_path: Path, front: str, expected: str
) -> None:
    load = parse_skill_dir(write_skill(tmp_path, "no-desc", f"---\n{front}---\nbody\n"))
    assert load.skill is None
    assert any(p.field == "description" and expected in p.reason for p in load.problems)


@pytest.mark.parametrize("front", ["- a\n- b\n", "just a string\n", "[1, 2]\n"])
def test_front_matter_that_is_not_a_mapping_is_a_problem_not_a_crash(
    tmp_path: Path, front: str
) -> None:
    load = parse_skill_dir(write_skill(tmp_path, "weird", f"---\n{front}---\nbody\n"))
    assert load.skill is None
    [problem] = load.problems
    assert problem.severity == "error"
    assert "must be a mapping" in problem.reason
    assert problem.file.name == "SKILL.md"


def test_a_missing_skill_md_is_an_error_even_with_a_skill_yaml(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "half", None, skill_yaml="id: half\ndescription: d\n")
    load = parse_skill_dir(path)
    assert load.skill is None
    [problem] = load.problems
    assert "missing SKILL.md" in problem.reason
    assert problem.file == path / "SKILL.md"


def test_a_skill_md_without_front_matter_or_skill_yaml_is_an_error(tmp_path: Path) -> None:
    load = parse_skill_dir(write_skill(tmp_path, "plain", "# Just markdown\n"))
    assert load.skill is None
    assert "no YAML front matter" in load.problems[0].reason


def test_crlf_line_endings_and_a_bom_parse_like_lf(tmp_path: Path) -> None:
    text = spec_md("crlf").replace("\n", "\r\n").encode("utf-8")
    load = parse_skill_dir(write_skill(tmp_path, "crlf", b"\xef\xbb\xbf" + text))
    assert load.problems == ()
    assert load.skill is not None
    assert "\r" not in load.skill.body
    assert load.skill.body == "# crlf\n\nSteps.\n"


def test_triple_dashes_colons_and_quotes_inside_values_are_kept(tmp_path: Path) -> None:
    md = (
        "---\n"
        "name: tricky\n"
        'description: "Converts a: b --- c. Use when: asked"\n'
        "compatibility: 'needs: git'\n"
        "---\n"
        "body\n---\nmore body\n"
    )
    load = parse_skill_dir(write_skill(tmp_path, "tricky", md))
    assert load.problems == ()
    assert load.skill is not None
    assert load.skill.description == "Converts a: b --- c. Use when: asked"
    assert load.skill.compatibility == "needs: git"
    assert load.skill.body == "body\n---\nmore body\n"


def test_an_unquoted_colon_in_a_value_is_a_yaml_problem_with_a_line(tmp_path: Path) -> None:
    md = "---\nname: colon\ndescription: Use when: asked\n---\nbody\n"
    load = parse_skill_dir(write_skill(tmp_path, "colon", md))
    assert load.skill is None
    [problem] = load.problems
    assert "invalid YAML" in problem.reason
    assert "line 3" in problem.reason


def test_multi_line_folded_and_literal_descriptions_load(tmp_path: Path) -> None:
    md = "---\nname: multi\ndescription: |\n  First line.\n  Second line.\n---\nbody\n"
    load = parse_skill_dir(write_skill(tmp_path, "multi", md))
    assert load.skill is not None
    assert load.skill.description == "First line.\nSecond line.\n"


def test_unknown_front_matter_keys_are_kept_in_metadata_with_a_non_portable_problem(
    tmp_path: Path,
) -> None:
    md = "---\nname: extra\ndescription: d\nversion: 2\ntags: [a, b]\n---\nbody\n"
    load = parse_skill_dir(write_skill(tmp_path, "extra", md))
    assert load.skill is not None
    assert load.skill.metadata == {"tags": "[a, b]", "version": "2"}
    assert _fields(load.problems, "non_portable") == ["tags", "version"]
    assert _fields(load.problems, "error") == []


def test_metadata_values_that_are_not_strings_are_stringified_and_reported(
    tmp_path: Path,
) -> None:
    md = "---\nname: meta\ndescription: d\nmetadata:\n  version: 1.0\n  beta: true\n---\n"
    load = parse_skill_dir(write_skill(tmp_path, "meta", md))
    assert load.skill is not None
    assert load.skill.metadata == {"version": "1.0", "beta": "true"}
    assert _fields(load.problems, "non_portable") == ["metadata.version", "metadata.beta"]


def test_metadata_that_is_not_a_mapping_is_an_error(tmp_path: Path) -> None:
    md = "---\nname: meta\ndescription: d\nmetadata: [a]\n---\n"
    load = parse_skill_dir(write_skill(tmp_path, "meta", md))
    assert _fields(load.problems, "error") == ["metadata"]


def test_compatibility_over_500_characters_is_an_error(tmp_path: Path) -> None:
    md = f"---\nname: compat\ndescription: d\ncompatibility: {'c' * 501}\n---\n"
    load = parse_skill_dir(write_skill(tmp_path, "compat", md))
    assert _fields(load.problems, "error") == ["compatibility"]


@pytest.mark.parametrize(
    ("value", "tools", "severities"),
    [
        ("file_read run_script", ("file_read", "run_script"), []),
        ("'Read, Grep  Glob'", ("Read", "Grep", "Glob"), []),
        ("'Bash(git status:*) Read'", ("Bash(git status:*)", "Read"), []),
        ("[file_read, run_script]", ("file_read", "run_script"), ["non_portable"]),
        ("a a b", ("a", "b"), []),
        ("''", None, ["error"]),
        ("{x: 1}", (), ["error"]),  # malformed: fails closed
    ],
)
def test_allowed_tools_accepts_the_spec_string_and_a_yaml_list(
    tmp_path: Path, value: str, tools: tuple[str, ...] | None, severities: list[str]
) -> None:
    md = f"---\nname: tools\ndescription: d\nallowed-tools: {value}\n---\n"
    load = parse_skill_dir(write_skill(tmp_path, "tools", md))
    assert load.skill is not None
    assert load.skill.allowed_tools == tools
    assert [p.severity for p in load.problems] == severities


def test_front_matter_wins_over_skill_yaml_and_skill_yaml_fills_the_gaps(tmp_path: Path) -> None:
    md = "---\nname: both\ndescription: From front matter.\n---\nbody\n"
    seed = (
        "id: both\nname: Both Forms\ndescription: From skill.yaml.\n"
        "license: MIT\nactivation_scenarios: When both are present\n"
    )
    load = parse_skill_dir(write_skill(tmp_path, "both", md, skill_yaml=seed))
    skill = load.skill
    assert skill is not None
    assert skill.source_form == "spec+seed"
    assert skill.description == "From front matter."
    assert skill.license == "MIT"
    assert skill.display_name == "Both Forms"
    assert skill.activation_scenarios == ("When both are present",)
    [problem] = load.problems
    assert (problem.field, problem.severity) == ("description", "warning")
    assert problem.file.name == "skill.yaml"


def test_a_skill_yaml_id_that_contradicts_the_front_matter_name_is_an_error(
    tmp_path: Path,
) -> None:
    md = spec_md("named")
    load = parse_skill_dir(write_skill(tmp_path, "named", md, skill_yaml="id: other\n"))
    assert load.skill is not None
    assert load.skill.name == "named"
    assert [(p.file.name, p.field, p.severity) for p in load.problems] == [
        ("skill.yaml", "id", "error")
    ]


def test_a_broken_skill_yaml_beside_good_front_matter_is_reported_but_the_skill_loads(
    tmp_path: Path,
) -> None:
    path = write_skill(tmp_path, "ok", spec_md("ok"), skill_yaml="- not a mapping\n")
    load = parse_skill_dir(path)
    assert load.skill is not None
    assert [(p.file.name, p.severity) for p in load.problems] == [("skill.yaml", "error")]


def test_unknown_skill_yaml_keys_are_kept_in_metadata(tmp_path: Path) -> None:
    seed = "id: seedy\ndescription: d\nowner: team-a\n"
    load = parse_skill_dir(write_skill(tmp_path, "seedy", "# Skill: Seedy\n", skill_yaml=seed))
    assert load.skill is not None
    assert load.skill.metadata == {"owner": "team-a"}
    assert load.skill.display_name == "Seedy"


def test_a_symlink_out_of_the_skill_is_not_shipped_and_is_reported(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s")
    path = write_skill(tmp_path / "root", "linky", spec_md("linky"))
    (path / "leak.txt").symlink_to(secret)
    (path / "inner.md").write_text("i")
    (path / "alias.md").symlink_to(path / "inner.md")
    load = parse_skill_dir(path)
    assert load.skill is not None
    assert load.skill.files == ("SKILL.md", "alias.md", "inner.md")
    assert [(p.file.name, p.severity) for p in load.problems] == [("leak.txt", "warning")]


def test_hidden_files_are_not_shipped(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "hid", spec_md("hid"), files={".git/x": "x", ".env": "k=v"})
    load = parse_skill_dir(path)
    assert load.skill is not None
    assert load.skill.files == ("SKILL.md",)


def test_invalid_utf8_is_a_problem_naming_the_file(tmp_path: Path) -> None:
    load = parse_skill_dir(write_skill(tmp_path, "bin", b"---\nname: bin\xff\n---\n"))
    assert load.skill is None
    assert "not valid UTF-8" in load.problems[0].reason


def test_parsing_never_modifies_the_skill_directory(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "bad", "---\n- broken\n---\n", skill_yaml=": :\n")
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    parse_skill_dir(path)
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before


_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00\ufeff\x85"),
    max_size=60,
)


@settings(max_examples=60)
@given(
    name=st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,3}", fullmatch=True),
    description=_text,
    extra=st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), _text, max_size=3),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    bom=st.booleans(),
)
def test_any_well_formed_skill_md_loads_exactly_or_reports_why(
    name: str, description: str, extra: dict[str, str], newline: str, bom: bool
) -> None:
    front = {**extra, "name": name, "description": description}
    text = "---\n" + yaml.safe_dump(front, allow_unicode=True) + "---\nBody\n"
    data = (b"\xef\xbb\xbf" if bom else b"") + text.replace("\n", newline).encode("utf-8")
    with tempfile.TemporaryDirectory() as temp:
        load = parse_skill_dir(write_skill(Path(temp), name, data))
    errors = [p for p in load.problems if p.severity == "error"]
    if not description.strip():
        assert load.skill is None
        assert [p.field for p in errors] == ["description"]
        return
    assert load.skill is not None
    assert load.skill.description == description
    assert load.skill.body == "Body\n"
    assert errors == []
    unknown = sorted(set(extra) - {"name", "description", "license", "compatibility", "metadata"})
    assert [p.field for p in load.problems if p.severity == "non_portable"] == unknown


def test_nested_yaml_aliases_that_expand_past_the_limit_are_refused(tmp_path: Path) -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    levels += [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]" for i in range(8)
    ]
    md = "---\nname: bomb\ndescription: d\n" + "\n".join(levels) + "\n---\n"
    load = parse_skill_dir(write_skill(tmp_path, "bomb", md))
    assert load.skill is None
    assert "values once aliases are expanded" in load.problems[0].reason


def test_an_oversized_skill_md_is_refused_with_a_reason(tmp_path: Path) -> None:
    md = spec_md("huge") + "x" * (1024 * 1024)
    load = parse_skill_dir(write_skill(tmp_path, "huge", md))
    assert load.skill is None
    assert "larger than 1048576 bytes" in load.problems[0].reason


@pytest.mark.parametrize(
    ("heading", "display"),
    [
        ("# Skill: Seedy", "Seedy"),
        ("#Skill:Seedy ##", "Seedy"),
        ("# Skill: a # b #", "a # b"),
        ("# Skill:", None),
        ("Skill: Seedy", None),
        # a backtracking regex took minutes over this line (cubic in the spaces)
        ("# Skill: x" + " " * 20_000 + "y", "x" + " " * 20_000 + "y"),
    ],
)
def test_the_seed_heading_is_read_in_linear_time(
    tmp_path: Path, heading: str, display: str | None
) -> None:
    seed = "id: seedy\ndescription: d\n"
    load = parse_skill_dir(write_skill(tmp_path, "seedy", heading + "\n", skill_yaml=seed))
    assert load.skill is not None
    assert load.skill.display_name == display
