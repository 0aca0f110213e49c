"""The AG-UI route driven by the reference TypeScript client, ``@ag-ui/client`` from npm (its
``HttpAgent``, run by Node on loopback), against the scripted model: a tool turn with progress
on stdout and stderr, an approval answered, a cancel. The client checks the event sequence
itself (it refuses a stream that breaks the protocol's rules)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.agent import SAgent
from sagents.testing import ScriptedModel, reply, tool_call
from tests.agent.ag_ui_helpers import TOKEN, WAIT_S, route_tools, serve_route
from tests.agent.helpers import assert_settled_once

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / ".peers" / "ag-ui"
SCRIPT = Path(__file__).with_name("ag_ui_client.mjs")
NODE = shutil.which("node")


def _client_ready() -> None:
    if NODE is None or not (PEERS / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.fail("the AG-UI client is missing: run scripts/setup.sh --test (it installs "
                    "@ag-ui/client into .peers/ag-ui)")  # fmt: skip


async def drive(url: str, scenario: str, thread_id: str) -> dict[str, Any]:
    _client_ready()
    assert NODE is not None
    with anyio.fail_after(WAIT_S):
        done = await anyio.run_process(
            [NODE, str(SCRIPT), str(PEERS), url, TOKEN, scenario, thread_id], check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


async def test_the_reference_client_runs_a_tool_turn_with_live_progress(tmp_path: Path) -> None:
    script = [tool_call("build", {"target": "app"}), reply("Built.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        async with serve_route(agent, tmp_path, route_tools()) as url:
            result = await drive(url, "tool", "node-tool")
    (run,) = result["runs"]
    assert run["error"] is None
    events = run["events"]
    assert kinds(events)[0] == "RUN_STARTED"
    assert kinds(events)[-1] == "RUN_FINISHED"
    progress = [
        e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "tool_progress"
    ]
    assert {p["stream"] for p in progress if p["text"]} == {"stdout", "stderr"}
    assert progress[-1]["closed"] is True
    # the client's own view of the conversation, built from the events
    messages = result["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["toolCalls"][0]["function"]["name"] == "build"
    assert "built app" in messages[2]["content"]
    assert messages[3]["content"] == "Built."


async def test_the_reference_client_answers_an_approval(tmp_path: Path) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Deleted it.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        async with serve_route(agent, tmp_path, route_tools()) as url:
            result = await drive(url, "approval", "node-approval")
        history = agent.session("node-approval").messages  # type: ignore[union-attr]
    first, second = result["runs"]
    assert first["error"] is None
    assert second["error"] is None
    request = next(e for e in first["events"] if e["type"] == "CUSTOM")
    assert request["name"] == "sagents.approval.request"
    assert request["value"]["arguments"] == {"path": "a.txt"}
    assert first["events"][-1]["result"] == {"sagents": {"waiting": [request["value"]["id"]]}}
    results = [e for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert len(results) == 1
    assert "deleted a.txt" in results[0]["content"]
    assert result["messages"][-1]["content"] == "Deleted it."
    assert_settled_once(history)


async def test_the_reference_clients_abort_cancels_the_run(tmp_path: Path) -> None:
    script = [tool_call("wait_forever", {"seconds": 3600}), reply("Fresh start.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        async with serve_route(agent, tmp_path, route_tools()) as url:
            result = await drive(url, "cancel", "node-cancel")
        history = agent.session("node-cancel").messages  # type: ignore[union-attr]
    aborted, after = result["runs"]
    assert "RUN_FINISHED" not in kinds(aborted["events"])
    assert after["error"] is None
    assert kinds(after["events"])[-1] == "RUN_FINISHED"
    assert_settled_once(history)
    tool_results = [m for m in history if m["role"] == "tool"]
    assert len(tool_results) == 1
    assert "cancelled" in tool_results[0]["content"]
    # the next request to the model held the settled history and the new message
    sent = model.requests[-1]["messages"]
    assert sent[-1]["content"] == "and now?"
    assert any(m["role"] == "tool" and "cancelled" in m["content"] for m in sent)
