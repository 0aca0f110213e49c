"""The turns of one ``SAgent`` run: model calls streamed, tool calls settled, until the model
answers without tool calls or ``max_turns`` model calls were made (see :mod:`sagents.agent._loop`).

The turns are an async generator of events that holds no cancel scope, task group or context
variable across a ``yield``: each step of the run (:meth:`Turns.steps`) enters them for its own
awaits, so that the consumer's task can iterate the run (:mod:`sagents.agent._driver`). A batch
of tool calls runs in a task of its own (:func:`~sagents.agent._driver.relay`).
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractContextManager, aclosing, contextmanager
from copy import deepcopy
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.trace import Span
from pydantic import ValidationError

from sagents.agent._calls import TRUNCATED, resume_calls, run_calls, too_many
from sagents.agent._chat_model import (
    ChatModel,
    Finish,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ReasoningDelta,
    TextDelta,
    Usage,
    close_stream,
    usage_sink,
)
from sagents.agent._compress import HistoryCompressor
from sagents.agent._driver import listen, relay
from sagents.agent._events import (
    AgentEvent,
    MessageDeltaEvent,
    MessageEvent,
    ReasoningDeltaEvent,
    UsageEvent,
)
from sagents.agent._messages import Message
from sagents.agent._output import OutputType
from sagents.agent._questions import EventQuestioner
from sagents.agent._run import ActiveRun, EventApprover, normalise_assistant
from sagents.agent._scripts import relevant_description, with_script_description
from sagents.agent._session import AgentSession
from sagents.agent._suggestion import allowed_tools, request_query
from sagents.agent._tracing import end_model_span, model_span
from sagents.core._spec import ToolSpec
from sagents.core._tracing import attached, end_span
from sagents.errors import ContextLengthError, ModelConfigError, ModelError
from sagents.tool._tool_proxy import ToolProxy

if TYPE_CHECKING:
    from sagents.agent._loop import SAgent

__all__ = ["Turns"]

_SKILLS_PROMPT_TOKENS: Final = 2000  # budget of the skills fragment of the system prompt


class Turns:
    """The turns of an agent's runs: its settings read from the agent at each use.

    Args:
        agent: The agent.
        output: The agent's ``output_type``, checked (None: free text).
    """

    def __init__(self, agent: SAgent, output: OutputType | None) -> None:
        self._agent = agent
        self.output = output
        self._offer: list[dict[str, Any]] = []  # the tools of the last request, and their specs
        self._offer_specs: tuple[ToolSpec, ...] = ()

    def steps(
        self, run: ActiveRun, current: Span | None
    ) -> Callable[[], AbstractContextManager[None]]:
        """The run's :attr:`ActiveRun.step`: cancellable, with the run's approver, compressor,
        questioner, usage sink (the usage of every other model call of the run, from
        compression, tool and workflow selection, as ``usage`` events) and span; made at the
        run's first step (:class:`_FirstStep`)."""
        return _FirstStep(partial(self._steps, run, current))

    def _steps(
        self, run: ActiveRun, current: Span | None
    ) -> Callable[[], AbstractContextManager[None]]:
        state = run.session
        approver = EventApprover(run) if run.approver is not None else None
        questions = EventQuestioner(run, state.questioner)
        compressor = HistoryCompressor(
            run,
            model=self._agent.model,
            budget=self._agent.max_history_tokens,
            settings=self._agent.compression,
            system=lambda session: self.system(session, run.system_extra),
        )

        async def report(purpose: str, usage: Usage) -> None:
            _count_usage(run, usage)
            await run.emit(_usage_event(run.turns, usage, purpose))

        @contextmanager
        def step() -> Iterator[None]:
            with (
                run.cancellable(),
                attached(current),
                state.running(approver=approver, compressor=compressor, questioner=questions),
            ):
                token = usage_sink.set(report)
                try:
                    yield
                finally:
                    usage_sink.reset(token)

        return step

    async def events(self, run: ActiveRun) -> AsyncGenerator[AgentEvent, None]:
        """The run's model turns and tool calls as events; why they ended in
        :attr:`ActiveRun.reason`.

        Raises:
            RunCancelled: the run was cancelled.
            SagentsError: the model endpoint failed; the answer did not fit ``output_type``.
        """
        state = run.session
        if run.resume is not None:
            work = partial(resume_calls, self._agent, run, run.resume)
            listen(run)  # the calls' progress
            async with aclosing(relay(run, work)) as relayed:
                async for event in relayed:
                    yield event
            if run.resume.cancelled:
                run.reason = "cancelled"
                return
        elif self._agent.workflow_selection is not None:
            with run.step():
                run.system_extra = await self._agent.workflow_selection.select(run)
        while True:
            for event in run.take():
                yield event
            if run.turns >= self._agent.max_turns:
                run.reason = "max_turns"
                return
            run.turns += 1
            if self._agent.max_history_tokens is None and self._agent.suggestion is None:
                # nothing here awaits (no budget to count the history against, no pick of
                # tools): no step around it, a measurable part of a turn
                # (bench/bench_agent_loop.py)
                tools = await self._offered_tools(run)
            else:
                with run.step():
                    if state.run_compressor is not None:
                        await state.run_compressor.compress_if_over_budget()
                    tools = await self._offered_tools(run)
            compressed = False
            while True:  # a request the model finds too long: compressed, sent once more
                try:
                    # the answer read here, not by a generator of its own per model call: its
                    # hand-over of every piece was a measurable part of a streamed turn
                    # (bench/bench_agent_loop.py --calls); nothing is held across a yield
                    call = _ModelCall(self._agent.model, self._request(run, tools), run.span)
                    read = call.reader()
                    try:
                        while (shown := await run.read_answer(read)) is not None:
                            if run.waiting():  # progress published meanwhile goes out first
                                for event in run.take():
                                    yield event
                            yield shown
                    finally:
                        await call.close()
                    run.response = call.response()
                    break
                except ContextLengthError:
                    if compressed or self._agent.max_history_tokens is None:
                        raise
                    with run.step():
                        compressor = state.run_compressor
                        report = (
                            None
                            if compressor is None
                            else await compressor.compress(reason="context_length")
                        )
                    if report is None or not report["compressed"]:
                        raise
                    compressed = True
            turn = run.response
            assert turn is not None  # set above
            if turn.finish_reason == "content_filter" and not turn.message.tool_calls:
                raise _withheld(self._agent.model.model, turn.message.text)
            message = normalise_assistant(turn.message)
            state.history.append(message)
            await run.emit(MessageEvent(message=message.to_openai()))
            if turn.usage is not None:
                _count_usage(run, turn.usage)
                await run.emit(_usage_event(run.turns, turn.usage, "turn"))
            calls = message.tool_calls
            choice = run.model_settings.tool_choice
            if calls and (choice == "required" or any(c.name == choice for c in calls)):
                run.tool_choice_spent = True
            if not calls:
                if self.output is None:
                    run.reason = "stop"
                    return
                with run.step():
                    fits = await self._take_output(run, message, turn.finish_reason == "length")
                if fits:
                    run.reason = "stop"
                    return
                continue  # the answer did not fit output_type: asked again
            if turn.finish_reason == "length":  # cut by the output limit: run none of it
                refused = dict.fromkeys((c.id for c in calls), TRUNCATED)
                offered: set[str] = set()
            else:
                cap = self._agent.max_tool_calls_per_answer
                refused = (
                    dict.fromkeys((c.id for c in calls[cap:]), too_many(self._agent, len(calls)))
                    if len(calls) > cap
                    else {}
                )
                offered = {t["function"]["name"] for t in tools}
            work = partial(run_calls, self._agent, run, calls, offered, refused=refused)
            listen(run)  # the calls' progress
            async with aclosing(relay(run, work)) as relayed:
                async for event in relayed:
                    yield event
            if run.paused is not None:
                run.reason = "interrupted"
                return

    async def _take_output(self, run: ActiveRun, answer: Message, cut: bool) -> bool:
        """Validate a final answer into ``output_type`` (``run.output``): True when it fits;
        False when it went back to the model with the errors (and, ``cut``, that the output
        limit cut it).

        Raises:
            OutputValidationError: it did not fit and the retries are spent.
        """
        assert self.output is not None
        try:
            run.output = self.output.validate(answer.text)
        except ValidationError as error:
            if run.output_retries >= self._agent.output_retries:
                raise self.output.failure(
                    error, answer.text, retries=run.output_retries, cut=cut
                ) from None
            run.output_retries += 1
            retry = self.output.retry_message(error, cut=cut)
            run.session.history.append(retry)
            await run.emit(MessageEvent(message=retry.to_openai()))
            return False
        return True

    def _request(self, run: ActiveRun, tools: list[dict[str, Any]]) -> ModelRequest:
        """The request of the run's next model call, offering ``tools``.

        Raises:
            ModelConfigError: see :meth:`_settings`.
        """
        history = run.session.history
        lead = sum(1 for m in history if m.role == "system")
        if any(m.role != "system" for m in history[:lead]):
            lead = 0  # system messages inside the history stay where they are
        system = self.system(run.session, run.system_extra)
        prompts = [str(m.get("content") or "") for m in system] + [m.text for m in history[:lead]]
        return ModelRequest(
            system_prompt="\n\n".join(prompts),
            messages=tuple(history[lead:]),
            tools=self._specs_of(tools),
            settings=self._settings(run, tools),
            output=None if self.output is None else self.output.schema,
        )

    def _specs_of(self, tools: list[dict[str, Any]]) -> tuple[ToolSpec, ...]:
        """The offered tools as the seam's ``ToolSpec``s; the last request's kept while the
        offer is the same (compared as the JSON values they are, in C: making a spec per tool
        per request was a measurable part of a text turn, bench/bench_agent_loop.py --calls).
        """
        if tools != self._offer:
            # a copy of the offer, not the offer: a provider may change an export it handed
            # out, in place (a shallow copy would share that change, and compare equal)
            self._offer, self._offer_specs = deepcopy(tools), tuple(_spec_of(t) for t in tools)
        return self._offer_specs

    def _settings(self, run: ActiveRun, tools: list[dict[str, Any]]) -> ModelSettings:
        """This call's settings. A ``tool_choice`` naming a tool must name one offered to this
        call (else a clear error, before anything is sent: a server answers such a request
        with an error, llama-cpp-python's with HTTP 500); once the model has called it (any
        tool, for ``required``), the run's later calls leave ``tool_choice`` unset, so that
        the model can answer (as the OpenAI Agents SDK's ``reset_tool_choice`` does) instead
        of calling it until ``max_turns`` (docs/agent.md, "The model seam").

        Raises:
            ModelConfigError: the named tool is not offered to this call.
        """
        settings = run.model_settings
        choice = settings.tool_choice
        if choice is None or choice in ("auto", "none"):
            return settings
        if run.tool_choice_spent:
            return dataclasses.replace(settings, tool_choice=None)
        if choice == "required":
            return settings
        offered = [str(t["function"]["name"]) for t in tools]
        if choice in offered:
            return settings
        state = run.session
        if state.tool_manager.has_tool(choice):
            why = (
                f"the session has it, but a {state.context.permission_mode} session is not "
                "offered it (read-only sessions get only read-only tools; disabled tools none)"
            )
        else:
            why = "the session has no tool of that name (was its MCP server started?)"
        raise ModelConfigError(
            f"tool_choice {choice!r} names no tool offered to the model: {why}; offered: "
            f"{', '.join(offered) or 'no tools'}",
            hint=(
                "set tool_choice (sagents chat --tool-choice) to auto, or to the name of an "
                "offered tool (sagents tools lists a configuration's tools)"
            ),
        )

    def system(self, state: AgentSession, extra: str = "") -> list[dict[str, Any]]:
        parts = [self._agent.system_prompt] if self._agent.system_prompt else []
        if state.skills is not None:
            fragment = state.skills.system_prompt(max_tokens=_SKILLS_PROMPT_TOKENS)
            if fragment:
                parts.append(fragment)
        if extra:  # this request's workflow or skill
            parts.append(extra)
        return [{"role": "system", "content": "\n\n".join(parts)}] if parts else []

    async def _offered_tools(self, run: ActiveRun) -> list[dict[str, Any]]:
        """The session's tools for this turn: a read-only session is offered only read-only
        tools; disabled tools never; then the loop's own (skills, run_script). With
        suggestion on, only the picked, expanded and always-included ones of the session's
        (:mod:`sagents.agent._suggestion`)."""
        state = run.session
        kept = None
        if self._agent.suggestion is None:
            kept = _offer_key(run)
            offer = state.offer
            if kept is not None and offer is not None and offer[0] == kept:
                run.allowed_names = offer[2]
                return offer[1]
        allowed = allowed_tools(
            state.tool_manager, state.context.permission_mode, skip=run.extra_names
        )
        run.allowed_names = {a.name for a in allowed}
        own = (
            [t for t in run.extras.get_openai_tools() if t["function"]["name"] in run.extra_names]
            if run.extra_names  # none of the loop's own: no export to build each turn
            else []
        )
        if self._agent.suggestion is None:
            tools = [dict(a.exported) for a in allowed] + own
            if kept is not None:
                state.offer = (kept, tools, run.allowed_names)
            return tools
        picks = run.turns == 1 or self._agent.suggestion.when == "every_turn"
        query = (
            request_query(state.messages, every_turn=self._agent.suggestion.when == "every_turn")
            if picks
            else None
        )
        if query is not None and run.script_tool is not None:
            run.script_description = await relevant_description(run.script_tool, query)
        if run.script_description is not None:
            own = [with_script_description(t, run.script_description) for t in own]
        offered = await self._agent.suggestion.offered(state, allowed, own, query=query)
        choice = run.model_settings.tool_choice
        names = {t["function"]["name"] for t in offered}
        forced = [a for a in allowed if a.name == choice and a.name not in names]
        return offered + [dict(a.exported) for a in forced]  # the tool tool_choice names


