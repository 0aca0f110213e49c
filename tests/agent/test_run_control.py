"""Run control at its edges (docs/agent.md, "Cancellation" and "Pausing and resuming"): a run
that paused keeps its state whatever moment a cancel comes, ``SAgent.cancel()`` works from any
thread, and one session has one run at a time."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from sagents.agent import (
    AgentEvent,
    DoneEvent,
    QuestionnaireRequestEvent,
    QuestionnaireResultEvent,
    SAgent,
)
from sagents.agent._run import EVENT_BUFFER
from sagents.core.events import ApprovalRequestEvent
from sagents.errors import RunInProgressError
from sagents.store import SqliteAgentStore
from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, reply, tool_call
from sagents.tool import ApprovalAnswer, ApprovalRequest, SessionContext, ToolManager, tool
from sagents.tool.impl import register_builtin_tools
from tests.agent.helpers import (
    RUN_TIMEOUT_S,
    HangingModel,
    assert_settled_once,
    done_of,
    saving_tools,
)

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "go"}]
HELD = 2 * EVENT_BUFFER + 20  # held calls: their requests fill the run's outbox twice


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("asyncio", {"debug": True})  # a loop's call from another thread raises there


@pytest.fixture(autouse=True)
def _state_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGENTS_STATE_KEY", "k" * 40)


@pytest.fixture
def store(tmp_path: Any) -> SqliteAgentStore:
    return SqliteAgentStore(path=tmp_path / "agents.sqlite3")


def _held_answer(count: int) -> ScriptedReply:
    return ScriptedReply(
        tool_calls=tuple(
            ScriptedToolCall(name="save", arguments={"path": f"f{n}"}, id=f"c{n}")
            for n in range(count)
        )
    )


@pytest.mark.parametrize("how", ["sagent_cancel", "consumer_leaves", "consumer_cancelled"])
async def test_a_deferring_run_cancelled_while_its_requests_wait_for_room_keeps_its_state(
    how: str, store: SqliteAgentStore
) -> None:
    """More held calls than the run's outbox holds: their ``approval.request`` events fill it
    and the run waits for the consumer to take them. A cancel then (``SAgent.cancel()``, or the
    consumer leaving, or its own cancel scope cancelled) must not lose what the run answered:
    the run ends interrupted with its state, every held call pending in it, and the store
    keeps it."""
    ran: list[str] = []
    events: list[AgentEvent] = []
    asked = False
    async with ScriptedModel([_held_answer(HELD), reply("done")]) as model:
        agent = SAgent(
            model=model.chat_model(),
            run_script=False,
            store=store,
            max_tool_calls_per_answer=HELD,
        )
        with anyio.fail_after(RUN_TIMEOUT_S), anyio.CancelScope() as consumer:
            async with aclosing(
                agent.run_stream(
                    USER,
                    tool_manager=saving_tools(ran),
                    session_context=SessionContext(session_id="s", permission_mode="ask"),
                    approvals="defer",
                )
            ) as stream:
                async for event in stream:
                    events.append(event)
                    if isinstance(event, ApprovalRequestEvent) and not asked:
                        asked = True
                        # the first request: the batch goes on to fill the outbox again and
                        # waits for room (it cannot get past that while the consumer is here)
                        for _ in range(20):
                            await anyio.lowlevel.checkpoint()
                        if how == "consumer_leaves":
                            break
                        if how == "consumer_cancelled":
                            consumer.cancel()
                        else:
                            agent.cancel()
        state_id = await store.pending_state("s")
        assert state_id is not None  # the store keeps it, also when nobody got the done event
        stored = await agent.load_state(state_id)
        assert stored is not None
        assert sorted(i.id for i in stored.pending) == sorted(f"c{n}" for n in range(HELD))
        assert ran == []  # nothing held ran
        requests = [e for e in events if isinstance(e, ApprovalRequestEvent)]
        assert {r.request_id for r in requests} <= {i.id for i in stored.pending}
        if how == "sagent_cancel":
            done = done_of(events)
            assert done.reason == "interrupted"
            assert done.state is not None
            assert done.state.state_id == state_id
            assert len(requests) == HELD  # every held call was asked about, once
        for item in stored.pending:  # the answers the state was kept for
            stored.approve(item.id)
        with anyio.fail_after(RUN_TIMEOUT_S):
            resumed = await agent.run(
                state=stored,
                tool_manager=saving_tools(ran),
                session_context=SessionContext(session_id="s", permission_mode="ask"),
            )
    assert resumed.reason == "stop"
    assert sorted(ran) == sorted(f"f{n}" for n in range(HELD))  # each approved call ran once
    assert_settled_once(resumed.messages)


def _in_a_thread(call: Callable[[], object]) -> BaseException | None:
    """Call ``call`` in a plain thread (no event loop in it): what it raised."""
    raised: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as error:  # noqa: BLE001 - reported to the test
            raised.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    return raised[0] if raised else None


@pytest.mark.parametrize("where", ["model_read", "tool_call"])
async def test_sagent_cancel_from_a_plain_thread_cancels_the_run(where: str) -> None:
    """``SAgent.cancel()`` from a thread that runs no event loop (a UI thread, a signal
    handler's, a sync web handler's) does not raise there, and the run ends cancelled: while
    the model's answer is read, and while a tool runs."""
    entered = anyio.Event()

    @tool(permission="read_only")
    async def wait() -> str:
        """Wait for ever."""
        entered.set()
        await anyio.sleep_forever()
        return "never"

    manager = ToolManager()
    manager.register_tool(wait)
    hanging = HangingModel()
    async with ScriptedModel(
        [ScriptedReply(tool_calls=(ScriptedToolCall(name="wait", arguments={}, id="w1"),))]
    ) as scripted:
        if where == "model_read":
            agent = SAgent(model=hanging, run_script=False)
            reached = hanging.awaiting
        else:
            agent = SAgent(model=scripted.chat_model(), run_script=False)
            reached = entered
        raised: list[BaseException | None] = []
        events: list[AgentEvent] = []
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with anyio.create_task_group() as tg:

                async def cancel_when_reached() -> None:
                    await reached.wait()
                    # a real thread, joined from a worker thread (the loop runs on meanwhile)
                    raised.append(await anyio.to_thread.run_sync(_in_a_thread, agent.cancel))

                tg.start_soon(cancel_when_reached)
                async with aclosing(agent.run_stream(USER, tool_manager=manager)) as stream:
                    async for event in stream:
                        events.append(event)
    assert raised == [None]
    done = done_of(events)
    assert done.reason == "cancelled"
    assert_settled_once(done.messages)


