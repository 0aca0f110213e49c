"""``sagents chat``: one --prompt turn against the scripted model, NDJSON, errors, approvals."""

from __future__ import annotations

import io
import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from rich.console import Console
from typer.testing import CliRunner, Result

from sagents.cli._chat_session import ChatRenderer, TerminalApprover, json_line
from sagents.cli.main import app
from sagents.core.events import ScriptProgressEvent
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call
from sagents.tool import ApprovalRequest

FLEET = Path(__file__).resolve().parents[2] / "examples" / "fleet" / "mcp_servers.json"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SAGENTS_MODEL", "SAGENTS_CONFIG"):
        monkeypatch.delenv(name, raising=False)


@contextmanager
def _serve(script: list[ScriptedReply], api: str = "chat") -> Iterator[ScriptedModel]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(ScriptedModel(script, api=api)) as model,  # type: ignore[arg-type]
    ):
        yield model


def test_chat_prompt_json_prints_one_ndjson_event_per_line_ending_in_done(
    env: None, tmp_path: Path
) -> None:
    with _serve([reply("Hello from the model")]) as model:
        result = CliRunner().invoke(
            app,
            ["chat", "--prompt", "hi", "--json", "--base-url", model.base_url, "--model", "m"],
            catch_exceptions=False,
        )
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[-1]["type"] == "done"
    assert events[-1]["reason"] == "stop"
    text = "".join(e["delta"] for e in events if e["type"] == "message.delta")
    assert text == "Hello from the model"


def test_chat_prompt_runs_a_tool_of_the_configured_servers_and_shows_it(env: None) -> None:
    script = [tool_call("fleet__get_device_status", {"sn": "SN0001"}), reply("SN0001 is fine")]
    with _serve(script) as model:
        result = CliRunner().invoke(
            app,
            [
                "chat",
                "--config",
                str(FLEET),
                "--prompt",
                "status?",
                "--base-url",
                model.base_url,
                "--model",
                "m",
            ],
            catch_exceptions=False,
        )
        requests = list(model.requests)
    assert result.exit_code == 0, result.output
    assert "SN0001 is fine" in result.stdout
    assert "fleet__get_device_status" in result.stderr
    assert requests[1]["messages"][-1]["role"] == "tool"
    assert "SN0001" in requests[1]["messages"][-1]["content"]


def test_chat_tool_choice_and_a_provider_string_reach_the_request(env: None) -> None:
    script = [tool_call("fleet__get_device_status", {"sn": "SN0001"}), reply("fine")]
    with _serve(script) as model:
        result = CliRunner().invoke(
            app,
            [
                "chat",
                "--config",
                str(FLEET),
                "--prompt",
                "status?",
                "--tool-choice",
                "auto",
                "--base-url",
                model.base_url,
                "--model",
                "openai:m",
            ],
            catch_exceptions=False,
        )
        requests = list(model.requests)
    assert result.exit_code == 0, result.output
    assert requests[0]["tool_choice"] == "auto"
    assert requests[0]["model"] == "m"


def _chat_naming_the_fleet_tool(
    config: Path, script: list[ScriptedReply]
) -> tuple[Result, list[dict[str, Any]]]:
    """One ``--prompt`` turn with ``--tool-choice fleet__get_device_status``: the result and the
    requests the model got."""
    with _serve(script) as model:
        result = CliRunner().invoke(
            app,
            ["chat", "--config", str(config), "--prompt", "status?", "--tool-choice",
             "fleet__get_device_status", "--base-url", model.base_url, "--model", "m"],
            catch_exceptions=False,
        )  # fmt: skip
        return result, list(model.requests)


def test_chat_tool_choice_naming_a_tool_forces_its_call_once(env: None) -> None:
    script = [tool_call("fleet__get_device_status", {"sn": "SN0001"}), reply("SN0001 is fine")]
    result, requests = _chat_naming_the_fleet_tool(FLEET, script)
    assert result.exit_code == 0, result.output
    assert "SN0001 is fine" in result.stdout
    named = {"type": "function", "function": {"name": "fleet__get_device_status"}}
    assert requests[0]["tool_choice"] == named
    assert "fleet__get_device_status" in [t["function"]["name"] for t in requests[0]["tools"]]
    assert "tool_choice" not in requests[1]  # the call was made: the model may answer


