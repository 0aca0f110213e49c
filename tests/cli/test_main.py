import json
import subprocess
import sys
import textwrap

import pytest
import typer.main
from typer.testing import CliRunner

from sagents import __version__
from sagents.cli.main import LAZY_COMMANDS, app, load_command


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == __version__


def test_help_lists_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "version" in result.stdout


def test_help_of_a_lazy_subcommand_shows_its_own_options() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0, result.output
    assert "--transport" in result.stdout


def test_a_mistyped_lazy_subcommand_gets_a_suggestion() -> None:
    result = CliRunner().invoke(app, ["servee"])
    assert result.exit_code == 2
    assert "Did you mean 'serve'?" in result.output


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_root_help_line_of_each_lazy_subcommand_is_its_own_help(name: str) -> None:
    command = load_command(name)
    assert command.name == name
    own = command.get_short_help_str(limit=1000)
    assert own == LAZY_COMMANDS[name].short_help, f"update LAZY_COMMANDS[{name!r}].short_help"


def test_every_subcommand_module_is_listed_lazily() -> None:
    group = typer.main.get_group(app)
    assert list(group.commands) == ["version", *LAZY_COMMANDS]


def test_root_help_imports_no_subcommand_module_nor_rich() -> None:
    program = textwrap.dedent(
        """
        import json, sys
        sys.argv = ["sagents", "--help"]
        from sagents.cli.main import main
        try:
            main()
        except SystemExit:
            pass
        heavy = ("mcp", "mcp_types", "openai", "starlette", "uvicorn", "httpx", "pydantic",
                 "rich", "markdown_it", "pygments", "prometheus_client")
        print(json.dumps(sorted(
            m for m in sys.modules
            if m.split(".")[0] in heavy
            or m.startswith(("sagents.cli.", "sagents.gateway", "sagents.mcp", "sagents.config",
                             "sagents.script", "sagents.sandbox", "sagents.tool", "sagents.skill"))
            and m != "sagents.cli.main"
        )))
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert "run-script" in completed.stdout
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == []


def test_the_version_option_prints_the_version_and_exits_0() -> None:
    for option in ("--version", "-V"):
        result = CliRunner().invoke(app, [option])
        assert result.exit_code == 0, result.output
        assert result.stdout.strip() == __version__


def test_root_help_lists_each_commands_whole_help_line() -> None:
    result = CliRunner().invoke(app, ["--help"], terminal_width=60)
    assert result.exit_code == 0, result.output
    listing = " ".join(result.stdout.split())
    for name, entry in LAZY_COMMANDS.items():
        assert f"{name} {entry.short_help}" in listing


def test_no_command_prints_the_help_on_stdout_and_exits_2() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", "from sagents.cli.main import main; main()"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert completed.returncode == 2
    assert "run-script" in completed.stdout
    assert completed.stderr == ""


def test_the_version_option_is_listed_in_help() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert "--version" in result.stdout
