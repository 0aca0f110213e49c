"""A paused run resumed by another agent through each store: the embedded SQLite store and
PostgreSQL (a real server started by the test setup, tests/postgres_server.py); and the same
state handed over in memory (the ``RunState`` object itself)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from sagents.agent import ModelSettings, RunState, SAgent
from sagents.errors import RunStateError
from sagents.store import GatewayStore, open_store, parse_store_url
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool import SessionContext
from tests.agent.helpers import RUN_TIMEOUT_S, assert_settled_once, paused_on_save, saving_tools

pytestmark = pytest.mark.anyio

CTX = SessionContext(session_id="conv-1")


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[GatewayStore]:
    url = None if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    async with open_store(parse_store_url(url), data_dir=tmp_path) as opened:
        yield opened


async def _paused(agent: SAgent, runs: list[str]) -> RunState:
    """The state of a run of ``agent`` paused on its call of ``save``."""
    state = (await paused_on_save(agent, runs, CTX)).state
    assert state is not None
    return state


async def test_a_run_paused_by_one_agent_is_resumed_once_by_another_through_the_store(
    store: GatewayStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGENTS_STATE_KEY", "s" * 40)
    runs: list[str] = []
    script = [tool_call("save", {"path": "x"}, id="c1"), reply("saved it")]
    async with ScriptedModel(script) as model:
        first = SAgent(model=model.chat_model(), run_script=False, store=store)
        state_id = (await _paused(first, runs)).state_id
        second = SAgent(model=model.chat_model(), run_script=False, store=store)
        third = SAgent(model=model.chat_model(), run_script=False, store=store)  # two workers
        loaded = await second.load_state(state_id)
        assert loaded is not None
        loaded.approve("c1")
        outcomes: list[Any] = []

        async def resume(agent: SAgent, state: RunState) -> None:
            try:
                outcomes.append(
                    (
                        await agent.run(
                            state=state, tool_manager=saving_tools(runs), session_context=CTX
                        )
                    ).reason
                )
            except RunStateError as error:
                outcomes.append(type(error).__name__)

        with anyio.fail_after(RUN_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(resume, second, loaded)
                tg.start_soon(resume, third, RunState.from_json(loaded.to_json()))
        session = await SAgent(model=model.chat_model(), store=store).load_session("conv-1")
    assert sorted(outcomes) == ["RunStateError", "stop"]
    assert runs == ["x"]
    assert session is not None
    assert session.history[-1].text == "saved it"
    assert_settled_once(session.messages)


@pytest.mark.parametrize("handed", ["in_memory", "through_the_store"])
async def test_a_named_tool_choice_called_before_the_pause_is_not_forced_after_the_resume(
    store: GatewayStore, monkeypatch: pytest.MonkeyPatch, handed: str
) -> None:
    # tool_choice names "save": the model called it, the call waited for a person; once
    # resumed, the model may answer (the choice was spent before the pause)
    monkeypatch.setenv("SAGENTS_STATE_KEY", "s" * 40)
    runs: list[str] = []
    script = [tool_call("save", {"path": "x"}, id="c1"), reply("saved it")]
    settings = ModelSettings(tool_choice="save")
    async with ScriptedModel(script) as model:
        first = SAgent(
            model=model.chat_model(), run_script=False, store=store, model_settings=settings
        )
        state = await _paused(first, runs)
        assert state.tool_choice_spent
        second = SAgent(
            model=model.chat_model(), run_script=False, store=store, model_settings=settings
        )
        if handed == "through_the_store":
            loaded = await second.load_state(state.state_id)
            assert loaded is not None
            state = loaded
        state.approve("c1")
        with anyio.fail_after(RUN_TIMEOUT_S):
            done = await second.run(
                state=state, tool_manager=saving_tools(runs), session_context=CTX
            )
        requests = list(model.requests)
    assert (done.reason, done.output) == ("stop", "saved it")
    assert runs == ["x"]
    assert requests[0]["tool_choice"] == {"type": "function", "function": {"name": "save"}}
    assert "tool_choice" not in requests[1]


class Point(BaseModel):
    x: int
    y: int


@pytest.mark.parametrize("handed", ["in_memory", "through_the_store"])
async def test_output_retries_spent_before_the_pause_stay_spent_after_the_resume(
    store: GatewayStore, monkeypatch: pytest.MonkeyPatch, handed: str
) -> None:
    # output_retries=1: the first answer that did not fit went back before the pause; the
    # resumed run's answer that does not fit either ends the run, with no further retry
    monkeypatch.setenv("SAGENTS_STATE_KEY", "s" * 40)
    runs: list[str] = []
    script = [
        reply("somewhere"),
        tool_call("save", {"path": "x"}, id="c1"),
        reply("still somewhere"),
        reply('{"x": 1, "y": 2}'),  # not asked for: the retries were spent
    ]
    options: dict[str, Any] = {"output_type": Point, "output_retries": 1}
    async with ScriptedModel(script) as model:
        first = SAgent(model=model.chat_model(), run_script=False, store=store, **options)
        state = await _paused(first, runs)
        assert state.output_retries == 1
        second = SAgent(model=model.chat_model(), run_script=False, store=store, **options)
        if handed == "through_the_store":
            loaded = await second.load_state(state.state_id)
            assert loaded is not None
            state = loaded
        state.approve("c1")
        with anyio.fail_after(RUN_TIMEOUT_S):
            done = await second.run(
                state=state, tool_manager=saving_tools(runs), session_context=CTX
            )
        requests = list(model.requests)
    assert runs == ["x"]
    assert (done.reason, done.output) == ("error", None)
    assert done.error is not None
    assert done.error["code"] == "output_invalid"
    assert done.error["details"]["answer"] == "still somewhere"
    assert len(requests) == 3
