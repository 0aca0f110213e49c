"""``sagents chat --resume`` on a real pseudo-terminal: the conversation is kept in the agent
store of the data directory, and a turn left waiting for an approval (the chat killed while it
asked) is asked again and continued from its stored run state: the call runs once."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from anyio.from_thread import start_blocking_portal
from typer.testing import CliRunner

from sagents.cli._chat_session import EXIT_OK
from sagents.cli.main import app
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call
from tests.cli.cli_helpers import SAGENTS, fleet_config
from tests.cli.test_chat_terminal import CTRL_C, Terminal

SET = {"sn": "SN0001", "key": "mode", "value": "eco"}
RESULT = "SN0001: mode set to 'eco'"


@contextmanager
def _model(script: list[ScriptedReply]) -> Iterator[ScriptedModel]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(ScriptedModel(script)) as model,
    ):
        yield model


def _env(model: ScriptedModel, data_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "SAGENTS_MODEL", "SAGENTS_CONFIG", "SAGENTS_STATE_KEY")
    }
    env.update(
        OPENAI_BASE_URL=model.base_url, TERM="xterm", COLUMNS="120", SAGENTS_DATA_DIR=str(data_dir)
    )
    return env


def _tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def _killed_while_asking(argv: list[str], env: dict[str, str]) -> None:
    """A chat asked to set the device, killed (SIGKILL) while its approval prompt waits."""
    terminal = Terminal(argv, env)
    try:
        terminal.wait_for("> ")
        terminal.type(b"set SN0001 to eco\r")
        terminal.wait_for("fleet__set_device_config (write) with:")
        terminal.wait_for("deny [d]: ")
        terminal.process.send_signal(signal.SIGKILL)  # no goodbye: the state is all there is
        assert terminal.process.wait() == -signal.SIGKILL
    finally:
        terminal.close()


def _resumed(argv: list[str], env: dict[str, str], answer: bytes, then: str) -> Terminal:
    """``--resume``: the waiting call asked again and ``answer`` given; ``then`` shown."""
    terminal = Terminal([*argv, "--resume"], env)
    try:
        terminal.wait_for("(the last turn waits for 1 answer)")
        terminal.wait_for("fleet__set_device_config (write) with:")
        terminal.wait_for("deny [d]: ")
        terminal.type(answer)
        terminal.wait_for(then)
        terminal.wait_for("> ")
    except BaseException:
        terminal.close()
        raise
    return terminal


def test_a_chat_killed_while_it_asked_resumes_the_waiting_call_and_runs_it_once(
    tmp_path: Path,
) -> None:
    config = fleet_config(tmp_path / "fleet.json")
    script = [
        tool_call("fleet__set_device_config", SET, id="call1"),
        reply("Device configured."),
        reply("You are welcome."),
    ]
    with _model(script) as model:
        env = _env(model, tmp_path / "data")
        argv = [str(SAGENTS), "chat", "--config", str(config), "--model", "m"]
        _killed_while_asking(argv, env)
        assert len(model.requests) == 1  # nothing ran, nothing continued
        second = _resumed(argv, env, b"o\r", "Device configured.")
        try:
            second.type(b"thanks\r")
            second.wait_for("You are welcome.")
            second.wait_for("> ")
            second.type(b"/quit\r")
            code = second.exit_code()
        finally:
            second.close()
        requests = list(model.requests)
    shown = second.seen.decode(errors="replace")
    assert code == EXIT_OK, shown
    assert "Traceback" not in shown
    assert len(requests) == 3
    # the approved call ran once, after the resume, and its result went to the model
    assert [(m["tool_call_id"], m["content"]) for m in _tool_messages(requests[1])] == [
        ("call1", RESULT)
    ]
    # the next turn continues the same conversation: the first question, the call, its answer
    users = [m["content"] for m in requests[2]["messages"] if m["role"] == "user"]
    assert users == ["set SN0001 to eco", "thanks"]
    assert len(_tool_messages(requests[2])) == 1


def test_a_resumed_chat_may_deny_the_waiting_call_and_it_never_runs(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "fleet.json")
    script = [tool_call("fleet__set_device_config", SET, id="call1"), reply("Left as it is.")]
    with _model(script) as model:
        env = _env(model, tmp_path / "data")
        argv = [str(SAGENTS), "chat", "--config", str(config), "--model", "m"]
        _killed_while_asking(argv, env)
        second = _resumed(argv, env, b"d\r", "Left as it is.")
        try:
            second.type(b"/quit\r")
            code = second.exit_code()
        finally:
            second.close()
        requests = list(model.requests)
    assert code == EXIT_OK
    [denied] = _tool_messages(requests[1])
    assert denied["tool_call_id"] == "call1"
    assert "was denied by the user" in denied["content"]
    assert RESULT not in json.dumps(requests)


def test_resume_continues_the_last_chat_after_a_restart_and_says_when_there_is_none(
    tmp_path: Path,
) -> None:
    env = {"SAGENTS_DATA_DIR": str(tmp_path / "data"), "SAGENTS_CONFIG": ""}
    with _model([reply("Noted: blue."), reply("It was blue.")]) as model:
        args = ["chat", "--base-url", model.base_url, "--model", "m"]
        runner = CliRunner()
        none = runner.invoke(app, [*args, "--resume", "--prompt", "x"], env=env)
        first = runner.invoke(app, [*args, "--prompt", "my colour is blue"], env=env)
        again = runner.invoke(app, [*args, "--resume", "--prompt", "which colour?"], env=env)
        requests = list(model.requests)
    assert none.exit_code == 2
    assert "there is no chat to resume" in none.stderr
    assert (first.exit_code, again.exit_code) == (0, 0), first.output + again.output
    assert "It was blue." in again.stdout
    assert "(resumed chat-" in again.stderr
    assert [m["content"] for m in requests[1]["messages"] if m["role"] != "system"] == [
        "my colour is blue",
        "Noted: blue.",
        "which colour?",
    ]


def test_resume_and_web_together_are_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["chat", "--web", "--resume", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"],
        env={"SAGENTS_DATA_DIR": str(tmp_path)},
    )
    assert result.exit_code == 2
    assert "--resume is for the terminal chat" in result.stderr


QUESTIONS = {
    "title": "Trip",
    "questions": [
        {"id": "city", "kind": "single_choice", "prompt": "Where?", "options": ["Paris", "Rome"]},
        {"id": "nights", "kind": "number", "prompt": "Nights?", "integer": True, "minimum": 1},
    ],
}


def test_a_questionnaire_on_the_terminal_pauses_the_run_and_its_answer_continues_it(
    tmp_path: Path,
) -> None:
    script = [tool_call("questionnaire", QUESTIONS, id="c_q"), reply("Booked.")]
    with _model(script) as model:
        argv = [str(SAGENTS), "chat", "--model", "m"]
        terminal = Terminal(argv, _env(model, tmp_path / "data"))
        try:
            terminal.wait_for("> ")
            terminal.type(b"plan\r")
            terminal.wait_for("1. Where?")
            terminal.type(b"Rome\r")
            terminal.wait_for("2. Nights?")
            terminal.type(b"2\r")
            terminal.wait_for("Booked.")
            terminal.wait_for("> ")
            terminal.type(b"/quit\r")
            code = terminal.exit_code()
        finally:
            terminal.close()
        requests = list(model.requests)
    assert code == EXIT_OK
    [answered] = _tool_messages(requests[1])
    assert answered["tool_call_id"] == "c_q"
    assert "city (Where?): Rome" in answered["content"]
    assert "nights (Nights?): 2" in answered["content"]


def test_ctrl_c_at_the_approval_prompt_cancels_the_turn_and_leaves_nothing_waiting(
    tmp_path: Path,
) -> None:
    config = fleet_config(tmp_path / "fleet.json")
    script = [
        tool_call("fleet__set_device_config", SET, id="call1"),
        reply("Anything else?"),
        reply("You are welcome."),
    ]
    with _model(script) as model:
        env = _env(model, tmp_path / "data")
        argv = [str(SAGENTS), "chat", "--config", str(config), "--model", "m"]
        terminal = Terminal(argv, env)
        try:
            terminal.wait_for("> ")
            terminal.type(b"set SN0001 to eco\r")
            terminal.wait_for("deny [d]: ")
            terminal.type(CTRL_C)
            terminal.wait_for("(turn ended: cancelled)")
            terminal.wait_for("> ")
            terminal.type(b"no, leave it\r")  # read by the prompt, not a stale approval read
            terminal.wait_for("Anything else?")
            code = terminal.quit_at_the_prompt()
        finally:
            terminal.close()
        again = CliRunner().invoke(
            app,
            ["chat", "--config", str(config), "--base-url", model.base_url, "--model", "m",
             "--resume", "--prompt", "thanks"],
            env={"SAGENTS_DATA_DIR": env["SAGENTS_DATA_DIR"]},
        )  # fmt: skip
        requests = list(model.requests)
    assert code == EXIT_OK  # the last turn ended normally
    assert again.exit_code == 0, again.output
    assert "waits for" not in again.stderr  # the cancelled turn is not waiting any more
    assert len(requests) == 3
    users = [m["content"] for m in requests[1]["messages"] if m["role"] == "user"]
    assert users == ["set SN0001 to eco", "no, leave it"]
    [cancelled] = _tool_messages(requests[1])
    assert cancelled["tool_call_id"] == "call1"
    assert "cancelled" in cancelled["content"]
    assert RESULT not in json.dumps(requests)
