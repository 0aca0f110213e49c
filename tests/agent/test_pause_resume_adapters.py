"""Pause and resume on every model adapter (docs/agent.md, "Pausing and resuming"): a run
paused on a write call and a questionnaire, its state through JSON, resumed by another agent;
each call settled once and the results sent back in the adapter's own wire format."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from sagents.agent import RunState, SAgent
from sagents.store import SqliteAgentStore
from sagents.testing import ScriptedModel, reply
from tests.agent.helpers import assert_settled_once, tool_messages
from tests.agent.test_pause_resume import CTX, USER, Tools, _agent, _batch, _run

pytestmark = pytest.mark.anyio

APIS = ["chat", "responses", "anthropic", "gemini"]


@pytest.fixture(autouse=True)
def _state_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGENTS_STATE_KEY", "k" * 40)


@pytest.fixture
def store(tmp_path: Any) -> SqliteAgentStore:
    return SqliteAgentStore(path=tmp_path / "agents.sqlite3")


@pytest.mark.parametrize("api", APIS)
async def test_a_paused_write_call_runs_once_after_the_resume_on_each_adapter(
    api: str, store: SqliteAgentStore
) -> None:
    tools = Tools()
    script = [
        _batch(("lookup", {"key": "a"}, "c1"), ("save", {"path": "x"}, "c2")),
        reply("all done"),
    ]
    async with ScriptedModel(script, api=api) as model:  # type: ignore[arg-type]
        paused = await _run(
            _agent(model, store),
            USER,
            tool_manager=tools.manager(),
            session_context=CTX,
            approvals="defer",
        )
        assert paused.state is not None
        (item,) = paused.interruptions
        assert (item.kind, item.tool_name, dict(item.arguments)) == (
            "approval",
            "save",
            {"path": "x"},
        )
        assert tools.runs == [("lookup", {"key": "a"})]
        state = RunState.from_json(paused.state.to_json())
        state.approve(item.id)
        later = Tools()
        done = await _run(
            _agent(model, store), state=state, tool_manager=later.manager(), session_context=CTX
        )
        requests = list(model.requests)
    assert (done.reason, done.output) == ("stop", "all done")
    assert later.runs == [("save", {"path": "x"})]
    assert_settled_once(done.messages)
    assert sorted(m["content"] for m in tool_messages(done.messages)) == [
        "saved x",
        "value of a",
    ]
    assert len(requests) == 2
    sent = json.dumps(requests[1])  # both results went back, in this API's own form
    assert "saved x" in sent
    assert "value of a" in sent


@pytest.mark.parametrize("api", APIS)
async def test_a_questionnaire_pauses_and_its_answer_reaches_the_model_on_each_adapter(
    api: str, store: SqliteAgentStore
) -> None:
    questions = {
        "title": "Trip",
        "questions": [
            {"id": "city", "kind": "single_choice", "prompt": "Where?", "options": ["A", "B"]}
        ],
    }
    tools = Tools()
    script = [_batch(("questionnaire", questions, "q1")), reply("booked")]
    async with ScriptedModel(script, api=api) as model:  # type: ignore[arg-type]
        manager = tools.manager(questionnaire=True)
        paused = await _run(
            _agent(model, store), USER, tool_manager=manager, session_context=CTX,
            approvals="defer",
        )  # fmt: skip
        assert paused.state is not None
        (item,) = paused.interruptions
        assert item.kind == "questionnaire"
        state = RunState.from_json(paused.state.to_json())
        state.answer(item.id, {"city": "B"})
        done = await _run(
            _agent(model, store), state=state, tool_manager=manager, session_context=CTX
        )
        requests = list(model.requests)
    assert (done.reason, done.output) == ("stop", "booked")
    (answered,) = tool_messages(done.messages)
    assert "city (Where?): B" in answered["content"]
    assert "city (Where?): B" in json.dumps(requests[1])


class Point(BaseModel):
    x: int
    y: int


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("api", APIS)
async def test_structured_output_with_a_deferred_write_call_resumes_into_the_type(
    api: str, stream: bool, store: SqliteAgentStore
) -> None:
    tools = Tools()
    script = [
        reply("nowhere"),  # not a Point: goes back once
        _batch(("lookup", {"key": "a"}, "c1"), ("save", {"path": "x"}, "c2")),
        reply('{"x": 1, "y": 2}'),
    ]
    options: dict[str, Any] = {"output_type": Point, "output_retries": 2}
    async with ScriptedModel(script, api=api) as model:  # type: ignore[arg-type]

        def agent() -> SAgent:
            return SAgent(
                model=model.chat_model(stream=stream), run_script=False, store=store, **options
            )

        paused = await _run(
            agent(), USER, tool_manager=tools.manager(), session_context=CTX, approvals="defer"
        )
        assert paused.state is not None
        (item,) = paused.interruptions
        assert item.tool_name == "save"
        state = RunState.from_json(paused.state.to_json())
        assert state.output_retries == 1
        state.approve(item.id)
        later = Tools()
        done = await _run(agent(), state=state, tool_manager=later.manager(), session_context=CTX)
        requests = list(model.requests)
    assert done.reason == "stop", done
    assert done.output == Point(x=1, y=2)
    assert tools.runs == [("lookup", {"key": "a"})]
    assert later.runs == [("save", {"path": "x"})]
    assert_settled_once(done.messages)
    assert sorted(m["content"] for m in tool_messages(done.messages)) == ["saved x", "value of a"]
    assert len(requests) == 3
    sent = json.dumps(requests[2])
    assert "saved x" in sent
    assert "value of a" in sent
    assert "nowhere" in sent  # the retried answer stays in the history sent back
