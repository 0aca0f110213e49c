"""``sagents chat`` on a real pseudo-terminal, as a person uses it: Ctrl-C (the terminal's own
^C, turned into SIGINT by the kernel) at the idle prompt and during a turn, the exit codes, and
never a traceback; ``/tools NAME``; the script status line redrawn in place; ``sagents tools
--schema``."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import select
import subprocess
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from anyio.from_thread import start_blocking_portal
from rich.console import Console
from typer.testing import CliRunner

from sagents.cli._chat_session import EXIT_OK, EXIT_TURN_FAILED, ChatRenderer
from sagents.cli.main import app
from sagents.core.events import ScriptProgressEvent
from sagents.testing import ScriptedModel, ScriptedReply, reply
from tests.cli.cli_helpers import CLI_TIMEOUT_S, SAGENTS, _drain, fleet_config

CTRL_C = b"\x03"


def _controlling_terminal() -> None:
    """In the child: a session of its own whose controlling terminal is its stdin (the pty),
    so that the terminal's ^C is a SIGINT to it, as in a shell."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """``sagents chat`` with stdin, stdout and stderr on one pseudo-terminal."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.leader, follower = pty.openpty()
        self.process = subprocess.Popen(
            argv,
            stdin=follower,
            stdout=follower,
            stderr=follower,
            env=env,
            preexec_fn=_controlling_terminal,  # setsid + TIOCSCTTY only
        )
        os.close(follower)
        self.seen = bytearray()
        self._mark = 0

    def wait_for(self, text: str) -> str:
        """Read until ``text`` appears after what earlier waits consumed; what came since."""
        needle = text.encode()
        deadline = time.monotonic() + CLI_TIMEOUT_S
        while needle not in self.seen[self._mark :]:
            left = deadline - time.monotonic()
            shown = self.seen.decode(errors="replace")
            assert left > 0, f"no {text!r} on the terminal:\n{shown}"
            if select.select([self.leader], [], [], left)[0]:
                try:
                    chunk = os.read(self.leader, 4096)
                except OSError:  # EIO: the other side closed
                    chunk = b""
                assert chunk, f"the terminal closed before {text!r}:\n{shown}"
                self.seen += chunk
        end = self.seen.index(needle, self._mark) + len(needle)
        since = self.seen[self._mark : end].decode(errors="replace")
        self._mark = end
        return since

    def type(self, data: bytes) -> None:
        os.write(self.leader, data)

    def quit_at_the_prompt(self) -> int:
        """Ctrl-C twice at the idle prompt (which is shown); the exit code."""
        self.wait_for("> ")
        self.type(CTRL_C)
        self.wait_for("(line cleared")
        self.type(CTRL_C)
        self.wait_for("(Ctrl-C twice: quit)")
        return self.exit_code()

    def exit_code(self) -> int:
        code = self.process.wait(timeout=CLI_TIMEOUT_S)
        _drain(self.leader, self.seen)
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.leader)


@contextmanager
def chat_on_terminal(script: list[ScriptedReply]) -> Iterator[tuple[Terminal, ScriptedModel]]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(ScriptedModel(script)) as model,
    ):
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "SAGENTS_MODEL", "SAGENTS_CONFIG")
        }
        env.update(OPENAI_BASE_URL=model.base_url, TERM="xterm", COLUMNS="120")
        terminal = Terminal([str(SAGENTS), "chat", "--model", "m"], env)
        try:
            yield terminal, model
        finally:
            terminal.close()


