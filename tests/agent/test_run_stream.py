"""SAgent.run_stream against the scripted model server, driven by the real openai client."""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from sagents.agent import (
    DoneEvent,
    MessageDeltaEvent,
    MessageEvent,
    SAgent,
    UsageEvent,
    current_agent_session,
)
from sagents.agent._run import EVENT_BUFFER
from sagents.core.events import ApprovalRequestEvent, ApprovalResultEvent, ToolProgressEvent
from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, reply, tool_call
from sagents.tool import (
    ApprovalAnswer,
    ApprovalRequest,
    SessionContext,
    ToolManager,
    ToolProxy,
    emit_tool_progress,
    tool,
)
from tests.agent.helpers import (
    RUN_TIMEOUT_S,
    WatchedModel,
    assert_settled_once,
    collect,
    done_of,
    tool_messages,
)

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "hello"}]


@tool(permission="read_only")
async def get_weather(city: str) -> dict[str, Any]:
    """The weather of a city."""
    return {"city": city, "temp_c": 23}


@tool(permission="read_only")
async def count(n: int) -> str:
    """Count to n, showing progress."""
    for i in range(n):
        await emit_tool_progress(f"step {i}\n")
    return f"counted {n}"


@tool(permission="write")
async def save(path: str) -> str:
    """Save a file."""
    return f"saved {path}"


def _manager() -> ToolManager:
    manager = ToolManager()
    for fn in (get_weather, count, save):
        manager.register_tool(fn)
    return manager


class Approvals:
    def __init__(self, answer: ApprovalAnswer) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.requests.append(request)
        return self.answer


@pytest.mark.parametrize("stream", [True, False])
async def test_a_text_answer_streams_deltas_and_ends_with_stop(stream: bool) -> None:
    async with ScriptedModel([reply("Hello there, how can I help?")]) as model:
        agent = SAgent(model=model.chat_model(stream=stream), system_prompt="Be brief.")
        events = await collect(agent, USER, tool_manager=_manager())
    deltas = "".join(e.delta for e in events if isinstance(e, MessageDeltaEvent))
    assert deltas == "Hello there, how can I help?"
    done = done_of(events)
    assert done.reason == "stop"
    assert done.messages[0] == USER[0]
    assert done.messages[-1] == {"role": "assistant", "content": "Hello there, how can I help?"}
    assert next(e for e in events if isinstance(e, UsageEvent)).prompt_tokens == 10
    request = model.requests[0]
    assert request["messages"][0] == {"role": "system", "content": "Be brief."}
    assert bool(request.get("stream")) is stream
    json.dumps([e.to_dict() for e in events])  # every event is NDJSON-ready


