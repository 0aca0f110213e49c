"""The real-model tier: ``SAgent`` and ``sagents chat --prompt`` through a full tool round trip
against a real model server (docs/agent.md, "The real-model tier").

Opt-in: every test here is skipped unless ``SAGENTS_REAL_MODEL_URL`` names an OpenAI-compatible
endpoint (``scripts/real-model.sh``, run by ``scripts/test.sh --real-model``, builds or reuses
llama-cpp-python's server with Gemma 3 270M and sets it). CI's default run does not set it.

The server is llama-cpp-python's ``chatml-function-calling``: it ignores ``tools`` unless a
``tool_choice`` is sent, so the run's ``tool_choice`` names the tool (sent until the model has
called it, then left unset, so the next answer is text); what is checked is that the real
server accepts what sagents sends back after a tool call (the request that failed with HTTP 500
before assistant messages with tool calls carried ``"content": ""``) and that the loop reads
its real answers, streamed and whole.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.agent import ModelSettings, OpenAIChatModel, RunState, SAgent
from sagents.store import SqliteAgentStore
from sagents.tool import SessionContext, ToolManager, tool
from tests.agent.helpers import assert_settled_once, collect, done_of, tool_messages

URL = os.environ.get("SAGENTS_REAL_MODEL_URL", "")
MODEL = os.environ.get("SAGENTS_REAL_MODEL", "gemma3-270m")
CHAT_TIMEOUT_S = 600.0  # a CPU-only model on a loaded machine: generous, never tight

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not URL,
        reason=(
            "no real model server: set SAGENTS_REAL_MODEL_URL to an OpenAI-compatible /v1 "
            "endpoint, or run scripts/test.sh --real-model (builds llama-cpp-python's server "
            "with Gemma 3 270M)"
        ),
    ),
]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_sagent_makes_a_tool_round_trip_with_the_real_model(stream: bool) -> None:
    seen: list[str] = []

    @tool(permission="read_only")
    async def get_weather(city: str) -> str:
        """The current weather of a city."""
        seen.append(city)
        return f"It is sunny and 21 degrees in {city}."

    manager = ToolManager()
    manager.register_tool(get_weather)
    model = OpenAIChatModel(MODEL, base_url=URL, stream=stream, timeout=CHAT_TIMEOUT_S)
    agent = SAgent(
        model=model,
        model_settings=ModelSettings(tool_choice="get_weather"),  # forced once, then unset
        system_prompt="You answer questions about the weather with the get_weather tool.",
        run_script=False,
        max_turns=3,
    )
    try:
        events = await collect(
            agent,
            [{"role": "user", "content": "What is the weather in Paris?"}],
            tool_manager=manager,
            session_context=SessionContext(permission_mode="auto"),
            within_s=CHAT_TIMEOUT_S,  # two calls of a CPU-only model, not a scripted one
        )
    finally:
        await model.aclose()
    done = done_of(events)
    assert done.reason == "stop", done.error
    assert_settled_once(done.messages)
    assert len(seen) == 1  # the real model's call ran once, with a city
    (result,) = tool_messages(done.messages)
    assert "sunny" in result["content"]
    assert done.turns == 2  # the server accepted the history with the call and its result
    assert done.messages[-1]["role"] == "assistant"


async def test_a_named_write_call_paused_and_approved_is_answered_by_the_real_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the named tool was called before the pause: the resumed request leaves tool_choice unset
    # (the RunState keeps that), so this server answers with text instead of the call again
    monkeypatch.setenv("SAGENTS_STATE_KEY", "r" * 40)
    saved: list[str] = []

    @tool(permission="write")
    async def save(path: str, text: str = "") -> str:
        """Save a text in a file."""
        saved.append(path)
        return f"saved {path}"

    manager = ToolManager()
    manager.register_tool(save)
    model = OpenAIChatModel(MODEL, base_url=URL, stream=False, timeout=CHAT_TIMEOUT_S)
    store = SqliteAgentStore(path=tmp_path / "agents.sqlite3")
    context = SessionContext(session_id="real-1", permission_mode="ask")

    def agent() -> SAgent:
        return SAgent(
            model=model,
            model_settings=ModelSettings(tool_choice="save"),
            run_script=False,
            max_turns=3,
            store=store,
        )

    try:
        with anyio.fail_after(CHAT_TIMEOUT_S):
            paused = await agent().run(
                [{"role": "user", "content": "Save the text 'hello' in the file notes.txt."}],
                tool_manager=manager,
                session_context=context,
                approvals="defer",
            )
            assert paused.state is not None, paused.error
            (item,) = paused.interruptions
            state = RunState.from_json(paused.state.to_json())
            state.approve(item.id)
            done = await agent().run(state=state, tool_manager=manager, session_context=context)
    finally:
        await model.aclose()
    assert done.reason == "stop", done.error
    assert len(saved) == 1
    assert done.turns == 2
    assert_settled_once(done.messages)
    assert done.messages[-1]["role"] == "assistant"


def test_sagents_chat_prompt_makes_a_tool_round_trip_with_the_real_model(tmp_path: Path) -> None:
    # examples/fleet's configuration, with a command that starts from any directory
    config = tmp_path / "mcp_servers.json"
    fleet = {"command": sys.executable, "args": ["-m", "sagents.demo.fleet_server"]}
    config.write_text(json.dumps({"mcpServers": {"fleet": fleet}}), encoding="utf-8")
    command = [
        str(Path(sys.executable).with_name("sagents")),  # the installed command
        "chat",
        "--config",
        str(config),
        "--prompt",
        "What is the status of device SN0001?",
        "--tool-choice",
        "fleet__get_device_status",
        "--no-stream",
        "--max-turns",
        "2",
        "--mode",
        "auto",
        "--json",
        "--base-url",
        URL,
        "--model",
        MODEL,
    ]
    env = {**os.environ, "SAGENTS_CONFIG": ""}
    finished = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=CHAT_TIMEOUT_S,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    events: list[dict[str, Any]] = [json.loads(line) for line in finished.stdout.splitlines()]
    assert events, finished.stderr
    done = events[-1]
    assert done["type"] == "done", finished.stderr
    # the tool is named until it is called, then not: the second answer is text
    assert done["reason"] == "stop", done["error"]
    assert done["turns"] == 2  # the second request, with the call and its result, was answered
    results = [m for m in done["messages"] if m["role"] == "tool"]
    assert results
    calls = [c for m in done["messages"] for c in m.get("tool_calls") or []]
    assert calls[0]["function"]["name"] == "fleet__get_device_status"
