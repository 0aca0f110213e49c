"""Attacks on how a batch of tool calls reaches the consumer (the run's outbox, its progress
queues and its bell, sagents.agent._driver.relay)."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import AsyncGenerator
from contextlib import AbstractAsyncContextManager, aclosing
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from mcp import StdioServerParameters

from sagents.agent import AgentEvent, MessageEvent, QuestionnaireRequestEvent, SAgent
from sagents.agent._run import EVENT_BUFFER
from sagents.core.events import ApprovalRequestEvent, ScriptProgressEvent, ToolProgressEvent
from sagents.progress._queue import DEFAULT_MAX_CRITICAL
from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, reply
from sagents.tool import (
    ApprovalAnswer,
    ApprovalRequest,
    SessionContext,
    ToolManager,
    emit_tool_progress,
    tool,
)
from sagents.tool.impl import register_builtin_tools
from tests.agent.helpers import RUN_TIMEOUT_S, assert_settled_once, collect, done_of, speak

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "hello"}]
ECHO = Path(__file__).resolve().parents[1] / "gateway" / "fixtures" / "stdio_echo.py"


def _asking(
    agent: SAgent, manager: ToolManager, session_id: str, approver: Any
) -> AbstractAsyncContextManager[AsyncGenerator[AgentEvent, None]]:
    """The streamed run of USER on ``agent`` in session ``session_id``, in ``ask`` mode, its
    approvals going to ``approver``."""
    return aclosing(
        agent.run_stream(
            USER,
            tool_manager=manager,
            session_context=SessionContext(session_id=session_id, permission_mode="ask"),
            approver=approver,
        )
    )


@tool(permission="read_only")
async def chatty(tag: str, lines: int) -> str:
    """Report lines of progress, then answer."""
    for i in range(lines):
        await emit_tool_progress(f"{tag}:{i}\n")
    return f"done {tag}"


def _batch(count: int, lines: int, name: str = "chatty") -> ScriptedReply:
    return ScriptedReply(
        tool_calls=tuple(
            ScriptedToolCall(name=name, arguments={"tag": f"t{n}", "lines": lines}, id=f"c{n}")
            for n in range(count)
        )
    )


def _manager(*tools: Any) -> ToolManager:
    manager = ToolManager()
    for fn in tools or (chatty,):
        manager.register_tool(fn)
    return manager


def _check_progress(events: list[Any], count: int, lines: int) -> None:
    progress = [e for e in events if isinstance(e, ToolProgressEvent)]
    results = {
        e.message["tool_call_id"]: i
        for i, e in enumerate(events)
        if isinstance(e, MessageEvent) and e.message["role"] == "tool"
    }
    for n in range(count):
        mine = [e for e in progress if e.tool_call_id == f"c{n}"]
        text = "".join(e.text for e in mine)
        assert text == "".join(f"t{n}:{i}\n" for i in range(lines)), n
        assert sum(e.closed for e in mine) == 1
        assert all(events.index(e) < results[f"c{n}"] for e in mine)


@pytest.mark.parametrize("count", [10, 100])
async def test_parallel_calls_each_reporting_lose_nothing_and_keep_order(count: int) -> None:
    lines = 5
    async with ScriptedModel([_batch(count, lines), reply("ok")]) as model:
        agent = SAgent(
            model=model.chat_model(), max_tool_calls_per_answer=count, max_parallel_tools=count
        )
        events = await collect(
            agent, USER, tool_manager=_manager(), session_context=SessionContext(session_id="p")
        )
    done = done_of(events)
    assert done.reason == "stop"
    assert_settled_once(done.messages)
    _check_progress(events, count, lines)


async def test_a_slow_consumer_of_thousands_of_progress_events_loses_no_result() -> None:
    count, lines = 20, 500
    events: list[Any] = []
    async with ScriptedModel([_batch(count, lines), reply("ok")]) as model:
        agent = SAgent(
            model=model.chat_model(), max_tool_calls_per_answer=count, max_parallel_tools=count
        )
        with anyio.fail_after(RUN_TIMEOUT_S * 4):
            async with aclosing(
                agent.run_stream(
                    USER, tool_manager=_manager(), session_context=SessionContext(session_id="s")
                )
            ) as stream:
                async for event in stream:
                    events.append(event)
                    for _ in range(20):
                        await anyio.lowlevel.checkpoint()  # slower than the batch
    done = done_of(events)
    assert done.reason == "stop"
    assert_settled_once(done.messages)
    results = [e for e in events if isinstance(e, MessageEvent) and e.message["role"] == "tool"]
    assert [e.message["tool_call_id"] for e in results] == [f"c{n}" for n in range(count)]
    closed = [e for e in events if isinstance(e, ToolProgressEvent) and e.closed]
    assert sorted(e.tool_call_id for e in closed) == sorted(f"c{n}" for n in range(count))


async def test_a_hanging_call_ends_cancelled_by_sagent_cancel_and_settles_once() -> None:
    entered, left = anyio.Event(), anyio.Event()

    @tool(permission="read_only")
    async def hang(tag: str, lines: int) -> str:
        """Report, then wait forever."""
        await emit_tool_progress("waiting\n")
        entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            left.set()
        return "never"

    async with ScriptedModel([_batch(3, 1, "hang"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(), max_parallel_tools=3)
        events: list[Any] = []
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(agent.run_stream(USER, tool_manager=_manager(hang))) as stream:
                async for event in stream:
                    events.append(event)
                    if isinstance(event, ToolProgressEvent) and not event.closed:
                        await entered.wait()
                        agent.cancel()
    done = done_of(events)
    assert done.reason == "cancelled"
    assert left.is_set()
    assert_settled_once(done.messages)
    assert len([m for m in done.messages if m.get("role") == "tool"]) == 3


async def test_a_consumer_leaving_mid_batch_cancels_the_calls_and_leaves_no_task() -> None:
    left = anyio.Event()

    @tool(permission="read_only")
    async def hang(tag: str, lines: int) -> str:
        """Report, then wait forever."""
        await emit_tool_progress("waiting\n")
        try:
            await anyio.sleep_forever()
        finally:
            left.set()
        return "never"

    before = len(asyncio.all_tasks())
    async with ScriptedModel([_batch(5, 1, "hang"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(), max_parallel_tools=5)
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(agent.run_stream(USER, tool_manager=_manager(hang))) as stream:
                async for event in stream:
                    if isinstance(event, ToolProgressEvent):
                        break
        assert left.is_set()
        assert len(asyncio.all_tasks()) <= before + 1  # the model server's own, at most


class SlowApprover:
    def __init__(self) -> None:
        self.go = anyio.Event()
        self.asked = 0

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked += 1
        await self.go.wait()
        return "allow_once"


@tool(permission="write")
async def write(tag: str, lines: int) -> str:
    """Write, reporting progress."""
    for i in range(lines):
        await emit_tool_progress(f"{tag}:{i}\n")
    return f"wrote {tag}"


async def test_an_approver_that_takes_time_gets_every_call_asked_and_settled() -> None:
    count, lines = 10, 3
    approver = SlowApprover()
    events: list[Any] = []
    async with ScriptedModel([_batch(count, lines, "write"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(), max_parallel_tools=count)
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(
                agent.run_stream(
                    USER,
                    tool_manager=_manager(write),
                    session_context=SessionContext(session_id="a", permission_mode="ask"),
                    approver=approver,
                )
            ) as stream:
                async for event in stream:
                    events.append(event)
                    asked = sum(isinstance(e, ApprovalRequestEvent) for e in events)
                    if asked == count:
                        approver.go.set()
    done = done_of(events)
    assert done.reason == "stop"
    assert_settled_once(done.messages)
    _check_progress(events, count, lines)


async def test_two_runs_at_once_never_see_each_others_events() -> None:
    lines = 20

    def step(body: dict[str, Any]) -> Any:  # by what the request holds: the runs interleave
        if not any(m["role"] == "tool" for m in body["messages"]):
            return _batch(3, lines)
        return reply("ok")

    async with ScriptedModel(step) as model:
        agent = SAgent(model=model.chat_model(), max_parallel_tools=3)
        results: dict[str, list[Any]] = {}

        async def one(session: str) -> None:
            results[session] = await collect(
                agent,
                USER,
                tool_manager=_manager(),
                session_context=SessionContext(session_id=session),
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "r1")
            tg.start_soon(one, "r2")
    for events in results.values():
        done = done_of(events)
        assert done.reason == "stop"
        _check_progress(events, 3, lines)
        progress = [e for e in events if isinstance(e, ToolProgressEvent)]
        assert len({e.tool_call_id for e in progress}) == 3


async def test_progress_of_a_sub_agents_calls_reaches_the_callers_consumer() -> None:
    lines = 30

    def sub_step(body: dict[str, Any]) -> Any:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return _batch(3, lines)
        return reply("sub done")

    async with ScriptedModel(sub_step) as sub_model:
        helper = SAgent(model=sub_model.chat_model(), run_script=False, max_parallel_tools=3)
        manager = _manager()
        manager.register_tool(helper.as_tool("helper", "Helps.", tools=["chatty"]))
        script = [
            ScriptedReply(
                tool_calls=tuple(
                    ScriptedToolCall(name="helper", arguments={"task": "t"}, id=f"h{n}")
                    for n in range(2)
                )
            ),
            reply("ok"),
        ]
        async with ScriptedModel(script) as model:
            agent = SAgent(model=model.chat_model(), run_script=False, max_parallel_tools=2)
            events = await collect(
                agent, USER, tool_manager=manager, session_context=SessionContext(session_id="n")
            )
    done = done_of(events)
    assert done.reason == "stop"
    assert_settled_once(done.messages)
    inner = "".join(
        e.text for e in events if isinstance(e, ToolProgressEvent) and e.tool_call_id == "c1"
    )
    expected = [f"t1:{i}" for i in range(lines)] * 2  # both sub-runs' c1, interleaved
    assert sorted(inner.splitlines()) == sorted(expected)
    assert [m["content"] for m in done.messages if m.get("role") == "tool"] == ["sub done"] * 2


@pytest.mark.parametrize("count", [1, 3])
async def test_a_tool_raising_cancelled_error_by_itself_is_settled_and_the_run_goes_on(
    count: int,
) -> None:
    @tool(permission="read_only")
    async def broken(tag: str, lines: int) -> str:
        """Await a future someone else cancelled (a tool's bug, not a cancellation)."""
        await emit_tool_progress("about to fail\n")
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future
        return "never"

    async with ScriptedModel([_batch(count, 1, "broken"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(), max_parallel_tools=count)
        events = await collect(agent, USER, tool_manager=_manager(broken))
    done = done_of(events)
    assert_settled_once(done.messages)

    assert done.reason == "stop"


async def test_progress_of_a_scripts_calls_reaches_the_consumer(tmp_path: Path) -> None:
    code = (
        "from agent_tools import call\n"
        "for i in range(3):\n"
        "    print('round', i, call('echo__progress', {}))\n"
    )
    arguments = {"code": code, "tools": [], "description": "progress"}
    script = [
        ScriptedReply(
            tool_calls=(
                ScriptedToolCall(name="run_script", arguments=arguments, id="call_s1"),
                ScriptedToolCall(name="run_script", arguments=arguments, id="call_s2"),
            )
        ),
        reply("done"),
    ]
    async with ToolManager() as manager:
        params = StdioServerParameters(command=sys.executable, args=[str(ECHO), "sdk"])
        await manager.register_mcp_server(name="echo", params=params)
        async with ScriptedModel(script) as model:
            agent = SAgent(model=model.chat_model())
            context = SessionContext(session_id="scripted", workspace=str(tmp_path / "ws"))
            events = await collect(agent, USER, tool_manager=manager, session_context=context)
    done = done_of(events)
    assert done.reason == "stop", done.error
    assert_settled_once(done.messages)
    first_result = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, MessageEvent) and e.message["role"] == "tool"
    )
    inner = [e for e in events[:first_result] if isinstance(e, ToolProgressEvent)]
    texts = [e.text for e in inner if not e.closed]
    assert texts == ["progress 1/2: half\n"] * 6  # each script's three calls
    assert len({e.tool_call_id for e in inner}) == 6
    assert sum(e.closed for e in inner) == 6
    finals = [e for e in events if isinstance(e, ScriptProgressEvent) and e.status == "ok"]
    assert sorted(str(e.tool_call_id) for e in finals) == ["call_s1", "call_s2"]


class LateWatch:
    """A write tool and an approver that record what happens once the consumer has left."""

    def __init__(self) -> None:
        self.left = False
        self.asked = 0
        self.late: list[str] = []
        watch = self

        @tool(permission="write")
        async def save(tag: str, lines: int) -> str:
            """Save (the side effect a consumer that left must not cause)."""
            if watch.left:
                watch.late.append(f"ran {tag}")
            return f"saved {tag}"

        self.save = save

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked += 1
        if self.left:
            self.late.append(f"asked {request.tool_call_id}")
        return "allow_once"


def wide(model: ScriptedModel, count: int) -> SAgent:
    """An agent that runs ``count`` calls of one answer at once."""
    return SAgent(
        model=model.chat_model(),
        run_script=False,
        max_tool_calls_per_answer=count,
        max_parallel_tools=count,
    )


@pytest.mark.parametrize("nested", [False, True])
async def test_a_consumer_leaving_while_a_batch_waits_for_room_runs_nothing_more(
    nested: bool,
) -> None:
    """The batch's calls (or, nested, a sub-agent's, asking through the caller's run) fill the
    run's outbox and wait for room; the consumer leaves: nothing more is asked or run."""
    count = 3 * EVENT_BUFFER  # two approval events a call: the outbox fills, twice
    watch = LateWatch()
    manager = _manager(watch.save)
    sub = _batch(count, 0, "save")
    async with ScriptedModel([sub, reply("sub done")]) as sub_model:
        helper = wide(sub_model, count)
        manager.register_tool(helper.as_tool("helper", "Helps.", tools=["save"]))
        call = ScriptedToolCall(name="helper", arguments={"task": "t"}, id="h1")
        first = ScriptedReply(tool_calls=(call,)) if nested else sub
        async with ScriptedModel([first, reply("ok")]) as model:
            agent = wide(model, count)
            with anyio.fail_after(RUN_TIMEOUT_S):
                async with _asking(agent, manager, "w", watch) as stream:
                    async for event in stream:
                        if isinstance(event, ApprovalRequestEvent):
                            # busy while the batch runs on until the outbox is full and it
                            # waits (wait_all_tasks_blocked never returns beside the model's
                            # server)
                            for _ in range(count * 10):
                                await anyio.lowlevel.checkpoint()
                            held = watch.asked
                            watch.left = True
                            break
    assert held < count  # the batch was held back when the consumer left
    assert watch.late == []


class BlockingApprover:
    """Answers nobody: every request waits until the run is cancelled."""

    def __init__(self) -> None:
        self.asked = 0

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked += 1
        await anyio.sleep_forever()
        return "deny"


QUESTIONS = {"questions": [{"id": "city", "kind": "text", "prompt": "Where to?"}]}


@pytest.mark.parametrize("asks", ["approval", "questionnaire"])
async def test_leaving_a_cancelled_batch_whose_results_wait_for_room_is_quick(
    asks: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SAgent.cancel() while every call of a batch waits for a person (its approver, or its
    questionnaire's answer), the consumer not taking events: each call's approval or
    questionnaire result goes out at once (one a call, like its tool result), so the consumer
    that then leaves is not held back by results waiting for room in the full outbox that
    nobody will make (before: each waited out a shielded grace of seconds, made longer than
    the run's time bound here)."""
    for module in ("_run", "_questions"):
        monkeypatch.setattr(
            f"sagents.agent.{module}._RESULT_GRACE_S", RUN_TIMEOUT_S * 3, raising=False
        )
    count = EVENT_BUFFER + 10  # one result a call: the outbox fills
    approver = BlockingApprover()
    watch = LateWatch()
    manager = _manager(watch.save)
    register_builtin_tools(manager, None, names=["questionnaire"])
    batch = ScriptedReply(
        tool_calls=tuple(
            ScriptedToolCall(name="questionnaire", arguments=QUESTIONS, id=f"c{n}")
            for n in range(count)
        )
    )
    asking = (ApprovalRequestEvent, QuestionnaireRequestEvent)
    async with ScriptedModel(
        [_batch(count, 0, "save") if asks == "approval" else batch, reply("ok")]
    ) as model:
        agent = wide(model, count)
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with _asking(agent, manager, "g", approver) as stream:
                async for event in stream:
                    if isinstance(event, asking):
                        for _ in range(count * 10):  # every call is asked
                            await anyio.lowlevel.checkpoint()
                        agent.cancel()
                        for _ in range(count * 10):  # the cancellation reaches the asked calls
                            await anyio.lowlevel.checkpoint()
                        break
            await anyio.lowlevel.checkpoint()  # the time bound shows here, past any shielded wait
    assert approver.asked == (count if asks == "approval" else 0)
    assert watch.late == []


async def test_leaving_once_sagent_cancel_ended_the_batch_leaves_nothing_unretrieved() -> None:
    """The batch's task ended (cancelled by SAgent.cancel()) before the consumer left: what it
    raised is taken, not left for asyncio to report as never retrieved."""
    entered = anyio.Event()

    @tool(permission="read_only")
    async def hang(tag: str, lines: int) -> str:
        """Report, then wait forever."""
        await emit_tool_progress("waiting\n")
        entered.set()
        await anyio.sleep_forever()
        return "never"

    async with ScriptedModel([_batch(1, 1, "hang"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(agent.run_stream(USER, tool_manager=_manager(hang))) as stream:
                async for event in stream:
                    if isinstance(event, ToolProgressEvent):
                        await entered.wait()
                        agent.cancel()
                        for _ in range(100):  # the batch's task ends meanwhile
                            await anyio.lowlevel.checkpoint()
                        break
        gc.collect()  # asyncio reports an exception never retrieved when its task goes


async def test_a_consumer_too_far_behind_gets_every_result_then_consumer_lagged() -> None:
    """A call whose inner calls (a script's, say) each close their progress while the consumer
    takes nothing: past DEFAULT_MAX_CRITICAL ``closed`` events the run's queue lags. The
    consumer still gets the call's result (the history and the events both settled), then the
    run ends with ``consumer_lagged`` (docs/progress.md, "Overflow policy"), not with the
    error raised inside the put of that result."""
    inner = DEFAULT_MAX_CRITICAL + 10
    fanned = anyio.Event()
    manager = ToolManager()

    @tool(permission="read_only")
    async def fan(context: SessionContext) -> str:
        """Make many inner calls in this call's session, each with its progress."""
        for n in range(inner):
            await manager.run_tool("speak", {}, context, tool_call_id=f"i{n}")
            await anyio.lowlevel.checkpoint()
        fanned.set()
        return "fanned"

    manager.register_tool(speak)
    manager.register_tool(fan)
    call = ScriptedReply(tool_calls=(ScriptedToolCall(name="fan", arguments={}, id="f1"),))
    events: list[Any] = []
    async with ScriptedModel([call, reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        with anyio.fail_after(RUN_TIMEOUT_S * 4):
            async with aclosing(
                agent.run_stream(
                    USER, tool_manager=manager, session_context=SessionContext(session_id="l")
                )
            ) as stream:
                async for event in stream:
                    events.append(event)
                    if isinstance(event, ToolProgressEvent):
                        await fanned.wait()  # busy elsewhere while the call runs
    done = done_of(events)
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "consumer_lagged"
    assert_settled_once(done.messages)
    results = [e for e in events if isinstance(e, MessageEvent) and e.message["role"] == "tool"]
    assert [e.message["content"] for e in results] == ["fanned"]
    closed = [e for e in events if isinstance(e, ToolProgressEvent) and e.closed]
    assert len(closed) >= DEFAULT_MAX_CRITICAL