def _offer_key(run: ActiveRun) -> tuple[object, ...] | None:
    """What a run's offer of tools depends on (without tool suggestion): the session's
    tools and whitelist (their revision), its permission mode and the loop's own tools of
    this run; None when a provider keeps no revision (the offer is then made anew for each
    model call).

    The session's offer is kept while this stays equal (``AgentSession.offer``): exporting
    and sorting out the session's tools for every model call was a measurable part of a tool
    turn, and grows with the tools a session has (bench/bench_agent_loop.py --calls)."""
    proxy = run.session.tool_manager
    revision = proxy.revision if type(proxy) is ToolProxy else None  # a subclass: not known
    if revision is None:
        return None
    own = None
    if run.own_tools is not None:  # this run's registry (not kept alive by the session)
        own = (weakref.ref(run.own_tools), run.own_tools.revision)
    mode = run.session.context.permission_mode
    return (proxy, revision, own, mode, frozenset(run.extra_names))


def _withheld(model: str, text: str) -> ModelError:
    """The error of an answer the provider's content filter withheld (Gemini's blocked prompt
    or ``SAFETY`` finish, Azure OpenAI's ``content_filter`` with no content) or stopped part way
    (``text``, what came before it: not the whole answer, so not the run's final answer): the
    same request would be filtered again."""
    details: dict[str, Any] = {"finish_reason": "content_filter"}
    if not text:
        what = "withheld the answer"
    else:
        what = f"stopped the answer after {len(text)} characters"
        details["answer"] = text
    return ModelError(
        f"the provider's content filter {what} of model {model!r} (finish reason content_filter)",
        hint="rephrase the request, or check the provider's safety settings",
        details=details,
    )


