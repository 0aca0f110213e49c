"""SAgent.cancel() combined with the loop's other features (docs/agent.md, "Cancellation"):
a structured-output retry, a batch whose write call is deferred, the resume of a paused run, a
thinking turn going on on another provider; and reasoning sent back in its own field after a
pause ("Pausing and resuming")."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from sagents.agent import ChatModel, Message, ModelEvent, ModelRequest, RunState, SAgent, TextPart
from sagents.errors import RunStateError
from sagents.store import SqliteAgentStore
from sagents.testing import ScriptedModel, ScriptedReply, WireReply, load_wire, reply
from sagents.tool import SessionContext, ToolManager, tool
from tests.agent.helpers import RUN_TIMEOUT_S, assert_settled_once, collect, done_of
from tests.agent.test_anthropic import anthropic_model
from tests.agent.test_anthropic import wire as anthropic_wire
from tests.agent.test_pause_resume import CTX, USER, Tools, _batch, _run
from tests.agent.test_provider_switch import THINKING, WIRE, anthropic_server, get_weather

AUTO = SessionContext(permission_mode="auto")

pytestmark = pytest.mark.anyio

APIS = ["chat", "responses", "anthropic", "gemini"]


@pytest.fixture(autouse=True)
def _state_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGENTS_STATE_KEY", "k" * 40)


class Point(BaseModel):
    x: int
    y: int


class CancelAtCall:
    """A model that cancels its agent's runs as its ``nth`` call starts."""

    def __init__(self, inner: ChatModel, nth: int) -> None:
        self.inner = inner
        self.model = inner.model
        self.nth = nth
        self.calls = 0
        self.agent: SAgent | None = None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        if self.calls == self.nth and self.agent is not None:
            self.agent.cancel()
        async for item in self.inner.stream(request):
            yield item

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_a_cancel_during_a_structured_output_retry_ends_cancelled_without_output(
    api: str,
) -> None:
    async with ScriptedModel([reply("nowhere"), reply('{"x": 1, "y": 2}')], api=api) as server:  # type: ignore[arg-type]
        model = CancelAtCall(server.chat_model(), nth=2)
        agent = SAgent(model=model, run_script=False, output_type=Point, output_retries=2)
        model.agent = agent
        events = []
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(agent.run_stream(USER)) as stream:
                async for event in stream:
                    events.append(event)
    done = done_of(events)
    assert done.reason == "cancelled"
    assert done.output is None
    assert model.calls == 2


async def test_a_cancel_in_a_batch_with_a_deferred_write_call_leaves_no_paused_run(
    tmp_path: Any,
) -> None:
    store = SqliteAgentStore(path=tmp_path / "agents.sqlite3")
    ran: list[str] = []
    agents: list[SAgent] = []

    @tool(permission="read_only")
    async def lookup(key: str) -> str:
        """Look a key up."""
        ran.append("lookup")
        agents[0].cancel()
        await anyio.sleep_forever()
        return key

    @tool(permission="write")
    def save(path: str) -> str:
        """Save a file."""
        ran.append("save")
        return path

    manager = ToolManager()
    for fn in (lookup, save):
        manager.register_tool(fn)
    script = [_batch(("lookup", {"key": "a"}, "c1"), ("save", {"path": "x"}, "c2")), reply("ok")]
    async with ScriptedModel(script) as server:
        agents.append(SAgent(model=server.chat_model(), run_script=False, store=store))
        done = await _run(
            agents[0], USER, tool_manager=manager, session_context=CTX, approvals="defer"
        )
    assert done.reason == "cancelled"
    assert done.state is None
    assert ran == ["lookup"]
    assert_settled_once(done.messages)


