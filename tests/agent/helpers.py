"""Helpers of the agent-loop tests: collect a run's events, check the settle-once guarantee."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import anyio

from sagents.agent import (
    AgentEvent,
    ChatModel,
    DoneEvent,
    Finish,
    Message,
    MessageDeltaEvent,
    ModelEvent,
    ModelRequest,
    RunResult,
    SAgent,
    TextDelta,
)
from sagents.agent._retry import CallBudget
from sagents.testing import WireReply
from sagents.tool import SessionContext, ToolManager, emit_tool_progress, tool

RUN_TIMEOUT_S = 30.0


async def collect(
    agent: SAgent,
    messages: Sequence[Message | Mapping[str, Any]],
    *,
    within_s: float = RUN_TIMEOUT_S,
    **kwargs: Any,
) -> list[AgentEvent]:
    """Every event of one run, bounded in time (``within_s`` seconds)."""
    events: list[AgentEvent] = []
    with anyio.fail_after(within_s):
        async with aclosing(agent.run_stream(messages, **kwargs)) as stream:
            async for event in stream:
                events.append(event)
    return events


async def collect_cancelling_at_first_text(
    agent: SAgent, messages: Sequence[Message | Mapping[str, Any]], **kwargs: Any
) -> list[AgentEvent]:
    """Every event of one run that :meth:`SAgent.cancel` is called in at its first text delta,
    bounded in time."""
    events: list[AgentEvent] = []
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with aclosing(agent.run_stream(messages, **kwargs)) as stream:
            async for event in stream:
                events.append(event)
                if isinstance(event, MessageDeltaEvent):
                    agent.cancel()
    return events


def done_of(events: Sequence[AgentEvent]) -> DoneEvent:
    """The run's last event, which must be its one DoneEvent."""
    assert isinstance(events[-1], DoneEvent)
    assert sum(isinstance(e, DoneEvent) for e in events) == 1
    return events[-1]


def assert_settled_once(messages: Sequence[Mapping[str, Any]]) -> None:
    """Every tool_call_id of an assistant message has exactly one tool message, right after it
    (in call order), and no tool message answers an unknown call."""
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.get("role") == "tool":
            raise AssertionError(f"tool message without its call: {message}")
        ids = [c["id"] for c in message.get("tool_calls") or []]
        answered = [m.get("tool_call_id") for m in messages[index : index + len(ids)]]
        assert answered == ids, f"calls {ids} answered by {answered}"
        assert all(m.get("role") == "tool" for m in messages[index : index + len(ids)])
        index += len(ids)


def tool_messages(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [m for m in messages if m.get("role") == "tool"]


async def first(stream: AsyncIterator[AgentEvent], kind: type[Any]) -> Any:
    async for event in stream:
        if isinstance(event, kind):
            return event
    raise AssertionError(f"no {kind.__name__}")


async def model_events(model: ChatModel, request: ModelRequest) -> list[ModelEvent]:
    """Every event of one call of a model adapter."""
    with anyio.fail_after(RUN_TIMEOUT_S):
        return [event async for event in model.stream(request)]


def finish_of(events: Sequence[ModelEvent]) -> Finish:
    """A model call's last event, which must be its Finish."""
    assert isinstance(events[-1], Finish)
    return events[-1]


class WatchedModel:
    """A model (the scripted server's adapter) whose stream is watched: the task each of its
    events is read in (:attr:`tasks`) and whether the stream was closed (:attr:`closed`)."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.model = inner.model
        self.tasks: list[int] = []
        self.closed = anyio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        try:
            async for item in self.inner.stream(request):
                self.tasks.append(anyio.get_current_task().id)
                yield item
        finally:
            self.closed.set()

    async def aclose(self) -> None:
        await self.inner.aclose()


def call_budget(timeout: float) -> CallBudget:
    """A model call's budget with the idle ``timeout`` and nothing else bounded (no deadline, no
    retry)."""
    return CallBudget(
        timeout=timeout,
        deadline=None,
        max_retries=0,
        max_retry_wait=1.0,
        endpoint="http://127.0.0.1:9",
        adapter="OpenAIChatModel",
    )


def json_answer(status: int, body: Mapping[str, Any]) -> WireReply:
    """An answer as a server sends it (an error, a whole completion): ``status`` and ``body``
    as JSON."""
    return WireReply(
        status=status, headers={"content-type": "application/json"}, body=(json.dumps(body),)
    )


def saving_tools(runs: list[str]) -> ToolManager:
    """A manager of one write tool, ``save``, which appends each path it saves to ``runs``."""

    @tool(permission="write")
    def save(path: str) -> str:
        """Save a file."""
        runs.append(path)
        return f"saved {path}"

    manager = ToolManager()
    manager.register_tool(save)
    return manager


async def paused_on_save(agent: SAgent, runs: list[str], context: SessionContext) -> RunResult:
    """A run of ``agent`` asked to save x with its approvals deferred: paused on its call of
    ``save`` (its model's first answer), with its state."""
    with anyio.fail_after(RUN_TIMEOUT_S):
        paused = await agent.run(
            [{"role": "user", "content": "save x"}],
            tool_manager=saving_tools(runs),
            session_context=context,
            approvals="defer",
        )
    assert paused.state is not None
    return paused


class HangingModel:
    """A model whose read awaits an answer that never comes (and lets cancellation through):
    ``awaiting`` is set once its first piece is out."""

    model = "hanging"

    def __init__(self) -> None:
        self.awaiting = anyio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta(text="first ")
        self.awaiting.set()
        await anyio.sleep_forever()
        yield TextDelta(text="never")

    async def aclose(self) -> None:
        pass


@tool(permission="read_only")
async def speak() -> str:
    """Say one line."""
    await emit_tool_progress("line\n")
    return "said"
