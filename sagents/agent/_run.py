"""The state of one ``SAgent.run_stream`` run and the loop's small helpers (see
:mod:`sagents.agent._loop`)."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext, suppress
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
from opentelemetry.trace import Span

from sagents.agent._chat_model import ModelResponse, ModelSettings
from sagents.agent._events import AgentEvent, DoneReason
from sagents.agent._messages import Message, Part, ToolCall, ToolResultPart, new_call_id
from sagents.agent._session import AgentSession
from sagents.agent._state import RunState
from sagents.core.events import ApprovalRequestEvent, ApprovalResultEvent
from sagents.errors import ConsumerLaggedError, NotAllowedError
from sagents.progress._hub import ProgressHub, default_hub
from sagents.progress._queue import EventQueue
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest, Approver, settle_answer
from sagents.tool._provider import ToolProvider
from sagents.tool._tool_proxy import ToolProxy
from sagents.tool.tool_manager import ToolManager

if TYPE_CHECKING:
    from sagents.script._session import RunScriptTool

__all__ = [
    "EVENT_BUFFER",
    "ActiveRun",
    "EventApprover",
    "RunCancelled",
    "answered_call",
    "approval_message",
    "as_proxy",
    "final_text",
    "new_call_id",
    "normalise_assistant",
    "progress_hubs",
    "running_loop",
    "settle_history",
    "tool_message",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

EVENT_BUFFER: Final = 256  # events waiting for a slow consumer before a batch of calls waits


class RunCancelled(Exception):
    """The run was cancelled (:meth:`ActiveRun.cancel`, ``SAgent.cancel``): it ends with
    ``done(reason="cancelled")``."""


class _Cancellable:
    """The block of :meth:`ActiveRun.cancellable`: a cancel scope the run's :meth:`cancel`
    reaches. A class, not a generator context manager: the generator's own calls were a
    measurable part of a turn's CPU (bench/bench_agent_loop.py)."""

    __slots__ = ("_run", "_scope")

    def __init__(self, run: ActiveRun) -> None:
        self._run = run
        self._scope = anyio.CancelScope()

    def __enter__(self) -> None:
        if self._run.cancelled:
            self._scope.cancel()
        self._run.scopes.add(self._scope)
        self._scope.__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        try:
            swallowed = self._scope.__exit__(kind, error, traceback)
        finally:
            self._run.scopes.discard(self._scope)
        if self._scope.cancelled_caught:
            raise RunCancelled from None
        return bool(swallowed)


