from typer.testing import CliRunner

from sagents import __version__
from sagents.cli.main import app


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == __version__


def test_help_lists_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "version" in result.stdout


def test_the_version_option_prints_the_version_and_exits_0() -> None:
    for option in ("--version", "-V"):
        result = CliRunner().invoke(app, [option])
        assert result.exit_code == 0, result.output
        assert result.stdout.strip() == __version__


def test_the_version_option_is_listed_in_help() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert "--version" in result.stdout
