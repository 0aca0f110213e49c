"""The skills bundled in ``examples/skills`` pass the project's own validator, strictly: a new
user copying one gets a skill that every Agent Skills host accepts."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sagents.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "skills"


def test_the_bundled_example_skills_pass_strict_validation() -> None:
    assert sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()) == ["fleet-triage", "my-skill"]
    result = CliRunner().invoke(app, ["skills", "validate", "--strict", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
    assert "0 errors, 0 non-portable, 0 warnings" in result.output