@pytest.mark.parametrize("stream", [True, False])
async def test_one_tool_call_runs_and_its_result_reaches_the_model(stream: bool) -> None:
    script = [tool_call("get_weather", {"city": "Paris"}, id="call_1"), reply("Sunny, 23.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model(stream=stream))
        events = await collect(agent, USER, tool_manager=_manager())
    done = done_of(events)
    assert done.reason == "stop"
    assert_settled_once(done.messages)
    assistant = done.messages[1]
    assert assistant["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    result = done.messages[2]
    assert result["tool_call_id"] == "call_1"
    assert json.loads(result["content"]) == {"city": "Paris", "temp_c": 23}
    assert model.requests[1]["messages"][-1] == result
    names = [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert names == ["count", "get_weather", "save"]
    messages = [e.message for e in events if isinstance(e, MessageEvent)]
    assert list(done.messages[1:]) == messages


async def test_parallel_calls_run_concurrently_and_results_keep_call_order() -> None:
    started: list[str] = []
    both = anyio.Event()

    @tool(permission="read_only")
    async def slow(tag: str) -> str:
        """Wait until both calls have started."""
        started.append(tag)
        if len(started) == 2:
            both.set()
        await both.wait()
        return tag

    manager = ToolManager()
    manager.register_tool(slow)
    calls = tuple(
        ScriptedToolCall(name="slow", arguments={"tag": tag}, id=f"c{tag}") for tag in "ab"
    )
    async with ScriptedModel([ScriptedReply(tool_calls=calls), reply("done")]) as model:
        agent = SAgent(model=model.chat_model(), max_parallel_tools=2)
        done = done_of(await collect(agent, USER, tool_manager=manager))
    results = tool_messages(done.messages)
    assert [m["tool_call_id"] for m in results] == ["ca", "cb"]
    assert [m["content"] for m in results] == ["a", "b"]


async def test_tool_progress_carries_the_call_id_and_never_reaches_the_model() -> None:
    script = [tool_call("count", {"n": 3}, id="call_p"), reply("ok")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        events = await collect(
            agent, USER, tool_manager=_manager(), session_context=SessionContext(session_id="p1")
        )
    progress = [e for e in events if isinstance(e, ToolProgressEvent)]
    assert progress
    assert {e.tool_call_id for e in progress} == {"call_p"}
    assert "step 0" in "".join(e.text for e in progress)
    result_index = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, MessageEvent) and e.message["role"] == "tool"
    )
    assert all(events.index(e) < result_index for e in progress if e.text)
    assert "step" not in json.dumps(model.requests[1]["messages"])


async def test_a_slow_consumer_gets_every_progress_event_in_order_before_the_result() -> None:
    first_seen, finished = anyio.Event(), anyio.Event()

    @tool(permission="read_only")
    async def steps() -> str:
        """Report five steps; the last four while the consumer is busy."""
        await emit_tool_progress("step 1\n")
        await first_seen.wait()  # returns only if step 1 went out while this call runs
        for n in range(2, 6):
            await emit_tool_progress(f"step {n}\n")
        finished.set()
        return "done"

    manager = ToolManager()
    manager.register_tool(steps)
    events = []
    async with ScriptedModel([tool_call("steps", {}, id="call_s"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model())
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(agent.run_stream(USER, tool_manager=manager)) as stream:
                async for event in stream:
                    events.append(event)
                    if isinstance(event, ToolProgressEvent) and not first_seen.is_set():
                        first_seen.set()
                        await finished.wait()  # busy while the tool reports and ends
    done = done_of(events)
    assert done.reason == "stop"
    progress = [e for e in events if isinstance(e, ToolProgressEvent)]
    assert "".join(e.text for e in progress) == "".join(f"step {n}\n" for n in range(1, 6))
    result = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, MessageEvent) and e.message["role"] == "tool"
    )
    assert all(events.index(e) < result for e in progress)


async def test_a_batch_waits_for_a_slow_consumer_past_the_event_buffer_and_loses_nothing() -> None:
    count = EVENT_BUFFER  # two approval events a call: the buffer fills half-way through
    calls = tuple(
        ScriptedToolCall(name="save", arguments={"path": f"{n}.txt"}, id=f"c{n}")
        for n in range(count)
    )
    approvals = Approvals("allow_once")
    asked_while_busy = None
    events = []
    async with ScriptedModel([ScriptedReply(tool_calls=calls), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(), max_tool_calls_per_answer=count)
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(
                agent.run_stream(
                    USER,
                    tool_manager=_manager(),
                    session_context=SessionContext(session_id="b1", permission_mode="ask"),
                    approver=approvals,
                )
            ) as stream:
                async for event in stream:
                    events.append(event)
                    if isinstance(event, ApprovalRequestEvent) and asked_while_busy is None:
                        # busy: the batch runs on until the outbox is full, then waits; each
                        # checkpoint lets every ready task step once (anyio's
                        # wait_all_tasks_blocked polls every 0.1 s and, under load, keeps
                        # finding the model server's 0.1 s tick woken with it: never returns)
                        for _ in range(count * 10):
                            await anyio.lowlevel.checkpoint()
                        asked_while_busy = len(approvals.requests)
    assert asked_while_busy is not None
    assert 1 < asked_while_busy < count  # the batch ran on, then waited for room
    done = done_of(events)
    assert done.reason == "stop"
    assert_settled_once(done.messages)
    asked = [e.tool_call_id for e in events if isinstance(e, ApprovalRequestEvent)]
    answered = [e for e in events if isinstance(e, ApprovalResultEvent)]
    results = [
        e.message for e in events if isinstance(e, MessageEvent) and e.message["role"] == "tool"
    ]
    ids = [f"c{n}" for n in range(count)]
    assert sorted(str(i) for i in asked) == sorted(ids)  # each call asked about once
    assert len(answered) == count
    assert all(e.approved for e in answered)
    assert [m["tool_call_id"] for m in results] == ids
    assert all(m["content"].startswith("saved") for m in results)


@pytest.mark.parametrize("stream", [True, False])
async def test_a_text_turn_runs_in_the_consumers_task_and_leaves_it_no_run_state(
    stream: bool,
) -> None:
    consumer = anyio.get_current_task().id
    async with ScriptedModel([reply("Hello there, how can I help?")]) as model:
        watched = WatchedModel(model.chat_model(stream=stream))
        agent = SAgent(model=watched)
        events = []
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(agent.run_stream(USER, tool_manager=_manager())) as run:
                async for event in run:
                    events.append(event)
                    # between events the consumer runs outside the run's context
                    assert current_agent_session() is None
    assert done_of(events).reason == "stop"
    assert watched.tasks
    assert set(watched.tasks) == {consumer}


@pytest.mark.parametrize("stream", [True, False])
async def test_a_denied_call_settles_only_that_call_and_the_batch_runs(stream: bool) -> None:
    calls = (
        ScriptedToolCall(name="save", arguments={"path": "a.txt"}, id="c_save"),
        ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"}, id="c_weather"),
    )
    approvals = Approvals("deny")
    async with ScriptedModel([ScriptedReply(tool_calls=calls), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(stream=stream))
        events = await collect(
            agent,
            USER,
            tool_manager=_manager(),
            session_context=SessionContext(session_id="d1", permission_mode="ask"),
            approver=approvals,
        )
    done = done_of(events)
    assert_settled_once(done.messages)
    denied, weather = tool_messages(done.messages)
    assert "denied by the user" in denied["content"]
    assert "Oslo" in weather["content"]
    (request,) = approvals.requests
    assert request.tools == ("save",)
    assert request.tool_call_id == "c_save"
    asked = [e for e in events if isinstance(e, ApprovalRequestEvent)]
    answered = [e for e in events if isinstance(e, ApprovalResultEvent)]
    assert [e.tool_call_id for e in asked] == ["c_save"]
    assert '"a.txt"' in asked[0].message
    assert [e.approved for e in answered] == [False]


async def test_without_an_approver_a_write_in_ask_mode_is_refused_saying_nobody_was_asked() -> None:
    async with ScriptedModel([tool_call("save", {"path": "x"}, id="c1"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(await collect(agent, USER, tool_manager=_manager()))
    (result,) = tool_messages(done.messages)
    assert "no approver" in result["content"]


async def test_auto_mode_runs_writes_and_read_only_mode_does_not_offer_them() -> None:
    async with ScriptedModel([tool_call("save", {"path": "x"}, id="c1"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(
            await collect(
                agent,
                USER,
                tool_manager=_manager(),
                session_context=SessionContext(permission_mode="auto"),
            )
        )
    assert tool_messages(done.messages)[0]["content"] == "saved x"
    async with ScriptedModel([tool_call("save", {"path": "x"}, id="c1"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(
            await collect(
                agent,
                USER,
                tool_manager=_manager(),
                session_context=SessionContext(permission_mode="read_only"),
            )
        )
    offered = [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert offered == ["count", "get_weather"]
    assert "not offered" in tool_messages(done.messages)[0]["content"]


async def test_invalid_json_arguments_are_settled_with_an_invalid_arguments_result() -> None:
    script = [tool_call("get_weather", '{"city": "Par', id="c_bad"), reply("sorry")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(await collect(agent, USER, tool_manager=_manager()))
    assert done.reason == "stop"
    assert_settled_once(done.messages)
    assert "invalid_arguments" in tool_messages(done.messages)[0]["content"]


async def test_an_unknown_tool_is_settled_with_an_unknown_tool_result() -> None:
    async with ScriptedModel([tool_call("launch_rocket", {}, id="c_x"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(await collect(agent, USER, tool_manager=_manager()))
    assert_settled_once(done.messages)
    assert "unknown_tool" in tool_messages(done.messages)[0]["content"]


async def test_a_tool_outside_the_whitelist_is_refused_even_when_the_model_names_it() -> None:
    proxy = ToolProxy([_manager()], available_tools=["get_weather"])
    async with ScriptedModel([tool_call("count", {"n": 1}, id="c1"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(await collect(agent, USER, tool_manager=proxy))
    assert [t["function"]["name"] for t in model.requests[0]["tools"]] == ["get_weather"]
    assert "unknown_tool" in tool_messages(done.messages)[0]["content"]  # hidden, not run


async def test_max_turns_ends_in_a_controlled_state_with_every_call_settled() -> None:
    def always_call(body: dict[str, Any]) -> ScriptedReply:
        return tool_call("get_weather", {"city": "Rome"})

    async with ScriptedModel(always_call) as model:
        agent = SAgent(model=model.chat_model(), max_turns=3)
        done = done_of(await collect(agent, USER, tool_manager=_manager()))
    assert done.reason == "max_turns"
    assert done.turns == 3
    assert len(model.requests) == 3
    assert_settled_once(done.messages)
    assert len(tool_messages(done.messages)) == 3


async def test_a_failing_tool_is_an_error_result_and_the_run_goes_on() -> None:
    @tool(permission="read_only")
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("boom")

    manager = ToolManager()
    manager.register_tool(explode)
    async with ScriptedModel([tool_call("explode", {}, id="c1"), reply("it failed")]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(await collect(agent, USER, tool_manager=manager))
    assert done.reason == "stop"
    assert "boom" in tool_messages(done.messages)[0]["content"]


async def test_a_tool_timeout_is_settled_as_a_timeout_result() -> None:
    @tool(permission="read_only")
    async def hang() -> str:
        """Never returns."""
        await anyio.sleep_forever()
        return ""

    manager = ToolManager()
    manager.register_tool(hang)
    async with ScriptedModel([tool_call("hang", {}, id="c1"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(), tool_timeout=0.05)
        done = done_of(await collect(agent, USER, tool_manager=manager))
    assert "timeout" in tool_messages(done.messages)[0]["content"]


async def test_done_carries_the_session_state_audit_status() -> None:
    async with ScriptedModel([reply("hi")]) as model:
        agent = SAgent(model=model.chat_model())
        context = SessionContext(session_id="state-1")
        done = done_of(await collect(agent, USER, tool_manager=_manager(), session_context=context))
    assert done.audit_status == {"suggested_tools": [], "tools_expanded": False}
    state = agent.session("state-1")
    assert state is not None
    assert state.messages == list(done.messages)
    assert isinstance(done, DoneEvent)


async def test_an_unanswered_call_in_the_input_history_is_settled_before_the_request() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "earlier"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "old_1",
                    "type": "function",
                    "function": {"name": "count", "arguments": "{}"},
                },
                {
                    "id": "old_2",
                    "type": "function",
                    "function": {"name": "count", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "old_1", "content": "done"},
        {"role": "user", "content": "again"},
    ]
    async with ScriptedModel([reply("ok")]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(await collect(agent, history, tool_manager=_manager()))
    sent = model.requests[0]["messages"]
    assert_settled_once(sent)
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["old_1", "old_2"]
    assert "never answered" in sent[3]["content"]
    assert_settled_once(done.messages)
