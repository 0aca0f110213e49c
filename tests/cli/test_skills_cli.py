import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagents.cli.main import app
from tests.skill.helpers import FIXTURES, copy_fixture, spec_md, write_skill

runner = CliRunner()


def test_list_prints_every_skill_with_its_description() -> None:
    result = runner.invoke(
        app,
        ["skills", "list", "--dir", str(FIXTURES / "spec_root"), "-d", str(FIXTURES / "seed_root")],
    )
    assert result.exit_code == 0, result.output
    assert "pdf-tools" in result.stdout
    assert "my_skill" in result.stdout
    assert "Summarises a folder" in result.stdout


def test_list_reads_the_roots_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGENTS_SKILLS_PATH", str(FIXTURES / "seed_root"))
    result = runner.invoke(app, ["skills", "list"])
    assert result.exit_code == 0, result.output
    assert "my_skill" in result.stdout


def test_list_without_any_root_says_how_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAGENTS_SKILLS_PATH", raising=False)
    result = runner.invoke(app, ["skills", "list"])
    assert result.exit_code == 2
    assert "--dir" in result.stderr
    assert "SAGENTS_SKILLS_PATH" in result.stderr


def test_list_with_a_missing_root_fails_clearly() -> None:
    result = runner.invoke(app, ["skills", "list", "--dir", "/nonexistent/root"])
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_show_prints_metadata_files_and_body() -> None:
    result = runner.invoke(
        app, ["skills", "show", "pdf-tools", "--dir", str(FIXTURES / "spec_root")]
    )
    assert result.exit_code == 0, result.output
    assert "allowed-tools: file_read run_script" in result.stdout
    assert "  references/forms.md" in result.stdout
    assert "# PDF tools" in result.stdout


def test_show_of_an_unknown_skill_exits_1_and_lists_the_names() -> None:
    result = runner.invoke(app, ["skills", "show", "nope", "--dir", str(FIXTURES / "spec_root")])
    assert result.exit_code == 1
    assert "available: pdf-tools" in result.stderr


def test_validate_passes_a_valid_skill_directory() -> None:
    result = runner.invoke(app, ["skills", "validate", str(FIXTURES / "spec_root" / "pdf-tools")])
    assert result.exit_code == 0, result.output
    assert "0 errors" in result.stdout


def test_validate_accepts_a_skill_md_path_for_its_directory(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "mismatch", spec_md("other"))
    result = runner.invoke(app, ["skills", "validate", str(path / "SKILL.md")])
    assert result.exit_code == 1
    assert "checked 1 skill directory: 1 error," in result.stdout


def test_validate_accepts_the_seed_form_but_strict_fails_on_it() -> None:
    root = str(FIXTURES / "seed_root")
    relaxed = runner.invoke(app, ["skills", "validate", root])
    assert relaxed.exit_code == 0, relaxed.output
    assert "non_portable" in relaxed.stdout
    strict = runner.invoke(app, ["skills", "validate", root, "--strict"])
    assert strict.exit_code == 1


def test_validate_prints_each_problem_with_file_and_field_and_exits_1(tmp_path: Path) -> None:
    write_skill(tmp_path, "good", spec_md("good"))
    write_skill(tmp_path, "mismatch", spec_md("other"))
    write_skill(tmp_path, "long", spec_md("long", "z" * 1100))
    write_skill(tmp_path, "nolist", "---\n- a\n---\n")
    write_skill(tmp_path, "nomd", None, skill_yaml="id: nomd\n")
    result = runner.invoke(app, ["skills", "validate", str(tmp_path)])
    assert result.exit_code == 1
    out = result.stdout
    assert f"{tmp_path / 'mismatch' / 'SKILL.md'}: name:" in out
    assert f"{tmp_path / 'long' / 'SKILL.md'}: description: is 1100 characters" in out
    assert f"{tmp_path / 'nolist' / 'SKILL.md'}: cannot be read" in out
    assert f"{tmp_path / 'nomd' / 'SKILL.md'}: missing SKILL.md" in out
    assert "checked 5 skill directories: 4 errors" in out


def test_validate_of_an_empty_root_fails(tmp_path: Path) -> None:
    result = runner.invoke(app, ["skills", "validate", str(tmp_path)])
    assert result.exit_code == 1
    assert "no skill directory" in result.stderr


def test_validate_of_a_missing_path_fails(tmp_path: Path) -> None:
    result = runner.invoke(app, ["skills", "validate", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_validate_does_not_touch_the_files(tmp_path: Path) -> None:
    root = copy_fixture("seed_root", tmp_path)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    runner.invoke(app, ["skills", "validate", str(root), "--strict"])
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_help_lists_the_skills_commands() -> None:
    result = runner.invoke(app, ["skills", "--help"])
    assert result.exit_code == 0
    for command in ("list", "show", "validate"):
        assert command in result.stdout


def test_validate_of_a_root_prints_each_problem_once() -> None:
    # a real process: the library's log warnings reach stderr there, as a user sees them
    command = [sys.executable, "-c", "from sagents.cli.main import app; app()"]
    result = subprocess.run(
        [*command, "skills", "validate", str(FIXTURES / "seed_root")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (result.stdout + result.stderr).count("has no front matter") == 1
