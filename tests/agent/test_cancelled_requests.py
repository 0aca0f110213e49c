"""Attacks on what a cancelled batch of tool calls owes its consumer (docs/agent.md,
"Cancellation" and "Questions for the user"): a request that went out while the batch waited
for a slow consumer still gets its one result."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from sagents.agent import QuestionnaireRequestEvent, QuestionnaireResultEvent, SAgent
from sagents.agent._run import EVENT_BUFFER
from sagents.core.events import ApprovalRequestEvent, ApprovalResultEvent, ToolProgressEvent
from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, reply
from sagents.tool import (
    ApprovalAnswer,
    ApprovalRequest,
    SessionContext,
    ToolManager,
    emit_tool_progress,
    tool,
)
from sagents.tool.questions import Question, Questionnaire
from tests.agent.helpers import RUN_TIMEOUT_S, assert_settled_once, done_of, speak

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "hello"}]


class Hangs:
    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        await anyio.sleep_forever()
        raise AssertionError("never answered")


@pytest.mark.parametrize("kind", ["approval", "questionnaire"])
async def test_a_request_that_waited_for_room_when_the_run_was_cancelled_gets_its_result(
    kind: str,
) -> None:
    # A call fills the run's outbox while the consumer takes nothing (its inner calls each
    # close their progress); then a request is queued (a questionnaire this call asks, or the
    # approval of the next call: max_parallel_tools=1) and its emit waits for room. The run is
    # cancelled meanwhile: the consumer gets the request, so it must get its one result.
    seen, filled = anyio.Event(), anyio.Event()
    manager = ToolManager()

    @tool(permission="read_only")
    async def fill(context: SessionContext) -> str:
        """Report, make many inner calls (each closes its progress), then ask the user."""
        await emit_tool_progress("start\n")
        await seen.wait()  # the consumer took that, and takes nothing more for now
        for n in range(EVENT_BUFFER + 10):
            await manager.run_tool("speak", {}, context, tool_call_id=f"i{n}")
        filled.set()
        if kind == "questionnaire":  # its request is queued, then waits: no checkpoint first
            assert context.questioner is not None
            question = Question(id="q", kind="text", prompt="Which city?")
            await context.questioner.ask(Questionnaire(questions=(question,)), time_limit=60.0)
        return "filled"

    @tool(permission="write")
    async def save() -> str:
        """Save."""
        raise AssertionError("the run was cancelled before this call was approved")

    for fn in (speak, fill, save):
        manager.register_tool(fn)
    calls = [ScriptedToolCall(name="fill", arguments={}, id="c1")]
    if kind == "approval":
        calls.append(ScriptedToolCall(name="save", arguments={}, id="c2"))
    events: list[Any] = []
    async with ScriptedModel([ScriptedReply(tool_calls=tuple(calls)), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False, max_parallel_tools=1)
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(
                agent.run_stream(
                    USER,
                    tool_manager=manager,
                    session_context=SessionContext(session_id="r", permission_mode="ask"),
                    approver=Hangs(),
                )
            ) as stream:
                async for event in stream:
                    events.append(event)
                    if isinstance(event, ToolProgressEvent) and not seen.is_set():
                        seen.set()
                        await filled.wait()
                        for _ in range(20):  # the batch goes on to its request (it waits for room)
                            await anyio.lowlevel.checkpoint()
                        agent.cancel()
    done = done_of(events)
    assert done.reason == "cancelled"
    assert_settled_once(done.messages)
    request_type, result_type = (
        (ApprovalRequestEvent, ApprovalResultEvent)
        if kind == "approval"
        else (QuestionnaireRequestEvent, QuestionnaireResultEvent)
    )
    requests = [e for e in events if isinstance(e, request_type)]
    results = [e for e in events if isinstance(e, result_type)]
    assert len(requests) == 1  # the request went out before the cancel
    assert [r.request_id for r in results] == [requests[0].request_id]
    assert getattr(results[0], "status", getattr(results[0], "reason", None)) == "cancelled"