class _ModelCall:
    """One model call: its answer read piece by piece (:meth:`reader`, awaited through
    :meth:`ActiveRun.read_answer`: cancellable; the call's span current while it reads, when
    there is one), then :meth:`close` d; its answer :meth:`response`.

    Args:
        model: The model.
        request: What the call sends.
        span: The run's span, parent of the call's (None: no span).
    """

    def __init__(self, model: ChatModel, request: ModelRequest, span: Span | None) -> None:
        self._model = model
        self._finish: Finish | None = None
        self._span: Span | None = None
        if span is not None:  # a run without a span (no tracer provider) records none
            with attached(span):  # the model call's span a child of the run's
                self._span = model_span(model)
        self._stream = model.stream(request)

    def reader(self) -> Callable[[], Awaitable[MessageDeltaEvent | ReasoningDeltaEvent | None]]:
        """What reads the next piece to pass on (None at the stream's end): with the call's
        span current, when there is one (without, nothing entered per piece:
        bench/bench_agent_loop.py --calls). Not kept on the call: a bound method of its own
        would make the call a reference cycle, left for the garbage collector."""
        return self._next_shown if self._span is None else self._next_traced

    async def _next_shown(self) -> MessageDeltaEvent | ReasoningDeltaEvent | None:
        """The next piece to pass on, None at the stream's end. One read covers the events
        between (tool calls, usage, the finish): a read of their own each was a measurable
        part of a turn's CPU (bench/bench_agent_loop.py)."""
        while True:
            try:
                item = await anext(self._stream)
            except StopAsyncIteration:
                return None
            if isinstance(item, TextDelta):
                return MessageDeltaEvent(delta=item.text)
            if isinstance(item, ReasoningDelta):
                return ReasoningDeltaEvent(delta=item.text)
            if isinstance(item, Finish):
                self._finish = item
                end_model_span(self._span, item.response)

    async def _next_traced(self) -> MessageDeltaEvent | ReasoningDeltaEvent | None:
        with attached(self._span):  # the model call's span current while it is read
            return await self._next_shown()

    async def close(self) -> None:
        """Close the answer's stream (read to its end or not) and end the call's span."""
        await close_stream(self._stream)
        end_span(self._span)

    def response(self) -> ModelResponse:
        """The call's answer, once its stream ended.

        Raises:
            ModelError: the stream ended without a :class:`Finish`.
        """
        if self._finish is None:
            raise ModelError(
                f"the model {self._model.model!r} ended its answer without a finish",
                hint="a ChatModel's stream ends with one Finish event (docs/agent.md)",
            )
        return self._finish.response