@dataclass(kw_only=True, eq=False)
class ActiveRun:
    """The state of one ``run_stream`` call.

    Its events wait in :attr:`outbox` for the task iterating the run to take them
    (:meth:`take`); while a batch of tool calls runs in a task of its own, :attr:`bell` tells
    that task when they come (:mod:`sagents.agent._driver`).
    """

    session: AgentSession
    approver: Approver | None
    loop: asyncio.AbstractEventLoop
    """The event loop the run executes on (:meth:`cancel` from another thread goes there)."""
    found_hubs: list[ProgressHub] | None = None
    """The progress hubs of the session's tools (:attr:`hubs`), once found."""
    own_tools: ToolManager | None = None
    """The registry of the loop's own tools of this run (:attr:`extras`), once made."""
    extra_names: set[str] = field(default_factory=set)
    allowed_names: set[str] = field(default_factory=set)
    """The session's allowed tools this turn, as the model names them (tool suggestion)."""
    system_extra: str = ""
    """This request's part of the system prompt (the chosen workflow or skill)."""
    script_tool: RunScriptTool | None = None
    """The session's run_script, when it is offered."""
    script_description: str | None = None
    """run_script's description as this request's pick ranked it (tool suggestion); None: as
    registered."""
    queues: list[EventQueue] = field(default_factory=list)
    outbox: list[AgentEvent] = field(default_factory=list)
    """Events emitted, waiting for the iterating task to take them (:meth:`take`)."""
    bell: asyncio.Event | None = None
    """Set while a batch of tool calls runs in a task of its own: rung when events wait, so
    that the iterating task takes them as they come (:func:`~sagents.agent._driver.relay`)."""
    rung: bool = False
    """Progress was offered to the run's queues since :meth:`take` last read them
    (:meth:`ring`)."""
    room: anyio.Event | None = None
    """What a batch waits on while :data:`EVENT_BUFFER` events wait for a slow consumer."""
    cancelled: bool = False
    """:meth:`cancel` was called: the run ends as cancelled at its next step."""
    scopes: set[anyio.CancelScope] = field(default_factory=set)
    """The cancel scopes of the steps the run awaits now (:meth:`cancellable`)."""
    reader: asyncio.Task[Any] | None = None
    """The task awaiting a read of a model's answer now, if any (:meth:`read_answer`: one at
    a time)."""
    reads: int = 0
    """Reads of the model's answers so far: which read a :meth:`cancel` meant."""
    read_cancelled: bool = False
    """:meth:`cancel` cancelled the read under way (its task's cancellation, to be told from
    one from outside)."""
    turns: int = 0
    own_session: bool = True
    """The session is the agent's own, not one ``run_stream(session=...)`` handed in (an agent
    tool's fresh one for each call): only the agent's own are kept in its store."""
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    """The settings of this run's model calls: the agent's, with the run's own over them."""
    tool_choice_spent: bool = False
    """The model called the tool that ``tool_choice`` names: later calls leave it unset."""
    defer: bool = False
    """``approvals="defer"``: a call that needs a person pauses the run (:attr:`paused`)."""
    resume: RunState | None = None
    """The paused run this run continues, if any."""
    paused: RunState | None = None
    """Set when the run paused: what it waits for."""
    usage: dict[str, int] = field(default_factory=dict)
    """Tokens of the run's model turns so far (``prompt_tokens``, ``completion_tokens``)."""
    output: Any = None
    """The final answer validated into ``output_type``, once it fits."""
    output_retries: int = 0
    """Answers sent back for not fitting ``output_type`` so far."""
    step: Callable[[], AbstractContextManager[object]] = nullcontext
    """A step of the run: cancellable by :meth:`cancel`, with the run's context (its
    approver, compressor, questioner, usage sink and span) entered for the block only, never
    across a ``yield`` (set by ``SAgent``)."""
    span: Span | None = None
    """The run's span, when spans are recorded (set by ``SAgent``)."""
    response: ModelResponse | None = None
    """The answer of the model call that ended last."""
    reason: DoneReason = "stop"
    """Why the turns ended."""
    lagged: ConsumerLaggedError | None = None
    """A progress queue of the run fell its ``max_critical`` never-dropped events behind (it
    accepts nothing more; docs/progress.md, "Overflow policy"): raised once the batch that
    filled it settled and its events went out (:func:`~sagents.agent._driver.relay`), never
    inside a :meth:`put` or :meth:`take`."""

    @property
    def hubs(self) -> list[ProgressHub]:
        """The progress hubs the session's tools publish on, the default hub first
        (:func:`progress_hubs`), found on first use: a text turn uses none
        (bench/bench_agent_loop.py --calls)."""
        if self.found_hubs is None:
            self.found_hubs = progress_hubs(self.session.tool_manager)
        return self.found_hubs

    @property
    def extras(self) -> ToolManager:
        """The registry of the loop's own tools of this run (run_script, the skill tools,
        the expansion tool), made on first use: a run without any makes none
        (bench/bench_agent_loop.py --calls)."""
        if self.own_tools is None:
            self.own_tools = ToolManager()
        return self.own_tools

    def granted(self) -> set[str]:
        """The tools the session allowed for the rest of the session."""
        proxy = self.session.tool_manager
        return set(self.session.granted) | proxy.allowed_for_session(self.session.session_id)

    def cancel(self) -> None:
        """End the run as cancelled: what it awaits now is cancelled, and it takes no further
        step. Safe from any thread: from another thread than the run's event loop's, the
        cancel is handed to that loop (``call_soon_threadsafe``) and done there, soon."""
        if _running_loop() is self.loop:
            self._cancel_here()
            return
        with suppress(RuntimeError):  # the loop is closed: the run ended with it
            self.loop.call_soon_threadsafe(self._cancel_here)

    def _cancel_here(self) -> None:
        """:meth:`cancel`, in the run's event loop's thread."""
        self.cancelled = True
        for scope in list(self.scopes):
            scope.cancel()
        if self.reader is not None:  # in the next iteration, as an asyncio timeout would
            self.loop.call_soon(self._cancel_read, self.reads)

    def _cancel_read(self, read: int) -> None:
        """Cancel the task of read number ``read``, if that read is still under way (the
        task then awaits inside it: the cancellation reaches the read, nothing past it)."""
        if self.reader is not None and self.reads == read and not self.read_cancelled:
            self.read_cancelled = True
            self.reader.cancel()

    def cancellable(self) -> _Cancellable:
        """A block :meth:`cancel` cancels (also when it was called before).

        Raises:
            RunCancelled: the block was cancelled by :meth:`cancel`.
        """
        return _Cancellable(self)

    async def read_answer(self, read: Callable[[], Awaitable[T]]) -> T:
        """Await ``read`` (a read of a model's answer), which :meth:`cancel` ends, also when
        it was called before.

        :meth:`cancel` cancels the read's task, in the next event loop iteration (as an
        asyncio timeout that expires does), and the read tells that cancellation from one
        from outside as ``asyncio.timeout()`` does (``Task.cancelling()`` before,
        ``Task.uncancel()`` after). Neither an anyio cancel scope nor an asyncio timeout per
        read: the loop reads once for every piece of a streamed answer, and their Python
        calls (a cancel scope's ~45, a timeout's ~12 with its object) were the largest part of
        the loop's own cost in a streamed turn (bench/bench_agent_loop.py ``--calls``). As
        an asyncio timeout, it cancels the read once: a model that swallows that cancellation
        and then answers, ends or fails still ends the run cancelled; one that swallows it
        and waits again waits until its own timeout (a ``ChatModel`` must not swallow
        cancellation). A read that fails once :meth:`cancel` was called ends the run
        cancelled too, also when its error (an idle timeout, a broken stream) came before the
        cancellation did.

        Raises:
            RunCancelled: the read was cancelled by :meth:`cancel`.
        """
        if self.cancelled:
            raise RunCancelled
        task = asyncio.current_task()
        assert task is not None  # the run is iterated in a task
        cancelling = task.cancelling()
        self.reads += 1
        self.reader = task
        try:
            answer = await read()
        except asyncio.CancelledError:
            if self.read_cancelled and task.uncancel() <= cancelling:
                raise RunCancelled from None  # ours alone, not one from outside
            raise
        except Exception as error:
            if self.read_cancelled:
                task.uncancel()
            if self.cancelled:  # the read failed meanwhile
                raise RunCancelled from error
            raise
        finally:
            self.reader = None
            ours, self.read_cancelled = self.read_cancelled, False
        if ours:
            task.uncancel()
            raise RunCancelled  # the model swallowed the cancellation, then answered
        return answer

    def take(self) -> list[AgentEvent]:
        """The events waiting for the iterating task, in the order they came, taken."""
        self._take_progress()
        taken, self.outbox = self.outbox, []
        if self.room is not None:  # a batch waits for room: there is some now
            self.room.set()
            self.room = None
        return taken

    def _take_progress(self) -> None:
        if not self.rung:  # nothing offered to the run's queues since they were last read
            return
        self.rung = False
        for queue in self.queues:
            while True:
                try:
                    self.outbox.append(queue.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
                except ConsumerLaggedError as error:  # all it queued is taken: kept for later
                    self.lagged = self.lagged or error
                    break

    def waiting(self) -> bool:
        """Whether :meth:`take` would return events."""
        # asked before every streamed piece: a flag, not a look at each queue (their calls
        # showed in a streamed turn's, bench/bench_agent_loop.py --calls)
        return self.rung or bool(self.outbox)

    def ring(self) -> None:
        """Note that events may wait in the run's progress queues (each rings it as progress
        is offered to it), and tell the iterating task, if a batch of tool calls runs
        meanwhile."""
        self.rung = True
        if self.bell is not None:
            self.bell.set()

    def put(self, event: AgentEvent) -> None:
        """Queue ``event`` for the iterating task, after the progress published before it,
        without waiting (while a batch of tool calls runs, :attr:`bell` wakes that task): for
        events bounded in number by the batch's calls, such as their results."""
        self._take_progress()
        self.outbox.append(event)
        if self.bell is not None:
            self.bell.set()

    async def emit(self, event: AgentEvent) -> None:
        """:meth:`put`, then, while a batch of tool calls runs, wait while
        :data:`EVENT_BUFFER` events wait for a slow consumer (one that has gone never makes
        room: the batch is cancelled meanwhile)."""
        self.put(event)
        await self.wait_for_room()

    async def wait_for_room(self) -> None:
        """While a batch of tool calls runs, wait while :data:`EVENT_BUFFER` events wait for
        a slow consumer."""
        while len(self.outbox) >= EVENT_BUFFER and self.bell is not None:
            if self.room is None:
                self.room = anyio.Event()
            await self.room.wait()

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask the approver, with an ``approval.request`` / ``approval.result`` pair around; an
        approver that raises denies."""
        answer, _failure = await self.ask_why(request)
        return answer

    async def ask_why(self, request: ApprovalRequest) -> tuple[ApprovalAnswer, str | None]:
        """:meth:`ask`, and why the approver could not answer (None when it answered)."""
        request_id = f"approval_{uuid.uuid4().hex[:12]}"
        clock = self.hubs[0].clock
        self.put(
            ApprovalRequestEvent(
                request_id=request_id,
                tool_call_id=request.tool_call_id,
                tools=request.tools,
                message=approval_message(request),
                ts=clock.time(),
            )
        )
        answer: ApprovalAnswer = "deny"
        failure = None
        try:
            await self.wait_for_room()  # the request is out: a cancellation from here settles it
            if self.approver is None:
                reason = "nobody could be asked (no approver was given)"
            else:
                try:
                    answer = settle_answer(request, await self.approver.approve(request))
                    reason = answer
                except Exception as error:  # a broken approver denies this call, not the run
                    logger.warning("the approver failed on %s", request.tools, exc_info=True)
                    reason = failure = f"the approver failed: {error!r}"
        except anyio.get_cancelled_exc_class():
            # every request gets its one result, even when the run is cancelled meanwhile (also
            # while the request waited for room): at once, never waiting for room (one a call,
            # as its tool result), so that a consumer that leaves meanwhile is not held back
            self.put(
                ApprovalResultEvent(
                    request_id=request_id, approved=False, reason="cancelled", ts=clock.time()
                )
            )
            raise
        await self.emit(
            ApprovalResultEvent(
                request_id=request_id, approved=answer != "deny", reason=reason, ts=clock.time()
            )
        )
        return answer, failure


class EventApprover:
    """The approver handed to the session's proxy: asks through the run (events around)."""

    def __init__(self, run: ActiveRun) -> None:
        self._run = run

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        answer, failure = await self._run.ask_why(request)
        if failure is not None:  # say so, rather than "denied by the user"
            raise NotAllowedError(
                f"the call of {', '.join(request.tools)} was refused: {failure}",
                hint="Do not retry this call; ask the user what to do instead.",
                details={"tools": list(request.tools)},
            )
        return answer


def approval_message(request: ApprovalRequest) -> str:
    """The request's text, from the one rendering every channel shows
    (:meth:`~sagents.tool.ApprovalRequest.view`): sagents' heading, the description as one
    quoted line, then the script or arguments literal and whole (control characters, such as
    a bidi override, shown as escapes: what is read is what runs)."""
    view = request.view()
    lines = [view.heading, *([view.description] if view.description else []), f"{view.body_label}:"]
    return "\n".join([*lines, view.body])


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def running_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            "SAgent.run_stream runs on asyncio (anyio's asyncio backend); no asyncio event loop "
            "is running here"
        ) from None


