"""``--workspace`` of ``serve``, ``demo`` and ``run-script``: a file is a clear usage error (no
traceback); a missing directory is created with a notice on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagents.cli._workspace import prepare_workspace
from sagents.cli.main import app
from sagents.errors import ConfigError

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("not a directory")
    return path


def test_serve_with_a_file_as_workspace_is_a_usage_error(a_file: Path) -> None:
    result = runner.invoke(app, ["serve", "--workspace", str(a_file)])
    assert result.exit_code == 2
    assert f"--workspace {str(a_file)!r} is not a directory" in result.output
    assert "Traceback" not in result.output


def test_demo_with_a_file_as_workspace_is_a_usage_error(a_file: Path) -> None:
    result = runner.invoke(app, ["demo", "--workspace", str(a_file), "--json"])
    assert result.exit_code == 2
    out = json.loads(result.stdout)
    assert out["status"] == "usage_error"
    assert "is not a directory" in out["output"]


def test_run_script_with_a_file_as_workspace_is_a_usage_error(tmp_path: Path, a_file: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("print(1)\n")
    result = runner.invoke(app, ["run-script", str(script), "--workspace", str(a_file), "--json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["status"] == "usage_error"


def test_a_missing_workspace_is_created_with_a_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wanted = tmp_path / "new" / "ws"
    assert prepare_workspace(wanted, command="sagents demo") == wanted.resolve()
    assert wanted.is_dir()
    assert f"sagents demo: created the workspace directory {wanted}" in capsys.readouterr().err
    prepare_workspace(wanted, command="sagents demo")  # existing: used silently
    assert capsys.readouterr().err == ""


def test_a_workspace_that_cannot_be_created_is_a_clear_error(a_file: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be created"):
        prepare_workspace(a_file / "below", command="sagents serve")


def test_serve_creates_a_missing_workspace_and_says_so(tmp_path: Path) -> None:
    wanted = tmp_path / "ws"
    done = subprocess.run(
        [sys.executable, "-c", "from sagents.cli.main import main; main()", "serve",
         "--workspace", str(wanted)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(tmp_path / "d")},
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert wanted.is_dir()
    assert f"created the workspace directory {wanted}" in done.stderr