def test_chat_tool_choice_naming_a_tool_of_a_server_that_did_not_start_is_a_clear_error(
    env: None, tmp_path: Path
) -> None:
    config = tmp_path / "mcp_servers.json"
    missing = str(tmp_path / "no-such-python")
    config.write_text(json.dumps({"mcpServers": {"fleet": {"command": missing}}}))
    result, requests = _chat_naming_the_fleet_tool(config, [reply("never")])
    assert result.exit_code == 1, result.output
    assert "tool_choice 'fleet__get_device_status' names no tool offered" in result.stderr
    assert "was its MCP server started?" in result.stderr
    assert "--tool-choice" in result.stderr  # the hint
    assert requests == []  # nothing was sent to the model


@pytest.mark.parametrize(
    ("api", "provider"),
    [("responses", "openai-responses"), ("anthropic", "anthropic"), ("gemini", "gemini")],
)
def test_chat_runs_a_tool_turn_on_each_adapter_s_model_string(
    env: None, monkeypatch: pytest.MonkeyPatch, api: str, provider: str
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, "scripted-key")
    script = [tool_call("fleet__get_device_status", {"sn": "SN0001"}), reply("SN0001 is fine")]
    with _serve(script, api=api) as model:
        base_url = model.base_url if api == "responses" else model.base_url.removesuffix("/v1")
        result = CliRunner().invoke(
            app,
            [
                "chat",
                "--config",
                str(FLEET),
                "--prompt",
                "status?",
                "--base-url",
                base_url,
                "--model",
                f"{provider}:m",
            ],
            catch_exceptions=False,
        )
        second = json.dumps(model.requests[1])
    assert result.exit_code == 0, result.output
    assert "SN0001 is fine" in result.stdout
    assert "fleet__get_device_status" in result.stderr
    assert "SN0001" in second


