"""``SAgent``: the agent loop on any OpenAI-compatible model (see ``docs/agent.md``).

One run: build the system prompt (the agent's, plus the session's skills fragment), send the
history and the session's tools, stream the answer, run its tool calls (concurrently, bounded,
results in call order), append the results, repeat until the model answers without tool calls
or ``max_turns`` model calls were made.

Every tool call is settled exactly once: each ``tool_call_id`` of an assistant message in the
history gets exactly one ``role: tool`` message, whatever happens (a tool error, an unknown tool,
invalid JSON arguments, a timeout, a denial, cancellation, ``max_turns``, the model's stream
breaking: an assistant message enters the history only once it is complete).

With ``approvals="defer"`` a call that needs a person is held instead of waited for: the run
ends as interrupted with a :class:`~sagents.agent.RunState`, and ``run(state=...)`` continues
it once, in any process (:mod:`sagents.agent._durable`; docs/agent.md, "Pausing and
resuming"). The history is kept as neutral :class:`~sagents.agent.Message` values.

The module is past the 800-line soft cap on purpose: the turn, the settling of its calls and
the pause and resume all read one ``ActiveRun`` and the agent's settings, and read best as one
story; what stands alone lives beside it (``_run``, ``_durable``, ``_state``, ``_store_link``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, AsyncExitStack, aclosing, contextmanager
from functools import partial
from typing import Any, Final

import anyio
import anyio.abc
from opentelemetry.trace import Span
from pydantic import ValidationError

from sagents.agent._chat_model import (
    ChatModel,
    Finish,
    ModelRequest,
    ModelSettings,
    ReasoningDelta,
    TextDelta,
    Usage,
    close_stream,
    usage_sink,
)
from sagents.agent._compress import CompressionSettings, HistoryCompressor
from sagents.agent._driver import in_task, relay
from sagents.agent._durable import (
    AnsweredQuestioner,
    Check,
    cancelled_result,
    check_call,
    check_resume,
    denied_result,
    request_event,
    restore_session,
    resume_into,
    session_document,
)
from sagents.agent._events import (
    AgentEvent,
    DoneEvent,
    DoneReason,
    MessageDeltaEvent,
    MessageEvent,
    ReasoningDeltaEvent,
    UsageEvent,
)
from sagents.agent._messages import Message, ToolCall, as_messages, as_openai_messages
from sagents.agent._model import model_from_string
from sagents.agent._output import DEFAULT_OUTPUT_RETRIES, OutputType
from sagents.agent._questions import EventQuestioner
from sagents.agent._run import (
    ActiveRun,
    EventApprover,
    RunCancelled,
    as_proxy,
    final_text,
    normalise_assistant,
    progress_hubs,
    settle_history,
    tool_message,
)
from sagents.agent._scripts import (
    offers_run_script,
    open_run_script,
    relevant_description,
    with_script_description,
)
from sagents.agent._session import AgentSession, current_agent_session
from sagents.agent._state import Approvals, Interruption, RunResult, RunState
from sagents.agent._store_link import StoreLink
from sagents.agent._suggest import DEFAULT_WORKFLOW_THRESHOLD, Workflow
from sagents.agent._suggestion import (
    SuggestWhen,
    ToolSuggester,
    ToolSuggestion,
    allowed_tools,
    check_suggest_when,
    expansion_result,
    request_query,
)
from sagents.agent._tracing import agent_span, end_model_span, model_span
from sagents.agent._workflows import WorkflowSelect, WorkflowSelection
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.core._tracing import attached, end_span, end_tool_span, record_error, tool_span
from sagents.errors import (
    ContextLengthError,
    ModelError,
    NotAllowedError,
    RunStateError,
    SagentsError,
    SkillError,
)
from sagents.script._session import RunScriptSettings
from sagents.skill._proxy import SkillSource
from sagents.skill._skill_tool import SkillTools
from sagents.store._protocols import AgentStore
from sagents.tool._approval import Approver, Decision
from sagents.tool._call import ToolRequest
from sagents.tool._context import SessionContext
from sagents.tool._expansion import EXPAND_TOOL_NAME, EXPAND_TOOL_SPEC, not_offered_result
from sagents.tool._handler import ToolCall as HandlerCall
from sagents.tool._provider import ToolProvider
from sagents.tool._tool_proxy import ToolProxy
from sagents.tool.questions import Questioner

__all__ = [
    "DEFAULT_MAX_PARALLEL_TOOLS",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MAX_TOOL_CALLS_PER_ANSWER",
    "DEFAULT_MAX_TURNS",
    "SAgent",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_TURNS = 20
"""Model calls one run may make."""

DEFAULT_MAX_PARALLEL_TOOLS = 8
"""Tool calls of one assistant message that run at the same time."""

DEFAULT_MAX_TOOL_CALLS_PER_ANSWER = 128
"""Tool calls of one assistant message that run at all; the rest are settled with an error."""

DEFAULT_MAX_SESSIONS = 1024
"""Sessions one agent keeps in memory; the least recently used past it are forgotten."""

_SKILLS_PROMPT_TOKENS: Final = 2000  # budget of the skills fragment of the system prompt
_CANCEL_GRACE_S: Final = 10.0  # seconds cancelled tools get to end before the run ends anyway
_TRUNCATED: Final = ToolResult.from_error(
    "output_truncated",
    "this call was not run: your answer was cut by the output token limit "
    "(finish_reason: length) before its tool calls were complete",
    hint="Make the call again with shorter arguments, or split the work into smaller calls.",
)


class SAgent:
    """An agent: a model, a system prompt and a loop.

    Args:
        model: The model: any :class:`~sagents.agent.ChatModel` (``OpenAIChatModel``, a
            ``ScriptedModel``'s ``chat_model()``, your own adapter), or a ``"provider:model"``
            string (``openai:gpt-4.1-mini``; a bare name means ``openai:``), built with the
            provider's usual variables (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``).
        model_settings: Settings of every model call (temperature, max tokens, parallel tool
            calls, tool choice), the same for every adapter.
        system_prompt: The agent's instructions (the session's skills fragment is added).
        max_turns: Model calls one run may make; reaching it ends the run with
            ``done(reason="max_turns")``, every call settled.
        max_parallel_tools: Tool calls of one answer that run at once.
        max_tool_calls_per_answer: Tool calls of one answer that run at all (each asked about
            as its permission says); the calls past it are not run and are settled with a
            ``too_many_tool_calls`` error that tells the model the limit.
        tool_timeout: Seconds one tool call may take; the tool layer's default when None.
        max_tool_result_tokens: Truncation of each tool result (the tool layer's default when
            None).
        run_script: Offer ``run_script`` when the session has MCP tools (and a sandbox starts).
        script_settings: run_script's limits.
        max_tools_per_turn: Turns tool suggestion on: each pick offers at most this many of
            the session's tools (plus the always-included and the loop's own tools, and
            ``tool_expand_tools``); None (the default) offers every allowed tool, for models
            that never call an expansion tool. See ``docs/agent.md``, "Tool suggestion".
        tool_suggestion: When the pick runs: ``first_turn`` of each request (default) or
            ``every_turn``.
        always_include_tools: Tool names offered in every turn when the session allows them.
        tool_suggester: The ranking: a ``ToolSelector`` (``sagents.agent._selectors`` has a
            model-call and an embeddings one) or a function ``(query, specs, k) -> names``
            (may be async); the offline ``sagents.agent.suggest_tools`` when None.
        workflows: The agent's workflows (``Workflow(name=, description=, steps=[...])``).
        workflow_select: Before the first turn of each request choose one of the workflows
            or the session's skills and put it into the system prompt: True or ``offline``
            (the offline ranking), ``model`` (one model call); False (default) never. See
            ``docs/agent.md``, "Workflow selection".
        workflow_threshold: The least offline score (0 to 1) that counts as a fit.
        name: A name for logs.
        max_history_tokens: When the next request (system prompt and history, counted
            offline) passes this many tokens, older turns are summarised first (see
            ``docs/agent.md``, "History compression"); None: only when the model calls
            ``compress_history``.
        compression: How the history is compressed (:class:`CompressionSettings`).
        store: Where paused runs (and, when given, sessions) live: None for the embedded
            SQLite store of the data directory (paused runs only); an opened store
            (``sagents.store.open_store``, shared by workers), its ``agents``, or an
            :class:`~sagents.store.AgentStore`; or a ``postgresql://`` URL (then enter the
            agent with ``async with``). With a store given, each run loads and saves its
            :class:`AgentSession` by ``session_id``. See ``docs/agent.md``, "Pausing and
            resuming".
        output_type: The final answer's type: a pydantic model, a ``TypedDict`` or a
            dataclass. Each adapter asks for its JSON Schema the provider's native way, the
            answer is validated into the type (``done.output``, ``RunResult.output``); see
            ``docs/agent.md``, "Structured output". None (default): free text.
        output_retries: Times an answer that does not fit ``output_type`` goes back to the
            model with the validation errors; past them the run ends with
            ``output_invalid``. Each retry is a model turn (``max_turns`` counts it).
        max_sessions: Sessions kept in memory (:meth:`session`); past it the least recently
            used is forgotten (a run without a ``session_context`` gets a new session each
            time). With a ``store`` given, a forgotten session is loaded from it again.
    """

    def __init__(
        self,
        *,
        model: ChatModel | str,
        system_prompt: str = "",
        model_settings: ModelSettings | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        max_parallel_tools: int = DEFAULT_MAX_PARALLEL_TOOLS,
        max_tool_calls_per_answer: int = DEFAULT_MAX_TOOL_CALLS_PER_ANSWER,
        tool_timeout: float | None = None,
        max_tool_result_tokens: int | None = None,
        run_script: bool = True,
        script_settings: RunScriptSettings | None = None,
        max_tools_per_turn: int | None = None,
        tool_suggestion: SuggestWhen = "first_turn",
        always_include_tools: Sequence[str] = (),
        tool_suggester: ToolSuggester | None = None,
        workflows: Sequence[Workflow] = (),
        workflow_select: WorkflowSelect = False,
        workflow_threshold: float = DEFAULT_WORKFLOW_THRESHOLD,
        name: str = "agent",
        max_history_tokens: int | None = None,
        compression: CompressionSettings | None = None,
        store: AgentStore | str | object | None = None,
        output_type: Any = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
    ) -> None:
        if max_history_tokens is not None and max_history_tokens < 1:
            raise ValueError(f"max_history_tokens must be positive, not {max_history_tokens!r}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, not {max_turns!r}")
        if max_parallel_tools < 1:
            raise ValueError(f"max_parallel_tools must be at least 1, not {max_parallel_tools!r}")
        if max_tool_calls_per_answer < 1:
            raise ValueError(
                f"max_tool_calls_per_answer must be at least 1, not {max_tool_calls_per_answer!r}"
            )
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, not {max_sessions!r}")
        if output_retries < 0:
            raise ValueError(f"output_retries must be 0 or more, not {output_retries!r}")
        check_suggest_when(tool_suggestion)  # also when suggestion is off: a typo says so
        self.output_type = output_type
        self.output_retries = output_retries
        self._output = None if output_type is None else OutputType(output_type)
        self.model: ChatModel = model_from_string(model) if isinstance(model, str) else model
        self.model_settings = model_settings or ModelSettings()
        self.system_prompt = system_prompt
        self.max_turns = max_turns
        self.max_parallel_tools = max_parallel_tools
        self.max_tool_calls_per_answer = max_tool_calls_per_answer
        self.tool_timeout = tool_timeout
        self.max_tool_result_tokens = max_tool_result_tokens
        self.run_script = run_script
        self.script_settings = script_settings
        self.suggestion = (
            None
            if max_tools_per_turn is None
            else ToolSuggestion(
                k=max_tools_per_turn,
                when=tool_suggestion,
                always_include=always_include_tools,
                suggester=tool_suggester,
            )
        )
        self.workflows = tuple(workflows)
        self.workflow_selection = (
            None
            if workflow_select is False
            else WorkflowSelection(
                workflows, how=workflow_select, threshold=workflow_threshold, model=self.model
            )
        )
        self.name = name
        self.max_history_tokens = max_history_tokens
        self.compression = compression or CompressionSettings()
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, AgentSession] = OrderedDict()  # least recent first
        self._runs: set[ActiveRun] = set()  # the runs in progress (cancel)
        self._link = StoreLink(store)

    # -- public API -----------------------------------------------------------------------------

    def session(self, session_id: str) -> AgentSession | None:
        """The state of session ``session_id``, once a run has used it."""
        return self._sessions.get(session_id)

    def forget(self, session_id: str) -> None:
        """Drop a session's state."""
        self._sessions.pop(session_id, None)

    async def __aenter__(self) -> SAgent:
        """Open the store a ``postgresql://`` URL names (closed by leaving the block)."""
        await self._link.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the store opened by ``async with``."""
        await self._link.close()

    @property
    def store(self) -> AgentStore:
        """Where this agent's paused runs and sessions live.

        Raises:
            RunStateError: a ``postgresql://`` store that was not opened (``async with``).
        """
        return self._link.store

    async def load_state(self, state_id: str) -> RunState | None:
        """The paused run ``state_id`` kept in the store (checked as
        :meth:`RunState.from_json` checks), or None when the store has none.

        Raises:
            RunStateError: see :meth:`RunState.from_json`.
            StoreError: the store failed.
        """
        document = await self.store.load_state(state_id)
        return None if document is None else RunState.from_json(document)

    async def load_session(self, session_id: str) -> AgentSession | None:
        """The session ``session_id``: with a store given, as the store holds it (another
        worker may have served its last request); else this agent's in memory; else None.

        Raises:
            RunStateError: a stored session of an unknown version or shape.
            StoreError: the store failed.
        """
        found = self._sessions.get(session_id)
        if not self._link.given:
            return found
        document = await self.store.load_session(session_id)
        if document is None:
            return found
        session = found or AgentSession(SessionContext(session_id=session_id), as_proxy(None))
        session.granted.update(restore_session(session, json.loads(document)))
        return session

    async def run(
        self,
        messages: Sequence[Message | Mapping[str, Any]] = (),
        *,
        tool_manager: ToolProvider | None = None,
        skill_manager: SkillSource | None = None,
        session_context: SessionContext | None = None,
        approver: Approver | None = None,
        questioner: Questioner | None = None,
        approvals: Approvals = "wait",
        state: RunState | None = None,
    ) -> RunResult:
        """Run the loop to its end (see :meth:`run_stream`, whose arguments these are).

        Returns:
            The :class:`RunResult`: ``interrupted`` with its ``state`` when the run paused.

        Raises:
            RunStateError: ``state`` was refused (see :meth:`run_stream`).
        """
        done: DoneEvent | None = None
        async with aclosing(
            self.run_stream(
                messages,
                tool_manager=tool_manager,
                skill_manager=skill_manager,
                session_context=session_context,
                approver=approver,
                questioner=questioner,
                approvals=approvals,
                state=state,
            )
        ) as events:
            async for event in events:
                if isinstance(event, DoneEvent):
                    done = event
        assert done is not None  # run_stream always ends with one
        if self._output is not None:
            output = done.output
        else:
            output = final_text(done.messages) if done.reason != "interrupted" else ""
        return RunResult(
            reason=done.reason,
            output=output,
            messages=done.messages,
            history=done.history,
            state=done.state,
            error=done.error,
            audit_status=done.audit_status,
            turns=done.turns,
        )

    def cancel(self) -> None:
        """Cancel every run of this agent in progress: each ends with ``done(cancelled)``."""
        for run in list(self._runs):
            run.cancel()

    async def run_stream(
        self,
        messages: Sequence[Message | Mapping[str, Any]] = (),
        *,
        tool_manager: ToolProvider | None = None,
        skill_manager: SkillSource | None = None,
        session_context: SessionContext | None = None,
        approver: Approver | None = None,
        session: AgentSession | None = None,
        questioner: Questioner | None = None,
        approvals: Approvals = "wait",
        state: RunState | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the loop and yield its events; the last one is always a :class:`DoneEvent`.

        Args:
            messages: The history so far, without the system prompt: :class:`Message` values
                or OpenAI-format chat messages (dicts), or both.
            tool_manager: The session's tools: a ``ToolProxy`` (used as it is, so a skill's
                ``allowed-tools`` narrows it) or a ``ToolManager`` (wrapped in one).
            skill_manager: The session's skills (a ``SkillProxy``), if any: adds
                ``load_skill``/``read_skill_file`` and the skills fragment of the prompt.
            session_context: Who calls, and the permission mode; ``ask`` in a new session
                when None.
            approver: Answers the approvals the mode asks for; without one they are refused.
            session: The state to use (agents as tools pass a fresh one); the agent's state of
                ``session_context.session_id`` when None.
            questioner: Answers the ``questionnaire`` tool's questions (besides the
                ``questionnaire.request`` event, which can be answered directly).
            approvals: ``wait`` (default): a call that needs a person waits for the
                approver or questioner. ``defer``: such calls are held, the answer's other
                calls run, and the run sends an ``approval.request`` or
                ``questionnaire.request`` event for each held call (its ``request_id`` the
                item's id; answer it on the state, not on the event) and ends with
                ``done(reason="interrupted", state=...)``.
            state: A paused run to continue (its items decided), instead of ``messages``;
                the run goes on deferring. Refused (:class:`~sagents.errors.RunStateError`,
                raised before any event) for another session or agent, with an item left
                undecided, or when it was resumed already.

        The run executes in a task this iterator owns. A consumer that stops iterating early
        should close the iterator (``contextlib.aclosing``) to stop the run at once; otherwise
        it stops when the iterator is garbage-collected. Runs on asyncio.
        """
        if approvals not in ("wait", "defer"):
            raise ValueError(f"approvals is 'wait' or 'defer', not {approvals!r}")
        if state is not None and messages:
            raise ValueError("pass either messages or a paused run's state, not both")
        context = session_context or SessionContext()
        paused = state
        if self._link.given and session is None:  # the store's is the latest (other workers)
            await self._load_stored(context, tool_manager, skill_manager, approver)
        agent_session = session or self._session_for(context, tool_manager, skill_manager, approver)
        agent_session.approver = approver if approver is not None else agent_session.approver
        agent_session.questioner = (
            questioner if questioner is not None else agent_session.questioner
        )
        if paused is not None:
            check_resume(paused, agent=self.name, context=context, proxy=agent_session.tool_manager)
            if not await self.store.claim_state(paused.state_id):
                raise RunStateError(
                    "this paused run was resumed already",
                    hint="each paused run continues once; load the session for what followed",
                    details={"reason": "claimed"},
                )
            resume_into(agent_session, paused)
        else:
            agent_session.history = settle_history(as_messages(messages))
        run = self._active_run(
            agent_session, defer=approvals == "defer" or paused is not None, resume=paused
        )
        sandbox = self._opens_sandbox(agent_session)
        # The run executes in this generator's task (the consumer's), with a task of its own
        # only for what needs one (sagents.agent._driver).
        events = self._run_events(run, sandbox=sandbox)
        ended = False
        try:
            async with aclosing(in_task(events) if sandbox else events) as running:
                async for event in running:
                    ended = ended or isinstance(event, DoneEvent)
                    yield event
        except Exception as failure:  # a bug in the loop: said, never raised
            logger.error("the agent loop failed", exc_info=failure)
            if ended:
                return
            settled = settle_history(agent_session.history)
            yield DoneEvent(
                reason="error",
                messages=tuple(as_openai_messages(settled)),
                audit_status=agent_session.audit_status.snapshot(),
                error=_internal(failure),
                history=tuple(settled),
            )

    def as_tool(
        self,
        name: str,
        description: str,
        *,
        tools: Sequence[str] = (),
    ) -> tuple[ToolSpec, Any]:
        """This agent as a tool another agent can call: ``(spec, handler)`` for
        ``ToolManager.register_tool``.

        The call's ``task`` becomes the first user message of a fresh history; the sub-agent
        runs with the caller's session context and approver, and sees only those of ``tools``
        that the caller may call (never more). The result is its final answer.

        Args:
            name: The tool's name.
            description: What the sub-agent does (the model reads it).
            tools: Names of the caller's tools the sub-agent may use.
        """
        spec = ToolSpec(
            name=name,
            description=description,
            input_schema={
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "What the agent should do."}
                },
                "required": ["task"],
                "additionalProperties": False,
            },
            permission="read_only",  # its own calls are asked about one by one
        )
        wanted = tuple(tools)

        async def handle(arguments: dict[str, Any], call: HandlerCall) -> ToolResult:
            caller = current_agent_session()
            if caller is None:
                return ToolResult.from_error(
                    "not_allowed",
                    f"agent tool {name!r} runs only inside an agent's run",
                    hint="call it from SAgent.run_stream",
                )
            parent = caller.tool_manager
            allowed = [n for n in wanted if parent.has_tool(n)]
            approver = caller.run_approver or caller.approver  # asks through the caller's run
            sub_proxy = ToolProxy(list(parent.tool_managers), available_tools=allowed)
            sub_context = dataclasses.replace(caller.context, agent=name)  # same session
            sub_session = AgentSession(sub_context, sub_proxy, approver=approver)
            done: DoneEvent | None = None
            async for event in self.run_stream(
                [{"role": "user", "content": str(arguments.get("task", ""))}],
                tool_manager=sub_proxy,
                session_context=sub_context,
                approver=approver,
                session=sub_session,
                questioner=call.session_context.questioner,  # asks through the caller's run
            ):
                if isinstance(event, DoneEvent):
                    done = event
            if done is None or done.reason != "stop":
                reason = "no answer" if done is None else done.reason
                return ToolResult.from_error(
                    "execution_error", f"agent {name!r} did not finish: {reason}"
                )
            return ToolResult.from_text(final_text(done.messages))

        return spec, handle

    # -- the loop -------------------------------------------------------------------------------

    def _session_for(
        self,
        context: SessionContext,
        tool_manager: ToolProvider | None,
        skills: SkillSource | None,
        approver: Approver | None,
    ) -> AgentSession:
        found = self._sessions.get(context.session_id)
        if found is not None:
            self._sessions.move_to_end(context.session_id)
        if found is not None and (
            tool_manager is None
            or tool_manager is found.tool_manager
            or any(tool_manager is held for held in found.tool_manager.tool_managers)
        ):
            found.context = context
            return found
        proxy = as_proxy(tool_manager)
        state = AgentSession(context, proxy, skill_source=skills, approver=approver)
        self._sessions[context.session_id] = state
        self._sessions.move_to_end(context.session_id)
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)  # a run still using it keeps its own reference
        return state

    async def _load_stored(
        self,
        context: SessionContext,
        tool_manager: ToolProvider | None,
        skills: SkillSource | None,
        approver: Approver | None,
    ) -> None:
        """Make the store's session ``context.session_id`` this agent's (a run of it may have
        been served by another worker)."""
        document = await self.store.load_session(context.session_id)
        if document is not None:
            session = self._session_for(context, tool_manager, skills, approver)
            session.granted.update(restore_session(session, json.loads(document)))

    async def _save(self, run: ActiveRun) -> None:
        """Keep what the run leaves in the store: its paused state, and (with a store given)
        the session. A store that fails is logged: the state is still in the done event."""
        session = run.session
        try:
            if run.paused is not None:
                await self.store.save_state(
                    run.paused.state_id, session.session_id, run.paused.to_json()
                )
            if self._link.given:
                document = session_document(session, run.granted())
                await self.store.save_session(session.session_id, json.dumps(document))
        except SagentsError as failure:  # StoreError, RunStateError (the key)
            logger.warning("the run's state was not stored: %s", failure)

    def _active_run(
        self, state: AgentSession, *, defer: bool, resume: RunState | None
    ) -> ActiveRun:
        approver = state.approver or state.tool_manager.approver
        hubs = progress_hubs(state.tool_manager)
        run = ActiveRun(session=state, approver=approver, hubs=hubs, defer=defer)
        if resume is not None:
            run.resume, run.turns, run.usage = resume, resume.turns, dict(resume.usage)
            run.system_extra = resume.system_extra
        return run

    def _opens_sandbox(self, state: AgentSession) -> bool:
        """Whether the run opens run_script's sandbox (which holds a task group for the whole
        run: the run then executes in a task of its own, :func:`in_task`)."""
        return (
            self.run_script
            and not state.tool_manager.has_tool("run_script")
            and offers_run_script(state.tool_manager)
        )

    async def _run_events(
        self, run: ActiveRun, *, sandbox: bool
    ) -> AsyncGenerator[AgentEvent, None]:
        """The run as events; always ends with one ``done`` (unless the consumer is gone).

        It holds no cancel scope, task group or context variable across a ``yield`` (each
        step, :attr:`ActiveRun.step`, enters them for its own awaits), so that the consumer's
        task can run it; only run_script's sandbox (``sandbox``) holds a task group for the
        whole run, and such a run is iterated in a task of its own (:func:`in_task`).
        """
        state = run.session
        reason: DoneReason = "stop"
        error: dict[str, Any] | None = None
        async with AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(run.extras)
                for hub in run.hubs:
                    queue = await stack.enter_async_context(hub.subscribe(state.session_id))
                    run.queues.append(queue)
                await self._prepare(run, stack, sandbox=sandbox)
            except SagentsError as failure:  # a sandbox or skill projection failed
                reason, error = "error", failure.to_dict()
            else:
                current = agent_span(self.model, state.session_id)
                run.step = self._steps(run, current)
                self._runs.add(run)
                try:
                    async for event in self._turn_events(run):
                        yield event
                    reason = run.reason
                except RunCancelled:
                    reason = "cancelled"
                except SagentsError as failure:  # the model endpoint failed
                    record_error(current, failure)
                    reason, error = "error", failure.to_dict()
                except Exception as failure:  # a bug: a clear error, not a raise
                    logger.exception("the agent loop failed")
                    record_error(current, failure)
                    reason, error = "error", _internal(failure)
                finally:
                    self._runs.discard(run)
                    end_span(current)
            paused = run.paused if reason == "interrupted" else None
            run.paused = paused
            with anyio.CancelScope(shield=True):
                await self._save(run)
            history = list(state.history)
            if paused is not None:  # the calls settled so far after the waiting answer
                history += [tool_message(i, c) for i, c in paused.settled.items()]
            for event in run.take():
                yield event
            yield DoneEvent(
                reason=reason,
                messages=tuple(as_openai_messages(history)),
                audit_status=state.audit_status.snapshot(),
                error=error,
                turns=run.turns,
                history=tuple(history),
                state=paused,
                output=run.output if reason == "stop" else None,
            )

    def _steps(
        self, run: ActiveRun, current: Span | None
    ) -> Callable[[], AbstractContextManager[None]]:
        """The run's :attr:`ActiveRun.step`: cancellable, with the run's approver, compressor,
        questioner, usage sink (the usage of every other model call of the run, from
        compression, tool and workflow selection, as ``usage`` events) and span."""
        state = run.session
        approver = EventApprover(run) if run.approver is not None else None
        questions = EventQuestioner(run, state.questioner)
        compressor = HistoryCompressor(
            run,
            model=self.model,
            budget=self.max_history_tokens,
            settings=self.compression,
            system=lambda session: self._system(session, run.system_extra),
        )

        async def report(purpose: str, usage: Usage) -> None:
            _count(run, usage)
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

    async def _turn_events(self, run: ActiveRun) -> AsyncGenerator[AgentEvent, None]:
        """The run's model turns and tool calls as events; why they ended in
        :attr:`ActiveRun.reason`.

        Raises:
            RunCancelled: the run was cancelled.
            SagentsError: the model endpoint failed; the answer did not fit ``output_type``.
        """
        state = run.session
        if run.resume is not None:
            async for event in relay(run, partial(self._resume_calls, run, run.resume)):
                yield event
            if run.resume.cancelled:
                run.reason = "cancelled"
                return
        elif self.workflow_selection is not None:
            with run.step():
                run.system_extra = await self.workflow_selection.select(run)
        while True:
            for event in run.take():
                yield event
            if run.turns >= self.max_turns:
                run.reason = "max_turns"
                return
            run.turns += 1
            with run.step():
                if state.run_compressor is not None:
                    await state.run_compressor.compress_if_over_budget()
                tools = await self._offered_tools(run)
            compressed = False
            while True:  # a request the model finds too long: compressed, sent once more
                try:
                    async for event in self._stream_turn(run, tools):
                        yield event
                    break
                except ContextLengthError:
                    if compressed or self.max_history_tokens is None:
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
            assert turn is not None  # set by _stream_turn
            message = normalise_assistant(turn.message)
            state.history.append(message)
            await run.emit(MessageEvent(message=message.to_openai()))
            if turn.usage is not None:
                _count(run, turn.usage)
                await run.emit(_usage_event(run.turns, turn.usage, "turn"))
            calls = message.tool_calls
            if not calls:
                if self._output is None:
                    run.reason = "stop"
                    return
                with run.step():
                    fits = await self._take_output(run, message)
                if fits:
                    run.reason = "stop"
                    return
                continue  # the answer did not fit output_type: asked again
            if turn.finish_reason == "length":  # cut by the output limit: run none of it
                refused = dict.fromkeys((c.id for c in calls), _TRUNCATED)
                offered: set[str] = set()
            else:
                cap = self.max_tool_calls_per_answer
                refused = dict.fromkeys((c.id for c in calls[cap:]), self._too_many(len(calls)))
                offered = {t["function"]["name"] for t in tools}
            work = partial(self._run_calls, run, calls, offered, refused=refused)
            async for event in relay(run, work):
                yield event
            if run.paused is not None:
                run.reason = "interrupted"
                return

    async def _take_output(self, run: ActiveRun, answer: Message) -> bool:
        """Validate a final answer into ``output_type`` (``run.output``): True when it fits;
        False when it went back to the model with the errors.

        Raises:
            OutputValidationError: it did not fit and the retries are spent.
        """
        assert self._output is not None
        try:
            run.output = self._output.validate(answer.text)
        except ValidationError as error:
            if run.output_retries >= self.output_retries:
                raise self._output.failure(error, answer.text, retries=run.output_retries) from None
            run.output_retries += 1
            retry = self._output.retry_message(error)
            run.session.history.append(retry)
            await run.emit(MessageEvent(message=retry.to_openai()))
            return False
        return True

    async def _stream_turn(
        self, run: ActiveRun, tools: list[dict[str, Any]]
    ) -> AsyncGenerator[AgentEvent, None]:
        """One model call, its text and reasoning passed on as they stream; its answer in
        :attr:`ActiveRun.response`. Each read of the stream is a step of its own (cancellable,
        the model call's span current): nothing is held across a ``yield``."""
        history = run.session.history
        lead = sum(1 for m in history if m.role == "system")
        if any(m.role != "system" for m in history[:lead]):
            lead = 0  # system messages inside the history stay where they are
        system = self._system(run.session, run.system_extra)
        prompts = [str(m.get("content") or "") for m in system] + [m.text for m in history[:lead]]
        call = ModelRequest(
            system_prompt="\n\n".join(prompts),
            messages=tuple(history[lead:]),
            tools=tuple(_spec_of(t) for t in tools),
            settings=self.model_settings,
            output=None if self._output is None else self._output.schema,
        )
        finish: Finish | None = None
        with run.step():  # the agent's span current: the model call's is its child
            current = model_span(self.model)
        stream = self.model.stream(call)
        try:
            while True:
                with run.cancellable(), attached(current):
                    try:
                        item = await anext(stream)
                    except StopAsyncIteration:
                        break
                if isinstance(item, TextDelta | ReasoningDelta):
                    if run.waiting():  # progress published meanwhile goes out first
                        for event in run.take():
                            yield event
                    if isinstance(item, TextDelta):
                        yield MessageDeltaEvent(delta=item.text)
                    else:
                        yield ReasoningDeltaEvent(delta=item.text)
                elif isinstance(item, Finish):
                    finish = item
                    end_model_span(current, item.response)
        finally:
            await close_stream(stream)
            end_span(current)
        if finish is None:
            raise ModelError(
                f"the model {self.model.model!r} ended its answer without a finish",
                hint="a ChatModel's stream ends with one Finish event (docs/agent.md)",
            )
        run.response = finish.response

    def _too_many(self, count: int) -> ToolResult:
        cap = self.max_tool_calls_per_answer
        return ToolResult.from_error(
            "too_many_tool_calls",
            f"this call was not run: the answer made {count} tool calls and at most {cap} of "
            "one answer run (SAgent max_tool_calls_per_answer)",
            hint=f"Make at most {cap} calls in one answer; repeat the ones you still need.",
        )

    async def _prepare(self, run: ActiveRun, stack: AsyncExitStack, *, sandbox: bool) -> None:
        """Session set-up before the first turn: run_script (when ``sandbox``: see
        :meth:`_opens_sandbox`), skills (``init_more``)."""
        state = run.session
        opened_sandbox = None
        if sandbox:
            opened = await open_run_script(
                stack,
                proxy=state.tool_manager,
                context=state.context_for_tools(),
                approver=EventApprover(run),
                hub=run.hubs[0],
                settings=self.script_settings,
            )
            if opened is not None:
                tool, opened_sandbox = opened
                # with suggestion, each pick puts its request's most relevant tools first
                run.extras.register_tool(tool.as_tool())
                run.extra_names.add("run_script")
                run.script_tool = tool
        await state.init_more(sandbox=opened_sandbox)
        restored, state.restored_skills = state.restored_skills, []
        for name in restored:  # loaded by a stored session or a paused run: loaded again
            if state.skills is None:
                break
            try:
                await state.skills.load(name)
            except SkillError as failure:
                logger.warning("skill %r of the stored session was not loaded: %s", name, failure)
        if state.skills is not None:
            skills = state.skills
            names = SkillTools(lambda _context: skills).register(run.extras)
            run.extra_names.update(n for n in names if not state.tool_manager.has_tool(n))
        if self.suggestion is not None:  # the protocol tool: the loop's own wins the name

            async def expand(arguments: dict[str, Any], call: HandlerCall) -> ToolResult:
                allowed = allowed_tools(
                    state.tool_manager, state.context.permission_mode, skip=run.extra_names
                )
                return expansion_result(state, arguments, allowed, own=run.extra_names)

            run.extras.register_tool((EXPAND_TOOL_SPEC, expand))
            run.extra_names.add(EXPAND_TOOL_NAME)

    def _system(self, state: AgentSession, extra: str = "") -> list[dict[str, Any]]:
        parts = [self.system_prompt] if self.system_prompt else []
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
        allowed = allowed_tools(
            state.tool_manager, state.context.permission_mode, skip=run.extra_names
        )
        run.allowed_names = {a.name for a in allowed}
        own = [t for t in run.extras.get_openai_tools() if t["function"]["name"] in run.extra_names]
        if self.suggestion is None:
            return [dict(a.exported) for a in allowed] + own
        picks = run.turns == 1 or self.suggestion.when == "every_turn"
        query = (
            request_query(state.messages, every_turn=self.suggestion.when == "every_turn")
            if picks
            else None
        )
        if query is not None and run.script_tool is not None:
            run.script_description = await relevant_description(run.script_tool, query)
        if run.script_description is not None:
            own = [with_script_description(t, run.script_description) for t in own]
        return await self.suggestion.offered(state, allowed, own, query=query)

    async def _run_calls(
        self,
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
        results = {call_id: self._content(result) for call_id, result in refused.items()}
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
                jobs[call.id] = partial(self._run_call, run, call, offered, check.decision)
        await self._settle(run, calls, results, jobs, hold=bool(held))
        for item in held:
            await run.emit(request_event(item, state.session_id, run.hubs[0].clock.time()))
        if held:
            run.paused = RunState(
                agent=self.name,
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
            )

    async def _resume_calls(self, run: ActiveRun, paused: RunState) -> None:
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
                results[item.id] = self._content(cancelled_result(resolution.reason))
            elif resolution.answer == "deny":
                results[item.id] = self._content(denied_result(item, resolution.reason))
            elif resolution.questionnaire is not None:
                jobs[item.id] = partial(
                    self._run_answered, run, call, AnsweredQuestioner(resolution.questionnaire)
                )
            elif resolution.answer is not None:
                if resolution.answer == "allow_session":
                    state.granted.add(item.tool_name)
                decision = Decision.from_answer(resolution.answer, {item.tool_name})
                jobs[item.id] = partial(self._run_call, run, call, None, decision)
        await self._settle(run, calls, results, jobs)

    async def _run_answered(
        self, run: ActiveRun, call: ToolCall, questioner: AnsweredQuestioner
    ) -> ToolResult:
        return await self._run_call(run, call, None, None, questioner=questioner)

    async def _settle(
        self,
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
        limiter = anyio.CapacityLimiter(self.max_parallel_tools)

        async def one(call_id: str, job: Callable[[], Awaitable[ToolResult]]) -> None:
            async with limiter:
                result = await job()
            results[call_id] = self._content(result)

        finished = False
        try:
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
                        content = self._content(
                            ToolResult.from_error(
                                "cancelled", "the call was cancelled before it finished"
                            )
                        )
                    message = tool_message(call.id, content)
                    state.history.append(message)
                    settled.append(message)
                with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_GRACE_S):
                    for message in settled:
                        await run.emit(MessageEvent(message=message.to_openai()))

    async def _run_call(
        self,
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
        context = state.context_for_tools(questioner=questioner)
        if offered is not None and name not in offered:
            if name in run.allowed_names and self.suggestion is not None:
                return not_offered_result(name)  # allowed, but not offered: expand it first
            error = NotAllowedError(
                f"tool {name!r} is not offered in this session",
                hint="Call one of the tools you were given.",
                details={"name": name},
            )
            if not state.tool_manager.has_tool(name) and name not in run.extra_names:
                return ToolResult.from_error(
                    "unknown_tool", f"no tool named {name!r}", hint=error.hint
                )
            return ToolResult.from_exception(error)
        with tool_span(name, call_id=call.id, arguments=arguments) as current:
            result = await self._call(run, call, context, decision)
            end_tool_span(current, result.error.code if result.error else "ok", result.text)
        return result

    async def _call(
        self, run: ActiveRun, call: ToolCall, context: SessionContext, decision: Decision | None
    ) -> ToolResult:
        # A failed call is already its result (ToolManager.run_tool, the one boundary).
        if call.name in run.extra_names:
            return await run.extras.run_tool(
                call.name, call.arguments, context, tool_call_id=call.id, timeout=self.tool_timeout
            )
        if decision is not None:  # decided here: the proxy honours it and never asks
            context = dataclasses.replace(context, decision=decision)
        request = ToolRequest(
            name=call.name,
            arguments=call.arguments,
            session_context=context,
            tool_call_id=call.id,
            timeout=self.tool_timeout,
            approver=EventApprover(run) if run.approver is not None else None,
        )
        return await run.session.tool_manager.call(request)

    def _content(self, result: ToolResult) -> str:
        return result.to_tool_message(max_tokens=self.max_tool_result_tokens)


def _count(run: ActiveRun, usage: Usage) -> None:
    """Add one model call's tokens to the run's usage."""
    for key, value in (
        ("prompt_tokens", usage.prompt_tokens),
        ("completion_tokens", usage.completion_tokens),
    ):
        run.usage[key] = run.usage.get(key, 0) + value


def _internal(failure: BaseException) -> dict[str, Any]:
    return SagentsError(
        f"the agent loop failed: {failure!r}",
        hint="this is a bug in sagents: report it with the log; the history is settled",
    ).to_dict()


def _spec_of(tool: Mapping[str, Any]) -> ToolSpec:
    """The offered tool (an OpenAI function export) as the seam's ``ToolSpec``: the name the
    model calls and the exported schema."""
    function = tool.get("function") or {}
    return ToolSpec(
        name=str(function.get("name") or ""),
        description=str(function.get("description") or ""),
        input_schema=dict(function.get("parameters") or {"type": "object", "properties": {}}),
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
