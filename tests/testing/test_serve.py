"""``python -m sagents.testing.serve``: a scripted model server without code."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from sagents.agent import SAgent, model_from_string
from sagents.testing.serve import script_from_json
from sagents.tool import SessionContext, ToolManager, tool
from tests.agent.helpers import collect, done_of, tool_messages

SCRIPT = {
    "replies": [
        {"error": {"status": 429, "message": "slow down", "retry_after": 0}},
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "c1"}]},
        {"content": "Sunny in Paris.", "delay": 0.01},
    ]
}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("api", "provider"),
    [
        ("chat", "openai"),
        ("responses", "openai-responses"),
        ("anthropic", "anthropic"),
        ("gemini", "gemini"),
    ],
)
async def test_the_server_prints_its_url_and_plays_the_script(
    tmp_path: Path, api: str, provider: str
) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT), encoding="utf-8")

    @tool(permission="read_only")
    async def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    manager = ToolManager()
    manager.register_tool(get_weather)
    command = [sys.executable, "-m", "sagents.testing.serve", "--api", api, str(path)]
    async with await anyio.open_process(command) as process:
        try:
            assert process.stdout is not None
            with anyio.fail_after(60):
                line = b""
                async for piece in process.stdout:
                    line += piece
                    if b"\n" in line:
                        break
            base_url = line.decode().strip()
            assert base_url.startswith("http://127.0.0.1:")
            assert base_url.endswith("/v1") == (api in ("chat", "responses"))
            model = model_from_string(f"{provider}:m", base_url=base_url, api_key="k")
            agent = SAgent(model=model, run_script=False)
            events = await collect(
                agent,
                [{"role": "user", "content": "weather?"}],
                tool_manager=manager,
                session_context=SessionContext(permission_mode="auto"),
            )
            await model.aclose()
        finally:
            process.terminate()
    done = done_of(events)
    assert done.reason == "stop"
    assert tool_messages(done.messages)[0]["content"] == "sunny in Paris"
    assert done.messages[-1]["content"] == "Sunny in Paris."


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ({"replies": "hi"}, '{"replies": [...]}'),
        ({"replies": [3]}, "reply 1 is a string or an object"),
        ({"replies": ["ok", {"tool_calls": [{"arguments": {}}]}]}, "reply 2"),
        ({"replies": [{"wire": {"end": "explode"}}]}, "reply 1: end is close"),
        # each of these was served as something else (an empty answer, a number as the text,
        # a broken HTTP status) or said only a Python error's words
        ({"replies": [{"error": {"status": 200}}]}, "reply 1: an error's status is 400-599"),
        ({"replies": [{"error": {"status": 99}}]}, "reply 1: an error's status is 400-599"),
        ({"replies": [{"content": 5}]}, "reply 1: content is a string"),
        ({"replies": [{"delay": "nan"}]}, "reply 1: delay is a number of seconds"),
        ({"replies": [{"delay": -1}]}, "reply 1: delay is a number of seconds"),
        ({"replies": [{"tool_calls": [{"arguments": {}}]}]}, "reply 1: a tool call needs a name"),
        ({"replies": [{"tool_calls": {"name": "x"}}]}, "reply 1: tool_calls is a list"),
        # a misspelt or misplaced key was ignored: the reply served as an empty answer, a call
        # without its arguments, an error without its message
        ({"replies": [{"text": "hi"}]}, "reply 1: unknown key 'text'"),
        ({"replies": ["ok", {"content": "x", "error": {}}]}, "reply 2: unknown key 'content'"),
        ({"replies": [{"tool_calls": [{"name": "f", "args": {}}]}]}, "unknown key 'args'"),
        ({"replies": [{"error": {"status": 429, "mesage": "x"}}]}, "unknown key 'mesage'"),
        ({"replies": [{"wire": {"status": 200}, "delay": 1}]}, "reply 1: unknown key 'delay'"),
        # served as something else, or failing only when the request came
        ({"replies": [{"tool_calls": [{"name": "f", "id": 5}]}]}, "a tool call's id is a string"),
        ({"replies": [{"prompt_tokens": -3}]}, "reply 1: prompt_tokens is a whole number"),
        ({"replies": [{"completion_tokens": 1.5}]}, "completion_tokens is a whole number"),
        ({"replies": [{"prompt_tokens": True}]}, "reply 1: prompt_tokens is a whole number"),
        ({"replies": [{"error": {"status": "429"}}]}, "an error's status is 400-599"),
        ({"replies": [{"error": {"code": 5}}]}, "an error's code is a string"),
        ({"replies": [{"wire": {"body": 5}}]}, "reply 1: body is a list"),
        ({"replies": [{"wire": {"events": {"type": "ping"}}}]}, "reply 1: events is a list"),
        ({"replies": [{"wire": {"status": "ok"}}]}, "reply 1: status is an HTTP status"),
        ({"replies": [{"wire": {"bodyy": []}}]}, "reply 1: unknown key 'bodyy'"),
    ],
    ids=[
        "not-a-list",
        "number",
        "call-without-name",
        "bad-wire",
        "error-200",
        "error-99",
        "content-number",
        "delay-nan",
        "delay-negative",
        "call-name-said",
        "calls-object",
        "text-key",
        "content-beside-error",
        "call-args-key",
        "error-message-key",
        "delay-beside-wire",
        "call-id-number",
        "tokens-negative",
        "tokens-fraction",
        "tokens-bool",
        "status-string",
        "code-number",
        "wire-body-number",
        "wire-events-object",
        "wire-status-string",
        "wire-unknown-key",
    ],
)
def test_a_bad_script_is_a_clear_error(script: object, said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)):
        script_from_json(script)


def test_a_bad_script_file_or_an_unknown_api_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text("{not json", encoding="utf-8")
    command = [sys.executable, "-m", "sagents.testing.serve", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "cannot be used" in result.stderr
    assert result.stdout == ""
    path.write_text(json.dumps(SCRIPT), encoding="utf-8")
    command = [sys.executable, "-m", "sagents.testing.serve", "--api", "bedrock", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "invalid choice: 'bedrock'" in result.stderr


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_exits_2_naming_it(tmp_path: Path, port: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT), encoding="utf-8")
    command = [sys.executable, "-m", "sagents.testing.serve", "--port", port, str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "port" in result.stderr
    assert "0-65535" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