class _Approver:
    """Records the calls it is asked about; answers each once ``release`` is set."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.waiting = anyio.Event()
        self.release = anyio.Event()

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.append(request.tool_call_id or "")
        self.waiting.set()
        await self.release.wait()
        return "allow_once"


def _save_call(call_id: str) -> ScriptedReply:
    return ScriptedReply(
        tool_calls=(ScriptedToolCall(name="save", arguments={"path": call_id}, id=call_id),)
    )


async def _run_asking(
    agent: SAgent,
    manager: ToolManager,
    context: SessionContext,
    approver: _Approver,
    while_asking: Callable[[], Awaitable[None]],
) -> list[AgentEvent]:
    """The events of a run of ``agent`` whose approval ``approver`` answers once
    ``while_asking`` returned (awaited while the run waits for the approver)."""
    events: list[AgentEvent] = []
    async with aclosing(
        agent.run_stream(USER, tool_manager=manager, session_context=context, approver=approver)
    ) as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ApprovalRequestEvent):
                await approver.waiting.wait()  # the run waits for its approver
                await while_asking()
                approver.release.set()
    return events


async def _first_event(agent: SAgent, **options: Any) -> AgentEvent:
    """The first event of a run of ``agent`` (the run closed then)."""
    async with aclosing(agent.run_stream(USER, **options)) as stream:
        async for event in stream:
            return event
    raise AssertionError("the run sent no event")


async def test_a_second_run_on_a_session_with_a_run_in_progress_is_refused() -> None:
    """Two runs of one session, each with its own approver: while the first waits for its
    approver, the second is refused before any event (the session's history is one
    conversation, which two runs would write at once), and never reaches its approver; the
    first run's approval is answered by its own approver. Once the first ended, the session
    runs the next, whose approval goes to its own approver."""
    ran: list[str] = []
    first, second = _Approver(), _Approver()
    context = SessionContext(session_id="shared", permission_mode="ask")
    async with ScriptedModel(
        [_save_call("a1"), reply("a done"), _save_call("b1"), reply("b done")]
    ) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        manager = saving_tools(ran)
        refused: list[RunInProgressError] = []

        async def second_run() -> None:
            with pytest.raises(RunInProgressError) as raised:
                await _first_event(
                    agent, tool_manager=manager, session_context=context, approver=second
                )
            refused.append(raised.value)

        with anyio.fail_after(RUN_TIMEOUT_S):
            events = await _run_asking(agent, manager, context, first, second_run)
            assert refused[0].details["session_id"] == "shared"
            assert done_of(events).reason == "stop"
            assert first.asked == ["a1"]
            assert second.asked == []
            assert ran == ["a1"]
            second.release.set()
            later = await agent.run(
                USER, tool_manager=manager, session_context=context, approver=second
            )
    assert later.reason == "stop"
    assert second.asked == ["b1"]
    assert first.asked == ["a1"]
    assert ran == ["a1", "b1"]


@pytest.mark.parametrize("tools", ["the same", "other"])
async def test_a_refused_run_changes_nothing_of_the_session_of_the_run_in_progress(
    tools: str,
) -> None:
    """The session is its id: a second run is refused before any event, also when given
    another tool manager, and the run in progress keeps the session's state, its permission
    mode too (the refused run asked for ``auto``)."""
    model = HangingModel()
    agent = SAgent(model=model, run_script=False)
    manager = ToolManager()
    asking = SessionContext(session_id="shared", permission_mode="ask")
    with anyio.fail_after(RUN_TIMEOUT_S):
        first = agent.run_stream(USER, tool_manager=manager, session_context=asking)
        async with aclosing(first):
            await anext(first)  # its first piece: the model's read now waits
            held = agent.session("shared")
            with pytest.raises(RunInProgressError):
                await _first_event(
                    agent,
                    tool_manager=manager if tools == "the same" else ToolManager(),
                    session_context=SessionContext(session_id="shared", permission_mode="auto"),
                )
            assert agent.session("shared") is held
            assert held is not None
            assert held.context.permission_mode == "ask"


async def test_a_run_refused_for_a_run_in_progress_leaves_its_stored_session_unloaded(
    store: SqliteAgentStore,
) -> None:
    """With a store, neither the refused run nor the host's ``load_session`` loads the store's
    (older) copy of the session into the run in progress: its history stays its own, every
    call settled once."""
    first = _Approver()
    context = SessionContext(session_id="stored", permission_mode="ask")
    async with ScriptedModel([reply("zero"), _save_call("a1"), reply("a done")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False, store=store)
        manager = saving_tools([])

        async def second_run_and_load() -> None:
            with pytest.raises(RunInProgressError):
                await _first_event(agent, tool_manager=manager, session_context=context)
            loaded = await agent.load_session("stored")  # nor does the host's load
            assert loaded is not None
            assert loaded.messages[0]["content"] == "go"

        with anyio.fail_after(RUN_TIMEOUT_S):
            hello = [{"role": "user", "content": "hello"}]
            await agent.run(hello, tool_manager=manager, session_context=context)  # stored
            events = await _run_asking(agent, manager, context, first, second_run_and_load)
    done = done_of(events)
    assert done.reason == "stop"
    assert [m.get("content") for m in done.messages] == ["go", "", "saved a1", "a done"]
    assert_settled_once(done.messages)


async def test_a_consumer_that_stops_at_the_done_event_may_start_the_sessions_next_run() -> None:
    """The run gives its session back before its ``done`` event goes out: a consumer that
    leaves the loop there, without closing the iterator, starts the next run at once."""
    context = SessionContext(session_id="next")
    async with ScriptedModel([reply("one"), reply("two")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        with anyio.fail_after(RUN_TIMEOUT_S):
            stream = agent.run_stream(USER, session_context=context)
            async for event in stream:
                if isinstance(event, DoneEvent):
                    break  # suspended at its done event, not closed
            result = await agent.run(USER, session_context=context)
            await stream.aclose()
    assert result.reason == "stop"
    assert result.output == "two"


QUESTIONS = {"questions": [{"id": "city", "kind": "text", "prompt": "Where to?"}]}


@pytest.mark.parametrize(
    ("how", "status"), [("answer", "answered"), ("decline", "declined"), ("cancel", "cancelled")]
)
async def test_a_questionnaire_settled_from_a_plain_thread_reaches_the_run(
    how: str, status: str
) -> None:
    """``QuestionnaireRequestEvent.answer`` / ``decline`` / ``cancel`` from a thread that runs
    no event loop (a UI thread) settle the questionnaire the run waits for, as from the run's
    own thread: nothing raised there, the result as given."""
    manager = ToolManager()
    register_builtin_tools(manager, None, names=["questionnaire"])
    script = [tool_call("questionnaire", QUESTIONS, id="q1"), reply("thanks")]
    events: list[AgentEvent] = []
    outcome: list[object] = []
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(agent.run_stream(USER, tool_manager=manager)) as stream:
                async for event in stream:
                    events.append(event)
                    if isinstance(event, QuestionnaireRequestEvent):

                        def settle(request: QuestionnaireRequestEvent = event) -> None:
                            if how == "answer":
                                outcome.append(request.answer({"city": "Rome"}))
                            else:
                                outcome.append(getattr(request, how)())

                        raised = await anyio.to_thread.run_sync(_in_a_thread, settle)
                        assert raised is None
    assert outcome == [True]
    [result] = [e for e in events if isinstance(e, QuestionnaireResultEvent)]
    assert result.status == status
    assert result.answers == ({"city": "Rome"} if how == "answer" else {})
    assert done_of(events).reason == "stop"
