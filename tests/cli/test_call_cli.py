"""``sagents call`` as a new user meets it: only the owning server starts, ``--args`` from a
file or stdin, ``--mode`` asks before write and destructive calls; ``sagents tools --server``."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sagents.cli._call_approval import approve_call
from sagents.cli.main import app
from sagents.cli.terminal_approval import TerminalApprover
from sagents.core._permissions import PermissionMode
from sagents.core._spec import ToolSource, ToolSpec
from tests.cli.cli_helpers import SAGENTS, run_on_terminal
from tests.mcp.helpers import SERVERS

runner = CliRunner()
FAULT = {"command": sys.executable, "args": [str(SERVERS / "fault_server.py")]}


@pytest.fixture(autouse=True)
def _logs_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SAGENTS_CONFIG", raising=False)


def _marker_server(marker: Path) -> dict[str, Any]:
    """A "server" that leaves ``marker`` behind when it is started, then exits."""
    return {"command": sys.executable, "args": ["-c", f"open({str(marker)!r}, 'w').close()"]}


def _config(tmp_path: Path, marker: Path) -> Path:
    path = tmp_path / "sagents.json"
    servers = {"fault": FAULT, "other": _marker_server(marker)}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_call_starts_only_the_server_that_owns_the_tool(tmp_path: Path) -> None:
    marker = tmp_path / "other-started"
    config = _config(tmp_path, marker)
    result = runner.invoke(app, ["call", "fault__add", "-a", '{"a": 1, "b": 2}', "-c", str(config)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "3"
    assert not marker.exists()


def test_tools_server_lists_and_starts_only_that_server(tmp_path: Path) -> None:
    marker = tmp_path / "other-started"
    config = _config(tmp_path, marker)
    result = runner.invoke(app, ["tools", "--server", "fault", "-c", str(config), "--json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    assert {s["name"] for s in listing["servers"]} == {"fault"}
    assert "fault__add" in {t["name"] for t in listing["tools"]}
    assert not marker.exists()


def test_tools_server_with_an_unknown_name_lists_the_configured_servers(tmp_path: Path) -> None:
    config = _config(tmp_path, tmp_path / "m")
    result = runner.invoke(app, ["tools", "--server", "faul", "-c", str(config)])
    assert result.exit_code == 2
    assert "no enabled server 'faul'" in result.stderr
    assert "fault, other" in result.stderr


def test_args_are_read_from_a_file_with_an_at_sign(tmp_path: Path) -> None:
    config = _config(tmp_path, tmp_path / "m")
    big = "x" * 300_000  # far past what a command line comfortably holds
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"text": big}))
    result = runner.invoke(
        app,
        [
            "call",
            "fault__echo",
            "--args",
            f"@{args}",
            "-c",
            str(config),
            "--yes",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output[-2000:]
    assert json.loads(result.stdout)["content"][0]["text"] == big


def test_args_are_read_from_stdin_with_a_dash(tmp_path: Path) -> None:
    config = _config(tmp_path, tmp_path / "m")
    result = runner.invoke(
        app, ["call", "fault__add", "--args", "-", "-c", str(config)], input='{"a": 20, "b": 22}'
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "42"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("@{missing}", "cannot read the --args file '{missing}': No such file or directory"),
        ("@{bad}", "--args file '{bad}' is not valid JSON (line 1, column 2"),
        ("@{array}", "--args file '{array}' must be a JSON object, not list"),
    ],
)
def test_a_bad_args_file_is_a_usage_error_naming_it(
    tmp_path: Path, args: str, message: str
) -> None:
    files = {"missing": tmp_path / "missing.json", "bad": tmp_path / "bad.json",
             "array": tmp_path / "array.json"}  # fmt: skip
    files["bad"].write_text("{nope")
    files["array"].write_text("[1, 2]")
    names = {key: str(path) for key, path in files.items()}
    result = runner.invoke(app, ["call", "x__y", "--args", args.format(**names)])
    assert result.exit_code == 2
    assert message.format(**names) in result.stderr


def test_ask_mode_without_a_terminal_refuses_a_destructive_call_saying_nobody_was_asked(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, tmp_path / "m")
    result = runner.invoke(
        app, ["call", "fault__echo", "-a", '{"text": "hi"}', "-c", str(config), "--json"]
    )
    assert result.exit_code == 1
    value = json.loads(result.stdout)
    assert value["error"]["code"] == "not_allowed"
    assert "nobody was asked" in value["error"]["message"]
    assert "pass --yes" in value["error"]["hint"]
    assert "denied" not in value["error"]["message"]


def test_auto_mode_without_a_terminal_refuses_a_destructive_call_naming_the_flag(
    tmp_path: Path,
) -> None:
    # As with ToolProxy: auto mode runs write tools unasked, a destructive one is asked about.
    config = _config(tmp_path, tmp_path / "m")
    argv = ["call", "fault__echo", "-a", '{"text": "hi"}', "-c", str(config), "--mode", "auto"]
    result = runner.invoke(app, [*argv, "--json"])
    assert result.exit_code == 1
    value = json.loads(result.stdout)
    assert value["error"]["code"] == "not_allowed"
    assert "nobody was asked" in value["error"]["message"]
    assert "pass --yes" in value["error"]["hint"]


def test_yes_calls_a_destructive_tool_unasked(tmp_path: Path) -> None:
    config = _config(tmp_path, tmp_path / "m")
    argv = ["call", "fault__echo", "-a", '{"text": "hi"}', "-c", str(config), "--mode", "auto"]
    result = runner.invoke(app, [*argv, "--yes"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "hi"


def test_read_only_mode_refuses_a_destructive_call_but_runs_a_read_only_one(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, tmp_path / "m")
    refused = runner.invoke(
        app,
        ["call", "fault__echo", "-a", '{"text": "x"}', "-c", str(config), "--mode", "read-only"],
    )
    assert refused.exit_code == 1
    assert "this session is read-only" in refused.stdout
    # --mode auto alone still asks before a destructive call: the hint names what runs it
    assert "--mode ask or --mode auto (asks first; add --yes" in refused.stdout
    ran = runner.invoke(
        app,
        ["call", "fault__add", "-a", '{"a": 1, "b": 1}', "-c", str(config), "--mode", "read-only"],
    )
    assert ran.exit_code == 0, ran.output


def test_a_bad_mode_is_a_usage_error() -> None:
    result = runner.invoke(app, ["call", "x__y", "--mode", "yolo"])
    assert result.exit_code == 2
    assert "unknown permission mode 'yolo'" in result.stderr


def _spec(summary: str = "Deletes things.") -> ToolSpec:
    return ToolSpec(
        name="files__delete",
        description=summary,
        permission="destructive",
        source=ToolSource(kind="mcp", server="files"),
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("answer", "allowed"), [("o", True), ("allow", True), ("n", False), ("", False)]
)
@pytest.mark.parametrize("mode", ["ask", "auto"])
async def test_the_terminal_approver_is_asked_before_a_destructive_call_in_every_mode(
    answer: str, allowed: bool, mode: PermissionMode
) -> None:
    screen = io.StringIO()
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return answer

    approver = TerminalApprover(console=Console(file=screen, width=80), ask=ask)
    refusal = await approve_call(_spec(), {"path": "/data"}, mode, approver=approver)
    assert (refusal is None) is allowed
    assert "files__delete (destructive)" in screen.getvalue()
    assert '"path": "/data"' in screen.getvalue()
    assert prompts == ["allow once [o] / deny [d]: "]
    if refusal is not None:
        assert refusal.error is not None
        assert refusal.error.code == "approval_denied"
        assert "denied at the terminal prompt" in refusal.error.message


@pytest.mark.anyio
async def test_a_write_call_is_asked_in_ask_mode_only_and_never_offers_the_session() -> None:
    spec = dataclasses.replace(_spec(), permission="write")
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return "o"

    approver = TerminalApprover(console=Console(file=io.StringIO()), ask=ask)
    assert await approve_call(spec, {}, "auto", approver=approver) is None
    assert prompts == []
    assert await approve_call(spec, {}, "ask", approver=approver) is None
    assert prompts == ["allow once [o] / deny [d]: "]
    refused = await approve_call(spec, {}, "ask", approver=None)
    assert refused is not None
    assert refused.error is not None
    assert "pass --mode auto or --yes" in (refused.error.hint or "")


@pytest.mark.anyio
async def test_the_prompt_prints_model_text_literally() -> None:
    screen = io.StringIO()
    spec = _spec()
    approver = TerminalApprover(
        console=Console(file=screen, force_terminal=True, width=200), ask=lambda prompt: "n"
    )
    await approve_call(spec, {"note": "[blink]x[/blink]\x1b]0;owned\x07\u202e"}, "ask",
                       approver=approver)  # fmt: skip
    shown = screen.getvalue()
    assert "\x1b]0;" not in shown
    assert "\u202e" not in shown
    assert "[blink]x[/blink]" in shown


@pytest.mark.parametrize("mode", ["ask", "auto"])
def test_on_a_terminal_a_destructive_call_is_asked_and_runs_when_allowed(
    tmp_path: Path, mode: str
) -> None:
    config = _config(tmp_path, tmp_path / "m")
    env = {**os.environ, "SAGENTS_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "120"}
    argv = [str(SAGENTS), "call", "fault__echo", "-a", '{"text": "ran"}', "-c", str(config)]
    argv += ["--mode", mode]
    code, stdout, terminal = run_on_terminal(
        argv, cwd=tmp_path, env=env, prompt=b"allow once [o] / deny [d]: ", answer=b"o\n"
    )
    assert "fault__echo (destructive)" in terminal
    assert code == 0, terminal
    assert stdout.strip() == "ran"
