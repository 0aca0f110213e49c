"""One answer's tool calls, each settled exactly once (see :mod:`sagents.agent._loop`).

The calls run concurrently (at most ``max_parallel_tools`` at once) in the batch task of
:func:`~sagents.agent._driver.relay`; their results enter the history in call order, and a call
that did not finish (cancelled, the run ended) gets a result that says so. In a deferring run
(``approvals="defer"``), a call that needs a person is held: the run pauses once the others ran.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Final

import anyio

from sagents.agent._durable import (
    AnsweredQuestioner,
    Check,
    cancelled_result,
    check_call,
    denied_result,
    request_event,
)
from sagents.agent._events import MessageEvent
from sagents.agent._messages import ToolCall
from sagents.agent._run import ActiveRun, EventApprover, tool_message
from sagents.agent._state import Interruption, RunState
from sagents.core._result import ToolResult
from sagents.core._tracing import end_tool_span, tool_span
from sagents.errors import NotAllowedError
from sagents.tool._approval import Decision
from sagents.tool._call import ToolRequest
from sagents.tool._context import SessionContext
from sagents.tool._expansion import not_offered_result
from sagents.tool.questions import Questioner

if TYPE_CHECKING:
    from sagents.agent._loop import SAgent

__all__ = ["TRUNCATED", "resume_calls", "run_calls", "too_many"]

TRUNCATED: Final = ToolResult.from_error(
    "output_truncated",
    "this call was not run: your answer was cut by the output token limit "
    "(finish_reason: length) before its tool calls were complete",
    hint="Make the call again with shorter arguments, or split the work into smaller calls.",
)
"""The result of each call of an answer the output token limit cut."""


def too_many(agent: SAgent, count: int) -> ToolResult:
    """The result that settles a call past ``max_tool_calls_per_answer``."""
    cap = agent.max_tool_calls_per_answer
    return ToolResult.from_error(
        "too_many_tool_calls",
        f"this call was not run: the answer made {count} tool calls and at most {cap} of "
        "one answer run (SAgent max_tool_calls_per_answer)",
        hint=f"Make at most {cap} calls in one answer; repeat the ones you still need.",
    )


async def run_calls(
    agent: SAgent,
    run: ActiveRun,
    calls: Sequence[ToolCall],
    offered: set[str],
    *,
    refused: Mapping[str, ToolResult],
) -> None:
    """Run one answer's tool calls and settle each exactly once, in call order; a call in
    ``refused`` is not run: that result settles it. In a deferring run, a call that needs
    a person is held instead: the run pauses (``run.paused``) once the others ran."""
    state = run.session
    results = {call_id: _content(agent, result) for call_id, result in refused.items()}
    jobs: dict[str, Callable[[], Awaitable[ToolResult]]] = {}
    held: list[Interruption] = []
    for call in calls:
        if call.id in refused:
            continue
        check = Check()
        if run.defer and call.name in offered and call.name not in run.extra_names:
            check = check_call(
                state.tool_manager,
                call.name,
                call.arguments,
                call_id=call.id,
                context=state.context,
                granted=run.granted(),
            )
        if check.held is not None:
            held.append(check.held)
        else:
            jobs[call.id] = partial(_run_call, agent, run, call, offered, check.decision)
    await _settle(agent, run, calls, results, jobs, hold=bool(held))
    if not held:
        return
    # The run pauses here. Its state is made before its requests go out, and they go out
    # without waiting for room (bounded in number by the answer's calls, as its results are):
    # nothing awaits between them, so a cancel either comes before the pause (the run ends
    # cancelled, every call settled, nobody asked) or after it (the run keeps its state).
    run.paused = RunState(
        agent=agent.name,
        session_id=state.session_id,
        history=state.history,
        pending=held,
        settled=results,
        turns=run.turns,
        usage=run.usage,
        audit_status=state.audit_status.snapshot(),
        offered_tools=state.offered_tools,
        granted=sorted(run.granted()),
        skills=state.skills.active_skills if state.skills is not None else (),
        system_extra=run.system_extra,
        tool_choice_spent=run.tool_choice_spent,
        output_retries=run.output_retries,
    )
    now = run.hubs[0].clock.time()
    for item in held:
        run.put(request_event(item, state.session_id, now))


async def resume_calls(agent: SAgent, run: ActiveRun, paused: RunState) -> None:
    """Settle the calls of the answer a paused run waited on: those settled before the
    pause keep their results (never run again), each decided item settles its call."""
    state = run.session
    calls = state.history[-1].tool_calls if state.history else ()
    results = {i: c for i, c in paused.settled.items() if any(i == c_.id for c_ in calls)}
    jobs: dict[str, Callable[[], Awaitable[ToolResult]]] = {}
    for item in paused.pending:
        resolution = paused.decisions[item.id]
        call = next((c for c in calls if c.id == item.id), None)
        if call is None:
            continue  # not a call of that answer: nothing to settle
        if resolution.cancelled:
            results[item.id] = _content(agent, cancelled_result(resolution.reason))
        elif resolution.answer == "deny":
            results[item.id] = _content(agent, denied_result(item, resolution.reason))
        elif resolution.questionnaire is not None:
            jobs[item.id] = partial(
                _run_answered, agent, run, call, AnsweredQuestioner(resolution.questionnaire)
            )
        elif resolution.answer is not None:
            if resolution.answer == "allow_session":
                state.granted.add(item.tool_name)
            decision = Decision.from_answer(resolution.answer, {item.tool_name})
            jobs[item.id] = partial(_run_call, agent, run, call, None, decision)
    await _settle(agent, run, calls, results, jobs)


async def _run_answered(
    agent: SAgent, run: ActiveRun, call: ToolCall, questioner: AnsweredQuestioner
) -> ToolResult:
    return await _run_call(agent, run, call, None, None, questioner=questioner)


async def _settle(
    agent: SAgent,
    run: ActiveRun,
    calls: Sequence[ToolCall],
    results: dict[str, str],
    jobs: Mapping[str, Callable[[], Awaitable[ToolResult]]],
    *,
    hold: bool = False,
) -> None:
    """Run ``jobs`` (call id to its run, at most ``max_parallel_tools`` at once) into
    ``results``, then append every call's result to the history in call order (a call
    cancelled before it finished gets a ``cancelled`` result). With ``hold``, a run
    about to pause, the results stay in ``results`` (the paused state's)."""
    state = run.session
    finished = False
    try:
        if len(jobs) == 1:
            # nothing runs beside it: no task group and no limiter, each of which cost a
            # trip through the event loop (bench/bench_agent_loop.py)
            ((call_id, job),) = jobs.items()
            results[call_id] = _content(agent, await job())
        else:
            limiter = anyio.CapacityLimiter(agent.max_parallel_tools)

            async def one(call_id: str, job: Callable[[], Awaitable[ToolResult]]) -> None:
                async with limiter:
                    result = await job()
                results[call_id] = _content(agent, result)

            async with anyio.create_task_group() as tg:
                for call_id, job in jobs.items():
                    tg.start_soon(one, call_id, job)
        finished = True
    finally:
        if not (finished and hold):
            settled = []
            for call in calls:
                content = results.get(call.id)
                if content is None:  # cancelled before it finished
                    content = _content(
                        agent,
                        ToolResult.from_error(
                            "cancelled", "the call was cancelled before it finished"
                        ),
                    )
                message = tool_message(call.id, content)
                state.history.append(message)
                settled.append(message)
            for message in settled:  # one event a call: never waits, also when cancelled
                run.put(MessageEvent(message=message.to_openai()))


async def _run_call(
    agent: SAgent,
    run: ActiveRun,
    call: ToolCall,
    offered: set[str] | None,
    decision: Decision | None,
    *,
    questioner: Questioner | None = None,
) -> ToolResult:
    """One call; ``offered`` None for a call a paused run already checked, ``decision``
    the policy step's when the loop made it (a deferring run), ``questioner`` the one its
    ``questionnaire`` asks when not the run's (a resumed call's given answer)."""
    state = run.session
    name, arguments = call.name, call.arguments
    context = state.context_for_tools(questioner=questioner, granted=run.granted())
    if offered is not None and name not in offered:
        if name in run.allowed_names and agent.suggestion is not None:
            return not_offered_result(name)  # allowed, but not offered: expand it first
        error = NotAllowedError(
            f"tool {name!r} is not offered in this session",
            hint="Call one of the tools you were given.",
            details={"name": name},
        )
        if not state.tool_manager.has_tool(name) and name not in run.extra_names:
            return ToolResult.from_error("unknown_tool", f"no tool named {name!r}", hint=error.hint)
        return ToolResult.from_exception(error)
    with tool_span(name, call_id=call.id, arguments=arguments) as current:
        result = await _call(agent, run, call, context, decision)
        end_tool_span(current, result.error.code if result.error else "ok", result.text)
    return result


async def _call(
    agent: SAgent,
    run: ActiveRun,
    call: ToolCall,
    context: SessionContext,
    decision: Decision | None,
) -> ToolResult:
    # A failed call is already its result (ToolManager.run_tool, the one boundary).
    if call.name in run.extra_names:
        return await run.extras.run_tool(
            call.name, call.arguments, context, tool_call_id=call.id, timeout=agent.tool_timeout
        )
    if decision is not None:  # decided here: the proxy honours it and never asks
        context = dataclasses.replace(context, decision=decision)
    request = ToolRequest(
        name=call.name,
        arguments=call.arguments,
        session_context=context,
        tool_call_id=call.id,
        timeout=agent.tool_timeout,
        approver=EventApprover(run) if run.approver is not None else None,
    )
    return await run.session.tool_manager.call(request)


def _content(agent: SAgent, result: ToolResult) -> str:
    return result.to_tool_message(max_tokens=agent.max_tool_result_tokens)