def test_chat_on_gemini_without_a_key_names_the_variable(
    env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    result = CliRunner().invoke(
        app, ["chat", "--prompt", "hi", "--model", "gemini:flash", "--base-url", "http://x"]
    )
    assert result.exit_code == 2
    assert "GEMINI_API_KEY" in result.stderr


def test_chat_on_anthropic_without_a_key_names_the_variable(
    env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = CliRunner().invoke(
        app, ["chat", "--prompt", "hi", "--model", "anthropic:claude-sonnet-4-5"]
    )
    assert result.exit_code == 2
    assert "ANTHROPIC_API_KEY" in result.stderr


def test_chat_without_an_endpoint_says_which_variables_to_set(env: None) -> None:
    result = CliRunner().invoke(app, ["chat", "--prompt", "hi", "--model", "m"])
    assert result.exit_code == 2
    assert "OPENAI_BASE_URL" in result.stderr
    assert "--base-url" in result.stderr


@pytest.mark.parametrize("turns", ["0", "-1"])
def test_chat_refuses_max_turns_below_one_as_a_usage_error(env: None, turns: str) -> None:
    # it was a ValueError traceback from SAgent, exit 1
    result = CliRunner().invoke(
        app, ["chat", "--prompt", "hi", "--max-turns", turns, "--base-url", "http://x/v1"]
    )
    assert result.exit_code == 2
    assert "--max-turns" in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_chat_refuses_an_empty_tool_choice_as_a_usage_error(env: None) -> None:
    result = CliRunner().invoke(
        app, ["chat", "--prompt", "hi", "--tool-choice", "", "--base-url", "http://x/v1"]
    )
    assert result.exit_code == 2
    assert "--tool-choice" in result.stderr


def test_chat_rejects_an_unknown_mode(env: None) -> None:
    result = CliRunner().invoke(app, ["chat", "--mode", "yolo", "--base-url", "http://x/v1"])
    assert result.exit_code == 2
    assert "read-only" in result.stderr


@pytest.mark.anyio
async def test_the_terminal_approval_shows_long_lines_whole_and_reads_the_answer() -> None:
    long_value = "x" * 150 + "END"
    buffer = io.StringIO()
    console = Console(file=buffer, width=40, force_terminal=False)
    answers = iter(["s"])
    approver = TerminalApprover(console=console, ask=lambda _prompt: next(answers))
    request = ApprovalRequest.for_tool_call(
        "save", {"text": long_value}, permission="write", session_id="s"
    )
    assert await approver.approve(request) == "allow_session"
    shown = buffer.getvalue()
    assert long_value in shown.replace("\n", "")
    assert "save (write)" in shown


@pytest.mark.anyio
async def test_the_terminal_approval_denies_on_end_of_input_or_an_answer_not_offered() -> None:
    def eof(_prompt: str) -> str:
        raise EOFError

    console = Console(file=io.StringIO(), width=80)
    script = ApprovalRequest.for_script(("save",), "print(1)\n", session_id="s")
    assert await TerminalApprover(console=console, ask=eof).approve(script) == "deny"
    assert await TerminalApprover(console=console, ask=lambda _p: "s").approve(script) == "deny"
    assert await TerminalApprover(console=console, ask=lambda _p: "o").approve(script) == (
        "allow_once"
    )


def test_chat_help_does_not_import_the_agent_loop() -> None:
    import subprocess

    code = (
        "import sys, sagents.cli.main\n"
        "print('openai' in sys.modules or 'sagents.agent' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


_HOSTILE = "a\x1b[2J\x1b]0;pwned\x07b [bold]x[/bold] \x9bc"


def _terminal() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=200, force_terminal=True, color_system=None), buffer


@pytest.mark.anyio
async def test_the_terminal_approval_shows_control_characters_of_a_script_as_escapes() -> None:
    console, buffer = _terminal()
    hidden = "print('shown')\n\x1b[1A\x1b[2Kdelete_everything()\n"
    request = ApprovalRequest.for_script(("save",), hidden, session_id="s")
    await TerminalApprover(console=console, ask=lambda _p: "d").approve(request)
    shown = buffer.getvalue()
    assert "\x1b[1A" not in shown
    assert "\\x1b[1A\\x1b[2Kdelete_everything()" in shown


def test_model_text_tool_calls_and_results_are_printed_literally() -> None:
    from sagents.agent import MessageDeltaEvent, MessageEvent
    from sagents.cli._chat_session import ChatRenderer
    from sagents.core.events import ToolProgressEvent

    out, out_buffer = _terminal()
    err, err_buffer = _terminal()
    renderer = ChatRenderer(out=out, err=err)
    renderer.show(MessageDeltaEvent(delta=_HOSTILE))
    call = {"id": "c", "type": "function", "function": {"name": "t\x1b[31m", "arguments": "{}"}}
    renderer.show(MessageEvent(message={"role": "assistant", "tool_calls": [call]}))
    renderer.show(MessageEvent(message={"role": "tool", "tool_call_id": "c", "content": _HOSTILE}))
    renderer.show(ToolProgressEvent(tool_call_id="c", text=_HOSTILE, stream="stdout", ts=0.0))
    for shown in (out_buffer.getvalue(), err_buffer.getvalue()):
        assert "\x1b" not in shown  # no colours either: color_system=None
        assert "\x9b" not in shown
        assert "\\x1b[2J" in shown
        assert "[bold]x[/bold]" in shown
    assert "t\\x1b[31m" in err_buffer.getvalue()


def test_a_turn_the_store_did_not_keep_shows_the_stores_error_after_the_answer() -> None:
    from sagents.agent import DoneEvent
    from sagents.errors import StoreUnavailableError

    out, _ = _terminal()
    err, err_buffer = _terminal()
    renderer = ChatRenderer(out=out, err=err)
    failure = StoreUnavailableError("cannot use the store agents.sqlite3: database or disk is full")
    renderer.show(DoneEvent(reason="stop", error=failure.to_dict()))
    shown = err_buffer.getvalue()
    assert "error: cannot use the store agents.sqlite3: database or disk is full" in shown
    assert "turn ended" not in shown


def _strict_loads(line: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON (RFC 8259)")

    return json.loads(line, parse_constant=refuse)


def test_json_lines_of_events_carrying_nan_or_infinity_stay_valid_json() -> None:
    event = ScriptProgressEvent(
        script_id="s1", calls=1, done=math.nan, total=math.inf, elapsed_s=-math.inf, ts=0.0
    )
    line = json_line(event.to_dict())
    assert "\n" not in line
    parsed = _strict_loads(line)
    assert parsed["done"] is None
    assert parsed["total"] is None
    assert parsed["elapsed_s"] is None
    assert parsed["calls"] == 1
    nested = _strict_loads(json_line({"a": [1.5, {"b": math.nan}], "c": (math.inf,), "é": "ü"}))
    assert nested == {"a": [1.5, {"b": None}], "c": [None], "é": "ü"}


def test_the_script_status_line_says_one_call_in_the_singular() -> None:
    out, _ = _terminal()
    err, err_buffer = _terminal()
    renderer = ChatRenderer(out=out, err=err)
    renderer.show(ScriptProgressEvent(script_id="s1", calls=1, ts=0.0))
    renderer.show(ScriptProgressEvent(script_id="s1", calls=2, ts=0.0))
    shown = err_buffer.getvalue()
    assert "script running: 1 call, 0 failed" in shown
    assert "script running: 2 calls, 0 failed" in shown


QUESTIONS = {
    "title": "Trip",
    "questions": [
        {"id": "city", "kind": "single_choice", "prompt": "Where?", "options": ["Paris", "Rome"]},
        {
            "id": "extras",
            "kind": "multiple_choice",
            "prompt": "Extras?",
            "options": ["a", "b", "c"],
        },
        {"id": "nights", "kind": "number", "prompt": "Nights?", "integer": True, "minimum": 1},
        {"id": "notes", "kind": "text", "prompt": "Notes?", "default": "none"},
    ],
}


def _chat_with_stdin(stdin: str) -> tuple[Any, list[dict[str, Any]]]:
    script = [tool_call("questionnaire", QUESTIONS, id="c_q"), reply("Booked.")]
    with _serve(script) as model:
        result = CliRunner().invoke(
            app,
            ["chat", "--prompt", "plan", "--base-url", model.base_url, "--model", "m"],
            input=stdin,
            catch_exceptions=False,
        )
        requests = list(model.requests)
    return result, requests


def test_chat_asks_a_questionnaire_as_a_terminal_form_on_piped_stdin(env: None) -> None:
    result, requests = _chat_with_stdin("Rome\n3, 1\n0\n2\n\n")
    assert result.exit_code == 0, result.output
    assert "Question from the model (not an approval" in result.stderr  # who asks, always
    assert '"Trip"' in result.stderr  # the model's title, quoted on one line
    assert "1. Where?" in result.stderr
    assert "   2) Rome" in result.stderr
    assert "below the minimum" in result.stderr  # 0 nights is asked again
    answered = requests[1]["messages"][-1]
    assert answered["role"] == "tool"
    assert "city (Where?): Rome" in answered["content"]
    assert 'extras (Extras?): ["a", "c"]' in answered["content"]
    assert "nights (Nights?): 2" in answered["content"]
    assert "notes (Notes?): none" in answered["content"]
    assert "Booked." in result.stdout


def test_chat_questionnaire_declined_or_cut_short_by_the_end_of_input(env: None) -> None:
    declined, requests = _chat_with_stdin("/decline\n")
    assert declined.exit_code == 0, declined.output
    assert "declined to answer" in requests[1]["messages"][-1]["content"]
    ended, requests = _chat_with_stdin("1\n")
    assert ended.exit_code == 0, ended.output
    assert "cancelled" in requests[1]["messages"][-1]["content"]


def test_chat_offers_the_configured_builtins_that_need_no_sandbox_and_compresses(
    env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    config = tmp_path / "chat.json"
    enabled = ["todo_write", "todo_read", "execute_shell_command", "compress_history"]
    config.write_text(json.dumps({"mcpServers": {}, "builtinTools": {"enabled": enabled}}))
    todo = {"items": [{"id": "a", "content": "a task with a long description " * 8}]}
    script = [
        tool_call("todo_write", todo, id="c1"),
        tool_call("todo_read", {}, id="c2"),
        reply("SUMMARY"),
        reply("done"),
    ]
    with _serve(script) as model:
        result = CliRunner().invoke(
            app,
            [
                "chat",
                "--config",
                str(config),
                "--prompt",
                "plan",
                "--json",
                "--max-history-tokens",
                "60",
                "--base-url",
                model.base_url,
                "--model",
                "m",
            ],
            input="",
            catch_exceptions=False,
        )
        requests = list(model.requests)
    assert result.exit_code == 0, result.output
    offered = {t["function"]["name"] for t in requests[0]["tools"]}
    assert {"todo_write", "todo_read", "compress_history", "questionnaire"} <= offered
    assert "execute_shell_command" not in offered
    assert "execute_shell_command need a sandbox" in result.stderr
    types = [json.loads(line)["type"] for line in result.stdout.splitlines()]
    assert "history.compress" in types
    assert "history.compressed" in types
    assert "You compress a conversation" in requests[2]["messages"][0]["content"]
    assert requests[3]["messages"][0] == {"role": "user", "content": "plan"}  # kept verbatim
    assert requests[3]["messages"][1]["content"].startswith("[Summary of the earlier")
