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

Here: the agent's API, its sessions and store, and one run's set-up and end. Beside it: the
turns (``_turns``), the settling of one answer's calls (``_calls``), where a run executes
(``_driver``: in the consumer's task, a batch of tool calls in a task of its own), the run's
state (``_run``), pausing and resuming (``_durable``, ``_state``, ``_store_link``).

It runs past 800 lines on purpose: a quarter is docstrings, most of them the public API's
(``SAgent``'s arguments, ``run``/``run_stream``), which docs/api.md is made from; the rest keeps
a run's order (claim the session, load it, run, save, give it back) readable in one place.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import AsyncExitStack, aclosing, nullcontext
from typing import Any

import anyio
import anyio.abc

from sagents.agent._chat_model import (
    ChatModel,
    ModelSettings,
    model_settings_of,
    override_settings,
)
from sagents.agent._compress import CompressionSettings
from sagents.agent._driver import in_task, listen, unlisten
from sagents.agent._durable import (
    check_resume,
    restore_session,
    resume_into,
    session_document,
)
from sagents.agent._events import (
    AgentEvent,
    DoneEvent,
    DoneReason,
)
from sagents.agent._messages import Message, as_messages, as_openai_messages
from sagents.agent._model import model_from_string
from sagents.agent._output import DEFAULT_OUTPUT_RETRIES, OutputType
from sagents.agent._run import (
    ActiveRun,
    EventApprover,
    RunCancelled,
    as_proxy,
    final_text,
    running_loop,
    settle_history,
    tool_message,
)
from sagents.agent._scripts import (
    offers_run_script,
    open_run_script,
)
from sagents.agent._session import AgentSession, AuditStatus, session_of
from sagents.agent._state import Approvals, RunResult, RunState
from sagents.agent._store_link import StoreLink
from sagents.agent._suggest import DEFAULT_WORKFLOW_THRESHOLD, Workflow
from sagents.agent._suggestion import (
    SuggestWhen,
    ToolSuggester,
    ToolSuggestion,
    allowed_tools,
    check_suggest_when,
    expansion_result,
)
from sagents.agent._tracing import agent_span
from sagents.agent._turns import Turns
from sagents.agent._workflows import WorkflowSelect, WorkflowSelection
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.core._tracing import end_span, record_error
from sagents.errors import (
    RunInProgressError,
    RunStateError,
    SagentsError,
    SkillError,
    StoreError,
)
from sagents.script._session import RunScriptSettings
from sagents.skill._proxy import SkillSource
from sagents.skill._skill_tool import SkillTools
from sagents.store._protocols import AgentStore
from sagents.tool._approval import Approver, check_approver
from sagents.tool._context import SessionContext
from sagents.tool._expansion import EXPAND_TOOL_NAME, EXPAND_TOOL_SPEC
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


class SAgent:
    """An agent: a model, a system prompt and a loop.

    Args:
        model: The model: any :class:`~sagents.agent.ChatModel` (``OpenAIChatModel``, a
            ``ScriptedModel``'s ``chat_model()``, your own adapter), or a ``"provider:model"``
            string (``openai:gpt-4.1-mini``; a bare name means ``openai:``), built with the
            provider's usual variables (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``).
        model_settings: Settings of every model call (temperature, max tokens, parallel tool
            calls, tool choice), the same for every adapter: a ``ModelSettings`` or a mapping
            of its fields (a key that is none is a ``TypeError``).
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
            time). With a ``store`` given, a forgotten session is loaded from it again, and
            at most as many sessions the store did not keep are held for their next save.
    """

    def __init__(
        self,
        *,
        model: ChatModel | str,
        system_prompt: str = "",
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
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
        self._turns = Turns(self, self._output)
        self.model: ChatModel = model_from_string(model) if isinstance(model, str) else model
        self.model_settings = model_settings_of(model_settings)
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
        self._cancels = 0  # cancel() calls so far: a run set up meanwhile starts cancelled
        self._runs_lock = threading.Lock()  # both, for cancel() from any thread
        self._claims: dict[AgentSession, object] = {}  # the sessions a run holds (_claim)
        self._link = StoreLink(store, max_unsaved=max_sessions)

    # -- public API -----------------------------------------------------------------------------

    def session(self, session_id: str) -> AgentSession | None:
        """The state of session ``session_id``, once a run has used it."""
        return self._sessions.get(session_id)

    def forget(self, session_id: str) -> None:
        """Drop a session's state (one the store did not keep is still saved before the
        session's next run: docs/agent.md, "Pausing and resuming")."""
        self._sessions.pop(session_id, None)

    async def __aenter__(self) -> SAgent:
        """Open the store a ``postgresql://`` URL names (closed by leaving the block)."""
        await self._link.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Save the sessions the store did not keep (each one it still refuses is logged at
        ERROR, never raised), then close the store opened by ``async with``."""
        try:
            await self._link.save_all_unsaved()
        finally:
            await self._link.close()

    @property
    def unsaved_sessions(self) -> tuple[str, ...]:
        """The ids of the sessions whose last save the store refused, held in this process
        until they are saved (docs/agent.md, "Pausing and resuming")."""
        return self._link.unsaved

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
        worker may have served its last request) once this agent's copy that the store did
        not keep is saved, unless a run of it is in progress here (then that run's); else
        this agent's in memory; else None.

        Raises:
            RunStateError: a stored session of an unknown version or shape.
            StoreError: the store failed (never for a session whose run is in progress here:
                the store is not read for it).
        """
        found = self._sessions.get(session_id)
        if not self._link.given or found in self._claims:  # a run's, in progress: the latest
            return found
        await self._link.save_unsaved(session_id)  # this process's copy, if the latest
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
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run the loop to its end (see :meth:`run_stream`, whose arguments these are).

        Returns:
            The :class:`RunResult`: ``interrupted`` with its ``state`` when the run paused.

        Raises:
            RunStateError: ``state`` was refused (see :meth:`run_stream`).
            RunInProgressError: the session has a run in progress (see :meth:`run_stream`).
            TypeError: ``approver`` is no :class:`~sagents.tool.Approver` (see
                :meth:`run_stream`).
        """
        check_approver(approver, "SAgent.run")
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
                model_settings=model_settings,
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
        """Cancel every run of this agent in progress: each ends with ``done(cancelled)``
        (a run still being set up, too: it asks the model nothing).

        Safe from any thread (a UI thread, a thread that waits for signals, a sync web
        framework's handler): a run is cancelled in its event loop's thread, at once when
        called there, else soon after this returns (docs/agent.md, "Cancellation")."""
        with self._runs_lock:
            self._cancels += 1
            runs = list(self._runs)
        for run in runs:
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
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the loop and yield its events; the last one is always a :class:`DoneEvent`.

        Args:
            messages: The history so far, without the system prompt: :class:`Message` values
                or OpenAI-format chat messages (dicts), or both; an item that is neither is
                refused with a ``ValueError`` naming it (``messages[3]: ...``), before any
                event.
            tool_manager: The session's tools: a ``ToolProxy`` (used as it is, so a skill's
                ``allowed-tools`` narrows it) or a ``ToolManager`` (wrapped in one).
            skill_manager: The session's skills (a ``SkillProxy``), if any: adds
                ``load_skill``/``read_skill_file`` and the skills fragment of the prompt.
            session_context: Who calls, and the permission mode; ``ask`` in a new session
                when None.
            approver: Answers the approvals the mode asks for; without one they are refused.
                One that is no :class:`~sagents.tool.Approver` (no ``approve`` method: a plain
                function, say) is refused with a ``TypeError``, raised before any event.
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
            model_settings: This run's model settings (a ``ModelSettings`` or a mapping of
                its fields): each field set here replaces the agent's (``SAgent(model_settings
                =...)``) for every model call of this run; the fields left None keep the
                agent's. A key that is no field is a ``TypeError``, a value no provider takes
                a ``ValueError``, raised before any event. A resumed run (``state``) takes
                what its resume passes, not what the paused run had.

        The run executes in the task iterating this iterator (a batch of tool calls, and a run
        that opens run_script's sandbox, in a task the iterator owns). A consumer that stops
        iterating early should close the iterator (``contextlib.aclosing``) to stop the run at
        once; otherwise it stops when the iterator is garbage-collected. Runs on asyncio: on
        another event loop, raises ``RuntimeError`` before any event.

        One session runs one run at a time (its history is one conversation, and each run's
        approvals and questions go to that run's approver and questioner): a run started on
        a session whose run has not ended yet (its ``done`` event not sent, its iterator not
        closed) raises :class:`~sagents.errors.RunInProgressError` before any event. A run
        with ``session`` given (an agent used as a tool) holds that state only.
        """
        if approvals not in ("wait", "defer"):
            raise ValueError(f"approvals is 'wait' or 'defer', not {approvals!r}")
        check_approver(approver, "SAgent.run_stream")
        running_loop()  # on another event loop, say so here rather than fail mid-run as a bug
        settings = self.model_settings
        if model_settings is not None:
            settings = override_settings(settings, model_settings_of(model_settings))
        if state is not None and messages:
            raise ValueError("pass either messages or a paused run's state, not both")
        cancels = self._cancels  # a cancel() from here on cancels this run (_run_events)
        context = session_context or SessionContext()
        paused = state
        try:
            if self._link.given and session is None:  # the store's is the latest (other workers)
                await self._load_stored(context, tool_manager, skill_manager, approver)
        except StoreError as failure:  # out of reach: a state of the run, never a raise
            yield _store_failed(failure, messages, paused)
            return
        agent_session = session or self._session_for(context, tool_manager, skill_manager, approver)
        ticket = self._claim(agent_session)  # one run at a time: else RunInProgressError
        try:
            agent_session.approver = approver if approver is not None else agent_session.approver
            agent_session.questioner = (
                questioner if questioner is not None else agent_session.questioner
            )
            if paused is not None:
                check_resume(
                    paused, agent=self.name, context=context, proxy=agent_session.tool_manager
                )
                try:
                    claimed = await self.store.claim_state(paused.state_id)
                except StoreError as failure:  # nothing claimed: the resume may be tried again
                    yield _store_failed(failure, messages, paused)
                    return
                if not claimed:
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
            run.model_settings, run.own_session = settings, session is None
            sandbox = self._opens_sandbox(agent_session)
            # The run executes in this generator's task (the consumer's), with a task of its own
            # only for what needs one (sagents.agent._driver).
            events = self._run_events(run, sandbox=sandbox, cancels=cancels, ticket=ticket)
            last: AgentEvent | None = None
            try:
                async with aclosing(in_task(events) if sandbox else events) as running:
                    async for event in running:
                        # the done is the last event: no isinstance per streamed piece
                        # (bench/bench_agent_loop.py --calls)
                        last = event
                        yield event
            except Exception as failure:  # a bug in the loop: said, never raised
                logger.error("the agent loop failed", exc_info=failure)
                if isinstance(last, DoneEvent):
                    return
                settled = settle_history(agent_session.history)
                self._release(agent_session, ticket)  # ended: a next run may start
                yield DoneEvent(
                    reason="error",
                    messages=tuple(as_openai_messages(settled)),
                    audit_status=agent_session.audit_status.snapshot(),
                    error=_internal(failure),
                    history=tuple(settled),
                )
        finally:
            self._release(agent_session, ticket)

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
            caller = session_of(call.session_context)  # the run that calls this tool
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
        if found is not None and found in self._claims:
            return found  # a run holds it: _claim refuses the new run, which changes nothing
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
        been served by another worker), once a copy of this process the store did not keep
        is stored."""
        await self._link.save_unsaved(context.session_id)
        document = await self.store.load_session(context.session_id)
        if document is not None:
            session = self._session_for(context, tool_manager, skills, approver)
            if session not in self._claims:  # else a run holds it, and _claim refuses this one
                session.granted.update(restore_session(session, json.loads(document)))

    async def _save(self, run: ActiveRun) -> SagentsError | None:
        """Keep what the run leaves in the store: its paused state, and (with a store given)
        the session. Returns the store's failure, if any: the state is still in the done
        event, and a session not kept is saved again before its next run (``StoreLink``)."""
        session = run.session
        failure: SagentsError | None = None
        if run.paused is not None:
            try:
                await self.store.save_state(
                    run.paused.state_id, session.session_id, run.paused.to_json()
                )
            except SagentsError as error:  # StoreError, RunStateError (the key)
                failure = error
        if self._link.given and run.own_session:
            document = json.dumps(session_document(session, run.granted()))
            try:
                await self._link.save_session(session.session_id, document)
            except SagentsError as error:  # StoreError, RunStateError (a URL store not open)
                failure = failure or error
        if failure is not None:
            logger.warning("the run's state was not stored: %s", failure)
        return failure

    def _active_run(
        self, state: AgentSession, *, defer: bool, resume: RunState | None
    ) -> ActiveRun:
        approver = state.approver or state.tool_manager.approver
        run = ActiveRun(session=state, approver=approver, loop=running_loop(), defer=defer)
        if resume is not None:
            run.resume, run.turns, run.usage = resume, resume.turns, dict(resume.usage)
            run.system_extra = resume.system_extra
            run.tool_choice_spent = resume.tool_choice_spent
            run.output_retries = resume.output_retries
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
        self, run: ActiveRun, *, sandbox: bool, cancels: int, ticket: object
    ) -> AsyncGenerator[AgentEvent, None]:
        """The run as events; always ends with one ``done`` (unless the consumer is gone).

        It holds no cancel scope, task group or context variable across a ``yield`` (each
        step, :attr:`ActiveRun.step`, enters them for its own awaits), so that the consumer's
        task can run it; only run_script's sandbox (``sandbox``) holds a task group for the
        whole run, and such a run is iterated in a task of its own (:func:`in_task`).
        It is one of the agent's runs (:meth:`cancel`) from its set-up on; ``cancels``:
        :meth:`cancel`'s calls when ``run_stream`` was called (one since cancels it);
        ``ticket``: its claim on the session (:meth:`_claim`), given back before the ``done``
        event goes out, so that a consumer that stops at it may start the session's next run.
        """
        state = run.session
        reason: DoneReason = "stop"
        error: dict[str, Any] | None = None
        with self._runs_lock:
            self._runs.add(run)
            cancelled = self._cancels != cancels  # before it was one of the agent's runs
        if cancelled:
            run.cancel()
        async with AsyncExitStack() as stack:
            stack.callback(self._forget_run, run)  # also when the set-up failed
            try:
                stack.callback(unlisten, run)  # the run's progress queues, once registered
                if sandbox:  # run_script's progress, from its start (else: the first batch)
                    listen(run)
                await self._prepare(run, stack, sandbox=sandbox)
            except SagentsError as failure:  # a sandbox or skill projection failed
                reason, error = "error", failure.to_dict()
            else:
                current = run.span = agent_span(self.model, state.session_id)
                run.step = self._turns.steps(run, current)
                try:
                    async with aclosing(self._turns.events(run)) as turns:
                        async for event in turns:
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
                except BaseException:  # the consumer left (closed the iterator, was cancelled)
                    if run.paused is not None:  # after the pause: its state is kept all the same
                        with anyio.CancelScope(shield=True):
                            await self._save(run)
                    else:  # also at an answer whose calls have not started: never answered
                        state.history = settle_history(state.history)
                    raise
                finally:
                    self._forget_run(run)
                    run.step = nullcontext  # its steps refer to the run: no cycle left behind
                    end_span(current)
            paused = run.paused  # a run that paused ends with its state, whatever came after
            if paused is not None and reason == "cancelled":  # a cancel past the pause
                reason = "interrupted"
            if paused is not None or (self._link.given and run.own_session):  # to keep
                with anyio.CancelScope(shield=True):
                    unsaved = await self._save(run)
                if unsaved is not None and error is None:  # answered: the caller is told too
                    error = unsaved.to_dict()
            history = list(state.history)
            if paused is not None:  # the calls settled so far after the waiting answer
                history += [tool_message(i, c) for i, c in paused.settled.items()]
            for event in run.take():
                yield event
            self._release(state, ticket)  # ended: a next run may start
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

    def _claim(self, session: AgentSession) -> object:
        """Claim ``session`` for a run: a ticket for :meth:`_release`.

        Raises:
            RunInProgressError: a run of the session is in progress (one at a time: the
                session's history is one conversation, which two runs would write at once).
        """
        if session in self._claims:
            raise RunInProgressError(
                f"session {session.session_id!r} has a run in progress: a session runs one "
                "run at a time",
                hint="wait for its done event (or end it: SAgent.cancel(), or close its "
                "iterator) before starting the next; runs at the same time need a session "
                "each (SessionContext(session_id=...))",
                details={"session_id": session.session_id},
            )
        ticket = self._claims[session] = object()
        return ticket

    def _release(self, session: AgentSession, ticket: object) -> None:
        """Give back the claim ``ticket`` on ``session``, if it still holds it."""
        if self._claims.get(session) is ticket:
            del self._claims[session]

    def _forget_run(self, run: ActiveRun) -> None:
        """The run is no longer one :meth:`cancel` cancels."""
        with self._runs_lock:
            self._runs.discard(run)

    async def _prepare(self, run: ActiveRun, stack: AsyncExitStack, *, sandbox: bool) -> None:
        """Session set-up before the first turn: run_script (when ``sandbox``: see
        :meth:`_opens_sandbox`), skills (``init_more``); the loop's own tools (in
        :attr:`ActiveRun.extras`, entered into ``stack`` only when it was made: a run
        without any enters none, bench/bench_agent_loop.py --calls)."""
        try:
            await self._own_tools(run, stack, sandbox=sandbox)
        finally:
            if run.own_tools is not None:
                await stack.enter_async_context(run.own_tools)

    async def _own_tools(self, run: ActiveRun, stack: AsyncExitStack, *, sandbox: bool) -> None:
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


def _store_failed(
    failure: StoreError,
    messages: Sequence[Message | Mapping[str, Any]],
    paused: RunState | None,
) -> DoneEvent:
    """The end of a run that could not start: its session or paused run is in a store that
    failed (nothing was sent to the model, nothing claimed; the same run may be tried again)."""
    history = settle_history(paused.history if paused is not None else as_messages(messages))
    audit = AuditStatus(paused.audit_status if paused is not None else {})
    return DoneEvent(
        reason="error",
        messages=tuple(as_openai_messages(history)),
        audit_status=audit.snapshot(),
        error=failure.to_dict(),
        history=tuple(history),
    )


def _internal(failure: BaseException) -> dict[str, Any]:
    return SagentsError(
        f"the agent loop failed: {failure!r}",
        hint="this is a bug in sagents: report it with the log; the history is settled",
    ).to_dict()