class _FirstStep:
    """A run's steps, made when the first one is taken: a text turn takes none, and making
    the run's approver, questioner and compressor was a measurable part of a run's set-up
    (bench/bench_agent_loop.py --calls)."""

    def __init__(self, make: Callable[[], Callable[[], AbstractContextManager[None]]]) -> None:
        self._make = make
        self._step: Callable[[], AbstractContextManager[None]] | None = None

    def __call__(self) -> AbstractContextManager[None]:
        if self._step is None:
            self._step = self._make()
        return self._step()


def _count_usage(run: ActiveRun, usage: Usage) -> None:
    """Add one model call's tokens to the run's usage."""
    for key, value in (
        ("prompt_tokens", usage.prompt_tokens),
        ("completion_tokens", usage.completion_tokens),
    ):
        run.usage[key] = run.usage.get(key, 0) + value


def _spec_of(tool: Mapping[str, Any]) -> ToolSpec:
    """The offered tool (an OpenAI function export) as the seam's ``ToolSpec``: the name the
    model calls and the exported schema."""
    function = tool.get("function") or {}
    # a copy of the schema, not the offer's: the offer is kept for the run's later calls
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return ToolSpec(
        name=str(function.get("name") or ""),
        description=str(function.get("description") or ""),
        input_schema=deepcopy(dict(parameters)),
    )


def _usage_event(turn: int, usage: Usage, purpose: str) -> UsageEvent:
    return UsageEvent(
        turn=turn,
        purpose=purpose,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_tokens,
        reasoning_tokens=usage.reasoning_tokens,
    )
