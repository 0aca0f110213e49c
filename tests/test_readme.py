"""Every command in the README runs, except the two set-up commands themselves
(scripts/check-fresh-clone.sh checks those from a fresh clone).

Python blocks run as they are, in a subprocess from the repository root. Shell lines that start
with ``.venv/bin/sagents`` run as they are, except ``serve`` (it serves until stopped; the
Inspector line below drives it). The MCP Inspector line runs ``scripts/inspect.sh``, which uses
the Inspector and the Node 22 that scripts/setup-peers.sh installs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SETUP_COMMANDS = {"./scripts/run.sh", "./scripts/test.sh"}


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def _shell_lines() -> list[str]:
    lines = []
    for block in _blocks("bash"):
        for raw in block.splitlines():
            line = raw.split("  #")[0].strip()
            if line and line.split()[0] not in SETUP_COMMANDS:
                lines.append(line)
    return lines


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["SAGENTS_DATA_DIR"] = str(tmp_path / "data")
    env.pop("SAGENTS_CONFIG", None)
    return env


def _run(argv: list[str], tmp_path: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_the_readme_has_exactly_the_two_set_up_commands() -> None:
    setup = [
        line.split()[0]
        for block in _blocks("bash")
        for line in block.splitlines()
        if line.strip().startswith("./scripts/")
    ]
    assert setup == ["./scripts/run.sh", "./scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/test.sh" in ci


PYTHON_EXPECTATIONS = [
    ["get_weather", "sunny"],
    ["fleet__get_device_status", "SN0001", "not_allowed"],
    ["my-skill"],
    ["message.delta", "Sunny and 23", "'reason': 'stop'"],
]


@pytest.mark.parametrize("index", range(len(PYTHON_EXPECTATIONS)))
def test_python_examples_run_unchanged(index: int, tmp_path: Path) -> None:
    blocks = _blocks("python")
    assert len(blocks) == len(PYTHON_EXPECTATIONS)
    done = _run([sys.executable, "-c", blocks[index]], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    for expected in PYTHON_EXPECTATIONS[index]:
        assert expected in done.stdout, done.stdout[-3000:]


def _sagents_lines() -> list[str]:
    return [
        line
        for line in _shell_lines()
        if line.startswith(".venv/bin/sagents ") and line.split()[1] != "serve"
    ]


def test_the_readme_shows_the_cli_commands() -> None:
    commands = {line.split()[1] for line in _sagents_lines()}
    assert {"tools", "call", "run-script", "skills"} <= commands


@pytest.mark.parametrize("line", _sagents_lines())
def test_sagents_commands_run(line: str, tmp_path: Path) -> None:
    done = _run(shlex.split(line), tmp_path)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    assert done.stdout.strip()


def test_the_inspector_command_lists_the_gateway_tools(tmp_path: Path) -> None:
    lines = [line for line in _shell_lines() if line.startswith("scripts/inspect.sh ")]
    assert len(lines) == 1
    assert not [line for line in _shell_lines() if line.startswith("npx ")]  # needs Node >= 22
    done = _run(shlex.split(lines[0]), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    names = {tool["name"] for tool in json.loads(done.stdout)["tools"]}
    assert "fleet__get_device_status" in names


def test_inspect_sh_defaults_to_the_fleet_example(tmp_path: Path) -> None:
    done = _run(["scripts/inspect.sh", "--cli", "--method", "tools/list"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    names = {tool["name"] for tool in json.loads(done.stdout)["tools"]}
    assert "fleet__get_device_status" in names


def test_the_readme_names_every_package_set_up_installs_with_its_size() -> None:
    """Each system package scripts/setup.sh may install, and ``.peers/``, is in the README's
    table of what set-up installs, with a size in MB."""
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    packages = re.findall(r"missing\+=\(([\w-]+)\)", setup)
    assert sorted(packages) == ["bubblewrap", "chromium", "chromium-driver", "git", "postgresql"]
    rows = [line for line in README.splitlines() if line.startswith("| ") and " MB" in line]
    for name in [*packages, ".peers/", ".venv"]:
        assert any(f"`{name}`" in row for row in rows), name