def as_proxy(tool_manager: ToolProvider | None) -> ToolProxy:
    if isinstance(tool_manager, ToolProxy):
        return tool_manager
    if tool_manager is None:
        return ToolProxy([ToolManager()])
    return ToolProxy([tool_manager])


def progress_hubs(provider: ToolProvider) -> list[ProgressHub]:
    """The progress hubs the session's tools publish on (the default hub first)."""
    found: dict[int, ProgressHub] = {id(default_hub()): default_hub()}
    stack: list[Any] = [provider]
    while stack:
        current = stack.pop()
        if isinstance(current, ToolProxy):
            stack.extend(current.tool_managers)
        elif isinstance(current, ToolManager):
            found.setdefault(id(current.progress_hub), current.progress_hub)
    return list(found.values())


def normalise_assistant(message: Message) -> Message:
    """The assistant message as the history keeps it and sends it back: every tool call with
    a unique, non-empty id (some servers send none, or repeat one; the model's own ids are
    kept) and its arguments a JSON string (``{}`` for none: some servers refuse ``""``); its
    OpenAI form has ``content`` a string (``""`` rather than null: llama-cpp-python's server
    refuses every request holding a null, docs/agent.md "Servers' quirks"). Reasoning parts
    (and their signatures) are kept as they came."""
    seen: set[str] = set()
    parts: list[Part] = []
    changed = False  # a message already as sent back is kept, not copied (every assistant
    # message of a run's input history comes here: bench/bench_agent_loop.py --calls)
    for part in message.parts:
        if isinstance(part, ToolCall):
            call_id = part.id
            if not call_id or call_id in seen:
                call_id = new_call_id()
            seen.add(call_id)
            if call_id != part.id or not part.arguments:
                part = replace(part, id=call_id, arguments=part.arguments or "{}")
                changed = True
        parts.append(part)
    extra = message.extra
    if "content" in extra and extra["content"] is None:  # endpoints refuse null content
        extra = {k: v for k, v in extra.items() if k != "content"}
        changed = True
    return replace(message, parts=tuple(parts), extra=extra) if changed else message