class SlowToClaim:
    """A store whose claim of a paused run waits until ``go``: the resume is being set up."""

    def __init__(self, inner: SqliteAgentStore) -> None:
        self._inner = inner
        self.claiming = anyio.Event()
        self.go = anyio.Event()

    async def claim_state(self, state_id: str) -> bool:
        self.claiming.set()
        await self.go.wait()
        return await self._inner.claim_state(state_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_a_resume_cancelled_while_it_claims_the_paused_run_runs_nothing_and_settles_it(
    tmp_path: Any,
) -> None:
    store = SlowToClaim(SqliteAgentStore(path=tmp_path / "agents.sqlite3"))
    tools = Tools()
    async with ScriptedModel([_batch(("save", {"path": "x"}, "c1")), reply("ok")]) as server:

        def agent() -> SAgent:
            return SAgent(model=server.chat_model(), run_script=False, store=store)

        paused = await _run(
            agent(), USER, tool_manager=tools.manager(), session_context=CTX, approvals="defer"
        )
        assert paused.state is not None
        text = paused.state.to_json()
        state = RunState.from_json(text)
        state.approve("c1")
        resumer = agent()
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with anyio.create_task_group() as tg:

                async def cancel() -> None:
                    await store.claiming.wait()
                    resumer.cancel()
                    store.go.set()

                tg.start_soon(cancel)
                events = await collect(
                    resumer, (), state=state, tool_manager=tools.manager(), session_context=CTX
                )
        requests = len(server.requests)
        again = RunState.from_json(text)
        again.approve("c1")
        with pytest.raises(RunStateError) as refused:
            await _run(agent(), state=again, tool_manager=tools.manager(), session_context=CTX)
    done = done_of(events)
    assert done.reason == "cancelled"
    assert requests == 1  # the resume asked nothing
    assert tools.count("save") == 0  # a cancelled resume runs nothing, even what was approved
    assert_settled_once(done.messages)
    assert refused.value.details["reason"] == "claimed"  # it continued once: cancelled


@pytest.mark.parametrize("then", ["anthropic", "chat", "responses", "gemini"])
async def test_a_thinking_tool_turn_cancelled_after_its_call_goes_on_on_any_provider(
    then: str,
) -> None:
    """Anthropic thinks and calls a tool; the run is cancelled as the next answer is asked for;
    the history, with a new question, goes on on Anthropic with thinking on (the turn keeps its
    signed thinking block) or on another provider."""
    manager = ToolManager()
    manager.register_tool(get_weather)
    async with ScriptedModel(anthropic_wire("thinking_tool_use")) as server:
        inner = anthropic_model(server, thinking=THINKING)
        model = CancelAtCall(inner, nth=2)
        agent = SAgent(model=model, run_script=False)
        model.agent = agent
        try:
            cancelled = done_of(
                await collect(agent, USER, tool_manager=manager, session_context=AUTO)
            )
        finally:
            await inner.aclose()
    assert cancelled.reason == "cancelled"
    assert_settled_once(cancelled.messages)
    history = [*cancelled.history, Message(role="user", parts=(TextPart(text="and Rome?"),))]
    if then == "anthropic":
        async with ScriptedModel(anthropic_server("Sunny too."), api="anthropic") as next_server:
            next_agent = SAgent(model=next_server.chat_model(thinking=THINKING), run_script=False)
            done = done_of(await collect(next_agent, history, tool_manager=manager))
            sent = next_server.requests[0]
    else:
        async with ScriptedModel([reply("Sunny too.")], api=then) as next_server:  # type: ignore[arg-type]
            next_agent = SAgent(model=next_server.chat_model(), run_script=False)
            done = done_of(await collect(next_agent, history, tool_manager=manager))
            sent = next_server.requests[0]
    assert done.reason == "stop", done.error
    assert done.messages[-1]["content"] == "Sunny too."
    text = json.dumps(sent)
    assert "and Rome?" in text
    assert "sunny in Paris" in text
    if then == "anthropic":
        assert sent["messages"][1]["content"][0]["type"] == "thinking"


@tool(name="get_weather", permission="write")
def get_weather_written(city: str) -> str:
    """The weather of a city (a write: held for a person under approvals="defer")."""
    return f"sunny in {city}"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_reasoning_of_a_paused_turn_goes_back_in_its_field_after_the_resume(
    stream: bool, tmp_path: Any
) -> None:
    """A server that sends reasoning as ``reasoning`` and refuses ``reasoning_content``: the
    turn paused on a deferred call, through the RunState's JSON, goes back in ``reasoning``."""
    streamed, whole, refusal = load_wire(WIRE / "cerebras_reasoning_field.json")
    answers: list[ScriptedReply | WireReply] = [streamed if stream else whole, reply("Sunny.")]

    def cerebras(body: dict[str, Any]) -> ScriptedReply | WireReply:
        if any("reasoning_content" in m for m in body["messages"]):
            return refusal
        return answers.pop(0)

    store = SqliteAgentStore(path=tmp_path / "agents.sqlite3")
    manager = ToolManager()
    manager.register_tool(get_weather_written)
    async with ScriptedModel(cerebras) as server:

        def agent() -> SAgent:
            return SAgent(model=server.chat_model(stream=stream), run_script=False, store=store)

        paused = await _run(
            agent(), USER, tool_manager=manager, session_context=CTX, approvals="defer"
        )
        assert paused.state is not None, paused.error
        state = RunState.from_json(paused.state.to_json())
        (item,) = paused.interruptions
        state.approve(item.id)
        done = await _run(agent(), state=state, tool_manager=manager, session_context=CTX)
        sent = server.requests[1]["messages"]
    assert done.reason == "stop", done.error
    (turn,) = [m for m in sent if m.get("tool_calls")]
    assert turn["reasoning"] == "The user wants the weather. Call the tool."
    assert "reasoning_content" not in turn
