"""``SAgent`` over the AG-UI protocol: a ``RunAgentInput`` in, AG-UI events over SSE out
(docs/chat.md).

```python
from sagents.agent.ag_ui import ag_ui_app

app = ag_ui_app(agent, tool_manager=manager, authorize=who_is_it)  # POST /ag-ui
```

Each ``threadId`` is one conversation, kept server-side (:class:`~sagents.store._threads.
SqliteThreads`): of a ``RunAgentInput`` only its new user message (the last message, a ``user``
message whose id the thread has not seen) is taken; the history is the server's, sent back as
``MESSAGES_SNAPSHOT`` at the start of each stream. The events are the official
``ag-ui-protocol`` package's types, written by its ``EventEncoder``; :mod:`sagents.agent.
_ag_ui_events` says which agent event becomes which, and the ``CUSTOM`` names. This module is
the HTTP side (the request, its checks, the SSE stream); the threads and the agent runs they
own are :mod:`sagents.agent._ag_ui_runs`'s.

Approvals and questionnaires: the request is a ``CUSTOM`` event (``sagents.approval.request``
/ ``sagents.questionnaire.request``) whose value holds its ``id`` and the whole request; the
stream then ends with ``RUN_FINISHED`` (``result: {"sagents": {"waiting": [ids]}}``). The agent
runs with ``approvals="defer"``: the run pauses, its ``RunState`` kept in the agent's store and
what it waits for with the thread (:mod:`sagents.agent._ag_ui_waiting`), so that the answer may
come to this process after a restart, or to another one on the same data directory. The next
``RunAgentInput`` of the thread answers in ``forwardedProps.sagents.decisions`` (``{id:
{"decision": "allow_once" | "allow_session" | "deny", "reason"?}}`` or ``{id: {"answers":
{...}}}``) and streams the rest of the run. run_script's one approval, asked inside the running
tool, waits in this process (:class:`~sagents.agent._ag_ui_threads.ThreadApprover`).
``forwardedProps.sagents.cancel: true`` cancels the thread's run; so does a client that goes
away while its run streams (AG-UI's ``abortRun``).

Who may call: ``authorize(request)`` returns the caller's identity (a thread belongs to the
identity that opened it; another gets 404) or None (401). The route itself checks no header:
mount it behind the host's ``Host``/``Origin`` checks (``sagents chat --web`` and the console
do).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
from ag_ui.core import (
    BaseEvent,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    UserMessage,
)
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from sagents.agent._ag_ui_events import (
    APPROVAL_REQUEST,
    APPROVAL_RESULT,
    BACKGROUND_DONE,
    CUSTOM_NAMES,
    QUESTIONNAIRE_REQUEST,
    QUESTIONNAIRE_RESULT,
    SCRIPT_PROGRESS,
    TOOL_PROGRESS,
    ag_ui_messages,
    new_user_message,
)
from sagents.agent._ag_ui_replies import (
    decisions_needed,
    error_reply,
    unauthorized,
    validation_text,
)
from sagents.agent._ag_ui_runs import MAX_THREADS_IN_MEMORY as MAX_THREADS_IN_MEMORY
from sagents.agent._ag_ui_runs import RunSettings, ThreadRuns, ToolsFor
from sagents.agent._ag_ui_threads import (
    APPROVAL_TTL_S,
    DecisionError,
    Run,
    SagentsProps,
    Thread,
    parse_sagents_props,
)
from sagents.agent._ag_ui_waiting import Waiting
from sagents.agent._loop import SAgent
from sagents.core._permissions import PermissionMode
from sagents.errors import StoreUnavailableError
from sagents.skill._proxy import SkillSource
from sagents.store._threads import THREADS_FILE, SqliteThreads
from sagents.tool._provider import ToolProvider
from sagents.tool.impl._todo import TodoStore

__all__ = [
    "AG_UI_PATH",
    "APPROVAL_REQUEST",
    "APPROVAL_RESULT",
    "APPROVAL_TTL_S",
    "BACKGROUND_DONE",
    "CUSTOM_NAMES",
    "QUESTIONNAIRE_REQUEST",
    "QUESTIONNAIRE_RESULT",
    "SCRIPT_PROGRESS",
    "THREADS_FILE",
    "TOOL_PROGRESS",
    "AgUiThreads",
    "Authorize",
    "ToolsFor",
    "ag_ui_app",
    "ag_ui_endpoint",
    "open_ag_ui_threads",
]

AG_UI_PATH: Final = "/ag-ui"
"""Where :func:`ag_ui_app` serves the route."""
_DETACH_WAIT_S: Final = 5.0  # seconds a request waits for a stream whose client went away
_CANCEL_WAIT_S: Final = 30.0  # seconds a new message waits for a cancelled run to settle
_CANCELLED: Final = "was cancelled with its run"
MAX_INPUT_BYTES: Final = 4 * 1024 * 1024
"""The largest ``RunAgentInput`` body accepted (a client re-sends its whole history)."""

Authorize = Callable[[Request], Awaitable[str | None]]
"""Who calls: an identity (threads are per identity; "" is one identity too) or None (401)."""


class AgUiThreads:
    """The threads of the AG-UI route and the runs they own (build with
    :func:`open_ag_ui_threads`); it answers the route's requests."""

    def __init__(self, settings: RunSettings, task_group: anyio.abc.TaskGroup) -> None:
        self._runs = ThreadRuns(settings, task_group)
        self._encoder = EventEncoder()

    # -- threads --------------------------------------------------------------------------------

    async def thread(self, thread_id: str, owner: str, *, create: bool = True) -> Thread | None:
        """The thread ``thread_id`` of ``owner`` (loaded from the store, or new when
        ``create``); None when it is another's or unknown.

        Raises:
            StoreUnavailableError: the store cannot be read.
        """
        return await self._runs.thread(thread_id, owner, create=create)

    async def conversation(self, thread_id: str, owner: str) -> list[dict[str, Any]]:
        """The thread's messages as AG-UI messages (JSON objects); [] for an unknown thread.

        Raises:
            StoreUnavailableError: the store cannot be read.
        """
        thread = await self.thread(thread_id, owner, create=False)
        if thread is None:
            return []
        return [
            m.model_dump(mode="json", by_alias=True)
            for m in ag_ui_messages(thread.ids, thread.messages)
        ]

    async def page_state(self, thread_id: str, owner: str) -> dict[str, Any]:
        """What a (re)loaded page shows of a thread: ``{"messages", "state", "waiting"}``
        (the AG-UI messages, the session state, the requests waiting for a decision).

        Raises:
            StoreUnavailableError: the store cannot be read.
        """
        thread = await self.thread(thread_id, owner, create=False)
        if thread is None:
            return {"messages": [], "state": None, "waiting": []}
        run = thread.run
        waiting = thread.waiting.requests() if thread.waiting is not None else []
        if run is not None and thread.active:
            waiting = run.waiting_requests()
        return {
            "messages": [
                m.model_dump(mode="json", by_alias=True)
                for m in ag_ui_messages(thread.ids, thread.messages)
            ],
            "state": await self._runs.state(thread),
            "waiting": waiting,
        }

    # -- one request ----------------------------------------------------------------------------

    async def handle(self, request: Request, owner: str) -> Response:
        """Answer one ``POST`` of a ``RunAgentInput``: an SSE stream of AG-UI events, or an
        error (JSON ``{"error", "message"}``: 400/413/422 bad input, 404 another's thread, 409
        a run in the way, 503 the store is unavailable)."""
        body = bytearray()
        async for chunk in request.stream():  # never more than the limit held: not .body()
            body += chunk
            if len(body) > MAX_INPUT_BYTES:
                return error_reply(
                    413, "too_large", f"a RunAgentInput of at most {MAX_INPUT_BYTES} bytes"
                )
        try:
            given = RunAgentInput.model_validate_json(body)
        except ValidationError as error:
            return error_reply(422, "invalid_input", validation_text(error))
        try:
            props = parse_sagents_props(given.forwarded_props)
        except DecisionError as error:
            return error_reply(422, "invalid_decisions", str(error))
        try:
            thread = await self.thread(given.thread_id, owner)
        except StoreUnavailableError as error:
            return error_reply(503, "store_unavailable", str(error))
        if thread is None:
            return error_reply(404, "unknown_thread", f"no thread {given.thread_id!r} of yours")
        async with thread.lock:
            run = thread.run
            if run is not None and run.attached:  # a client that just went away (Stop)?
                with anyio.move_on_after(_DETACH_WAIT_S):
                    while run.attached:
                        await run.changed().wait()
            if run is not None and run.attached:
                return error_reply(
                    409, "run_streaming", "this thread's run streams to another client now"
                )
            new_message = new_user_message(given, thread.ids)
            if run is not None and thread.active and run.cancelling and new_message is not None:
                with anyio.move_on_after(_CANCEL_WAIT_S):  # a Stop just before: let it end
                    while not run.finished:
                        await run.changed().wait()
            try:
                if not thread.active:  # another process on the data dir may have decided
                    await self._runs.reread_waiting(thread)
                await self._runs.expire(thread)  # lazily too: after a restart nothing else did
            except StoreUnavailableError as error:
                return error_reply(503, "store_unavailable", str(error))
            run, snapshot, joined = thread.run, False, False
            for item_id in props.decisions:
                ended = thread.ended_text(item_id)
                if ended is not None and item_id not in thread.waiting_ids:
                    return error_reply(422, "invalid_decisions", ended)
            if thread.waiting is not None and not thread.active:
                answered = await self._answer(thread, props, new_message)
                if isinstance(answered, Response):
                    return answered
                run = answered
            elif run is not None and thread.active:
                if props.cancel:
                    run.cancelling = True
                    run.scope.cancel()
                elif new_message is not None:
                    if run.waiting:
                        return decisions_needed(run.waiting)
                    return error_reply(409, "run_in_progress", "the thread's run has not ended yet")
                else:
                    try:
                        run.check(props.decisions)
                    except DecisionError as error:
                        return error_reply(422, "invalid_decisions", str(error))
                    run.decide(props.decisions)
                run.attached = joined = True
            else:
                if props.decisions:
                    ended = thread.ended_text(next(iter(props.decisions)))
                    return error_reply(
                        422,
                        "invalid_decisions",
                        ended or "nothing in this thread waits for a decision (its run ended)",
                    )
                if new_message is None:
                    return error_reply(
                        422,
                        "no_user_message",
                        "the input's last message must be a new user message",
                    )
                run = self._runs.start(thread, new_message)
                snapshot = True
        return StreamingResponse(
            self._stream(thread, run, given, snapshot=snapshot, joined=joined),
            media_type=self._encoder.get_content_type(),
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    # -- a paused run ---------------------------------------------------------------------------

    async def _answer(
        self, thread: Thread, props: SagentsProps, new_message: UserMessage | None
    ) -> Response | Run:
        """Decide items of the thread's paused run: the run that streams the answer (the
        resumed run once every item is decided), or an error."""
        waiting = thread.waiting
        assert waiting is not None
        if waiting.decided:  # decided, but its resume failed (the store): try again
            return self._runs.resume(thread, waiting, [], attached=True)
        if props.cancel:
            self._runs.note_ended(thread, dict.fromkeys(waiting.cancel(), _CANCELLED))
            return await self._recorded(thread, waiting) or self._runs.resume(
                thread, waiting, [], attached=True
            )
        if new_message is not None:
            return decisions_needed(waiting.ids)
        if not props.decisions:
            return error_reply(
                422,
                "no_user_message",
                "the input's last message must be a new user message, or the decisions for "
                f"{', '.join(waiting.ids)}",
            )
        try:
            waiting.check(props.decisions)
        except DecisionError as error:
            return error_reply(422, "invalid_decisions", str(error))
        waiting.decide(props.decisions)
        ids = list(props.decisions)
        refused = await self._recorded(thread, waiting)
        if refused is not None:
            return refused
        if waiting.decided:
            return self._runs.resume(thread, waiting, ids, attached=True)
        run = Run(attached=True)  # the others still wait: a stream of the results, then that
        run.push([StateSnapshotEvent(snapshot=await self._runs.state(thread))])
        run.push(waiting.result_events(ids))
        run.paused = waiting.ids
        run.finish()
        return run

    async def _recorded(self, thread: Thread, waiting: Waiting) -> Response | None:
        """Store the decisions just put on ``waiting`` (:meth:`ThreadRuns.record`): None once
        stored, else the reply (409 decided through another connection meanwhile, 503 the
        store is unavailable)."""
        try:
            kept = await self._runs.record(thread, waiting)
        except StoreUnavailableError as error:
            return error_reply(503, "store_unavailable", str(error))
        if kept:
            return None
        return error_reply(
            409,
            "decided_elsewhere",
            "this thread's waiting items were decided through another connection "
            "meanwhile: reload the thread to see what still waits",
        )

    # -- the stream -----------------------------------------------------------------------------

    async def _stream(
        self, thread: Thread, run: Run, given: RunAgentInput, *, snapshot: bool, joined: bool
    ) -> AsyncIterator[str]:
        encode = self._encoder.encode
        completed = False
        try:
            yield encode(RunStartedEvent(thread_id=given.thread_id, run_id=given.run_id))
            if snapshot:
                yield encode(
                    MessagesSnapshotEvent(messages=ag_ui_messages(thread.ids, thread.messages))
                )
            if joined:  # a run under way: the state now, deltas from here on
                yield encode(StateSnapshotEvent(snapshot=await self._runs.state(thread)))
            while True:
                changed = run.changed()
                while run.outbox:
                    yield encode(run.outbox.popleft())
                if run.finished:
                    yield encode(self._end(given, run))
                    break
                if run.waiting and not run.cancelling:  # the rest comes with the decisions
                    waiting = {"sagents": {"waiting": run.waiting}}
                    yield encode(
                        RunFinishedEvent(
                            thread_id=given.thread_id, run_id=given.run_id, result=waiting
                        )
                    )
                    break
                await changed.wait()
            completed = True
        finally:
            run.attached = False
            run.notify()
            if not completed and not run.finished and not run.waiting:
                run.cancelling = True  # the client went away while its run streamed: Stop
                run.scope.cancel()

    def _end(self, given: RunAgentInput, run: Run) -> BaseEvent:
        done = run.done
        if run.error is not None:
            return RunErrorEvent(
                message=str(run.error.get("message")), code=str(run.error.get("code"))
            )
        if run.paused:
            waiting = {"sagents": {"waiting": list(run.paused)}}
            return RunFinishedEvent(thread_id=given.thread_id, run_id=given.run_id, result=waiting)
        if done is not None and (done.reason == "error" or done.error is not None):
            error = done.error or {}  # beside another reason: what the store did not keep
            return RunErrorEvent(
                message=str(error.get("message") or "the run failed"),
                code=str(error.get("code") or "error"),
            )
        if run.store_error is not None:
            return RunErrorEvent(message=run.store_error, code="store_unavailable")
        reason = done.reason if done is not None else "cancelled"
        result = {"sagents": {"reason": reason}}
        if reason == "cancelled":
            return RunFinishedEvent(
                thread_id=given.thread_id,
                run_id=given.run_id,
                result=result,
                outcome=RunFinishedCancelledOutcome(),
            )
        return RunFinishedEvent(thread_id=given.thread_id, run_id=given.run_id, result=result)


@asynccontextmanager
async def open_ag_ui_threads(
    agent: SAgent,
    *,
    tool_manager: ToolProvider | None = None,
    skill_manager: SkillSource | None = None,
    permission_mode: PermissionMode = "ask",
    data_dir: Path | None = None,
    todo: TodoStore | None = None,
    approval_ttl_s: float = APPROVAL_TTL_S,
    tools_for: ToolsFor | None = None,
    session_prefix: str = "",
) -> AsyncIterator[AgUiThreads]:
    """The threads of an AG-UI route, with the task group their runs live in; leaving the
    block cancels every run (each history settled and saved).

    Args:
        agent: The agent every thread runs.
        tool_manager: The tools (a ``ToolProxy`` or a ``ToolManager``).
        skill_manager: The skills, if any.
        permission_mode: The mode of every thread (``ask``: writes are approved in the client).
        data_dir: Where ``threads.sqlite3`` keeps the conversations; None: in memory only.
        todo: The todo store whose list of each thread is shown as state, if any.
        approval_ttl_s: Seconds an approval waits for its decision, then is denied.
        tools_for: The tools and mode of each identity's runs, instead of ``tool_manager`` and
            ``permission_mode`` for all.
        session_prefix: Put before a ``threadId`` to make its session id (the todo list's and
            memory's key), so that a host's other sessions can never be named by a thread.
    """
    settings = RunSettings(
        agent=agent,
        tool_manager=tool_manager,
        skill_manager=skill_manager,
        permission_mode=permission_mode,
        store=SqliteThreads(path=data_dir / THREADS_FILE) if data_dir is not None else None,
        todo=todo,
        approval_ttl_s=approval_ttl_s,
        tools_for=tools_for,
        session_prefix=session_prefix,
    )
    async with anyio.create_task_group() as tg:
        yield AgUiThreads(settings, tg)
        tg.cancel_scope.cancel()


def ag_ui_endpoint(threads: AgUiThreads, authorize: Authorize) -> Callable[[Request], Any]:
    """The ``POST`` endpoint of the route (for a ``starlette.routing.Route``)."""

    async def endpoint(request: Request) -> Response:
        owner = await authorize(request)
        if owner is None:
            return unauthorized()
        return await threads.handle(request, owner)

    return endpoint


def ag_ui_app(
    agent: SAgent,
    *,
    authorize: Authorize,
    tool_manager: ToolProvider | None = None,
    skill_manager: SkillSource | None = None,
    permission_mode: PermissionMode = "ask",
    data_dir: Path | None = None,
    todo: TodoStore | None = None,
    path: str = AG_UI_PATH,
) -> Starlette:
    """A Starlette app serving the route at ``path`` (``POST``); its lifespan owns the runs.

    See :func:`open_ag_ui_threads` for the arguments; ``authorize`` says who calls.
    """
    holder: list[AgUiThreads] = []

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with open_ag_ui_threads(
            agent,
            tool_manager=tool_manager,
            skill_manager=skill_manager,
            permission_mode=permission_mode,
            data_dir=data_dir,
            todo=todo,
        ) as threads:
            holder.append(threads)
            yield

    async def endpoint(request: Request) -> Response:
        owner = await authorize(request)
        if owner is None:
            return unauthorized()
        return await holder[0].handle(request, owner)

    return Starlette(routes=[Route(path, endpoint, methods=["POST"])], lifespan=lifespan)