def test_ctrl_c_at_the_prompt_clears_the_line_and_a_second_quits_saying_so() -> None:
    with chat_on_terminal([reply("Hi there")]) as (terminal, model):
        terminal.wait_for("> ")
        terminal.type(b"half a line")
        terminal.wait_for("half a line")  # echoed: the terminal has it
        terminal.type(CTRL_C)
        terminal.wait_for("(line cleared; Ctrl-C again quits)")
        terminal.wait_for("> ")
        terminal.type(b"hello\r")
        terminal.wait_for("Hi there")
        terminal.wait_for("> ")
        terminal.type(CTRL_C)
        terminal.wait_for("(line cleared")
        terminal.type(CTRL_C)
        terminal.wait_for("(Ctrl-C twice: quit)")
        code = terminal.exit_code()
        asked = [m["content"] for m in model.requests[0]["messages"] if m["role"] == "user"]
    shown = terminal.seen.decode(errors="replace")
    assert asked == ["hello"]  # the cleared text never reached the model
    assert code == EXIT_OK
    assert "Traceback" not in shown


def test_ctrl_c_during_a_turn_cancels_it_and_the_exit_code_says_so() -> None:
    script = [ScriptedReply(content="thinking about it " * 4, hang_after_chunks=2)]
    with chat_on_terminal(script) as (terminal, _model):
        terminal.wait_for("> ")
        terminal.type(b"go\r")
        terminal.wait_for("think")
        terminal.type(CTRL_C)
        terminal.wait_for("(cancelling the turn; Ctrl-C again quits)")
        terminal.wait_for("(turn ended: cancelled)")
        code = terminal.quit_at_the_prompt()
    assert code == EXIT_TURN_FAILED  # the last turn was cancelled
    assert "Traceback" not in terminal.seen.decode(errors="replace")


def test_the_tools_command_with_a_name_shows_its_schema(monkeypatch: object) -> None:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(ScriptedModel([])) as model,
    ):
        result = CliRunner().invoke(
            app,
            ["chat", "--base-url", model.base_url, "--model", "m"],
            input="/tools questionnaire\n/tools questionaire\n/tools\n",
            catch_exceptions=False,
        )
    assert result.exit_code == 0, result.output
    out = result.stdout
    start = out.index("{")
    schema, _ = json.JSONDecoder().raw_decode(out[start:])
    assert schema["type"] == "object"
    assert "questions" in schema["properties"]
    assert "no tool 'questionaire' in this session; did you mean" not in out  # not a substring
    assert "no tool 'questionaire' in this session" in out


def test_the_script_status_line_is_redrawn_in_place_on_a_terminal() -> None:
    def snapshot(done: int, status: Literal["running", "ok"] = "running") -> ScriptProgressEvent:
        return ScriptProgressEvent(
            script_id="r", calls=done, done=done, total=3, status=status, ts=1.0
        )

    shown = io.StringIO()
    renderer = ChatRenderer(
        out=Console(file=io.StringIO(), force_terminal=True),
        err=Console(file=shown, force_terminal=True, width=100),
    )
    for event in (snapshot(1), snapshot(2), snapshot(3, "ok")):
        renderer.show(event)
    text = shown.getvalue()
    assert text.count("\r\x1b[2K") == 3  # each snapshot erases the line and draws it again
    assert text.count("\n") == 1  # one line in all, ended by the final status
    piped = io.StringIO()
    renderer = ChatRenderer(out=Console(file=io.StringIO()), err=Console(file=piped, width=100))
    for event in (snapshot(1), snapshot(2), snapshot(3, "ok")):
        renderer.show(event)
    assert piped.getvalue().count("\n") == 3  # not a terminal: one line per snapshot
    assert "\r" not in piped.getvalue()


def test_sagents_tools_schema_prints_one_tools_input_schema(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "servers.json")
    done = subprocess.run(
        [str(SAGENTS), "tools", "--config", str(config), "--schema", "fleet__get_device_status"],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        env={**os.environ, "SAGENTS_DATA_DIR": str(tmp_path / "data")},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    assert schema["type"] == "object"
    assert schema["properties"]["sn"]["type"] == "string"
    unknown = subprocess.run(
        [str(SAGENTS), "tools", "--config", str(config), "--schema", "no_such_tool"],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        env={**os.environ, "SAGENTS_DATA_DIR": str(tmp_path / "data")},
        check=False,
    )
    assert unknown.returncode != 0
    assert "no_such_tool" in unknown.stderr