def final_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the last assistant message without tool calls ("" when none)."""
    for message in reversed(messages):
        if message.get("role") == "assistant" and not message.get("tool_calls"):
            content = message.get("content")
            if isinstance(content, str):
                return content
            return json.dumps(content, ensure_ascii=False)
    return ""


def settle_history(messages: Sequence[Message]) -> list[Message]:
    """A copy of the input history that is a valid history for every model API: each tool call
    of an assistant message answered exactly once, in call order, right after it. A call left
    unanswered by an earlier run (a crash, an abort elsewhere) gets a result that says so; a
    second answer to a call, a tool message answering no call of the assistant message before
    it, and a tool message with no assistant message before it (a history cut at the front) are
    dropped (each logged), since any of them makes the endpoint refuse every request."""
    settled: list[Message] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.role == "tool":
            logger.warning("dropped a tool message that answers no call: %.200r", message)
            continue
        named = [c.id for c in message.tool_calls]  # the ids its results name the calls by
        if message.role == "assistant":  # ids, arguments, content: as sent back
            message = normalise_assistant(message)
        settled.append(message)
        ids = [c.id for c in message.tool_calls]
        if message.role != "assistant" or not ids:
            continue
        # each result goes to the first call its id named that has none yet: a call that came
        # without an id, or with one an earlier call of the answer has, got an id of its own
        waiting: dict[str, list[str]] = {}
        for name, call_id in zip(named, ids, strict=True):
            waiting.setdefault(name, []).append(call_id)
        answers: dict[str, Message] = {}
        while index < len(messages) and messages[index].role == "tool":
            answer = messages[index]
            index += 1
            open_calls = waiting.get(answered_call(answer))
            if not open_calls:
                logger.warning("dropped a tool message that answers no open call: %.200r", answer)
                continue
            call_id = open_calls.pop(0)
            if call_id != answered_call(answer):
                answer = answering(answer, call_id)
            answers[call_id] = answer
        for call_id in ids:
            settled.append(
                answers.get(call_id)
                or tool_message(
                    call_id,
                    "Error [cancelled]: this call was never answered (the run that made it "
                    "ended before it finished)",
                )
            )
    return settled


def answering(message: Message, call_id: str) -> Message:
    """The ``tool`` message as the answer to the call ``call_id`` (the rest of it unchanged)."""
    parts = tuple(
        replace(p, tool_call_id=call_id) if isinstance(p, ToolResultPart) else p
        for p in message.parts
    )
    return replace(message, parts=parts)


def answered_call(message: Message) -> str:
    """The id of the call a ``tool`` message answers ("" when it names none)."""
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            return part.tool_call_id
    return ""


def tool_message(tool_call_id: str, content: str) -> Message:
    """The ``tool`` message that settles one call."""
    return Message(role="tool", parts=(ToolResultPart(tool_call_id=tool_call_id, content=content),))
