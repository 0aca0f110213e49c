"""Every ``--help`` is in click's plain layout and loads no Rich; text on a stream that is not a
terminal is not wrapped (docs/cli-tools.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

from sagents.cli._rich import stderr_console
from sagents.cli.main import LAZY_COMMANDS

COMMANDS = [
    *([name] for name in sorted(LAZY_COMMANDS)),
    ["skills", "list"],
    ["skills", "show"],
    ["skills", "validate"],
]

PROGRAM = textwrap.dedent(
    """
    import json, sys
    from sagents.cli.main import main
    sys.argv = ["sagents", *json.loads(sys.argv[1]), "--help"]
    try:
        main()
    except SystemExit as exit:
        code = exit.code
    print(json.dumps({"code": code, "rich": sorted(
        m for m in sys.modules if m.split(".")[0] in ("rich", "markdown_it", "pygments")
    )}), file=sys.stderr)
    """
)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_each_commands_help_is_clicks_plain_layout_without_rich(command: list[str]) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(command)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    outcome = json.loads(completed.stderr.strip().splitlines()[-1])
    assert outcome == {"code": 0, "rich": []}, completed.stderr
    assert completed.stdout.startswith(f"Usage: sagents {' '.join(command)} ")
    assert "\nOptions:\n" in completed.stdout
    assert "╭" not in completed.stdout  # no Rich panel
    assert "<bool>" not in completed.stdout  # a flag takes no value
    # a value is named for what it is, not by its Python type (<list[str]>, <int range>)
    assert re.findall(r"<[^>]*(?:\[| range)[^>]*>", completed.stdout) == []
    listing = completed.stdout.partition("\nCommands:\n")[2]
    assert not [line for line in listing.splitlines() if line.endswith("...")]  # not cut


def test_a_usage_error_is_one_unwrapped_line_in_the_plain_layout() -> None:
    long_value = "x" * 150
    completed = subprocess.run(
        [sys.executable, "-c", "from sagents.cli.main import main; main()",
         "serve", "--port", long_value],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert completed.returncode == 2
    assert "╭" not in completed.stderr
    (line,) = [line for line in completed.stderr.splitlines() if line.startswith("Error:")]
    assert "'--port'" in line
    assert "integer" in line


def test_text_on_a_stderr_that_is_not_a_terminal_is_not_wrapped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sentence = " ".join(f"word{i}" for i in range(60))  # far wider than 80 columns
    console = stderr_console()
    assert not console.is_terminal
    console.print(sentence)
    assert capsys.readouterr().err == sentence + "\n"
