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
_ag_ui_events` says which agent event becomes which, and the ``CUSTOM`` names.

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

import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
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
    EventTranslator,
    ag_ui_messages,
    new_message_id,
    new_user_message,
)
from sagents.agent._ag_ui_replies import (
    decisions_needed,
    error_reply,
    unauthorized,
    validation_text,
)
from sagents.agent._ag_ui_threads import (
    APPROVAL_TTL_S,
    DecisionError,
    Run,
    SagentsProps,
    Thread,
    ThreadApprover,
    parse_sagents_props,
)
from sagents.agent._ag_ui_waiting import MAX_ENDED, Waiting, decided_state, held_request
from sagents.agent._events import (
    DoneEvent,
    MessageEvent,
    QuestionnaireRequestEvent,
    QuestionnaireResultEvent,
)
from sagents.agent._loop import SAgent
from sagents.agent._state import RunState
from sagents.core._permissions import PermissionMode
from sagents.core.events import ApprovalRequestEvent, ApprovalResultEvent
from sagents.errors import RunStateError, SagentsError, StoreUnavailableError
from sagents.skill._proxy import SkillSource
from sagents.store._threads import THREADS_FILE, SqliteThreads, StoredThread
from sagents.tool._context import SessionContext
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

logger = logging.getLogger(__name__)

AG_UI_PATH: Final = "/ag-ui"
"""Where :func:`ag_ui_app` serves the route."""
MAX_THREADS_IN_MEMORY: Final = 1000
"""Threads kept in memory without a run (the least recently used are reloaded from the store
when they come back)."""
_DETACH_WAIT_S: Final = 5.0  # seconds a request waits for a stream whose client went away
_CANCEL_WAIT_S: Final = 30.0  # seconds a new message waits for a cancelled run to settle
_CANCELLED: Final = "was cancelled with its run"
MAX_INPUT_BYTES: Final = 4 * 1024 * 1024
"""The largest ``RunAgentInput`` body accepted (a client re-sends its whole history)."""

Authorize = Callable[[Request], Awaitable[str | None]]
"""Who calls: an identity (threads are per identity; "" is one identity too) or None (401)."""
ToolsFor = Callable[[str, str], tuple[ToolProvider, PermissionMode]]
"""``(identity, session id)`` → the tools and permission mode of that identity's run in that
session (read at the start of each run), for a host whose callers are offered different tools
(the console: each profile its own)."""


@dataclass(kw_only=True)
class _Settings:
    agent: SAgent
    tool_manager: ToolProvider | None
    skill_manager: SkillSource | None
    permission_mode: PermissionMode
    store: SqliteThreads | None
    todo: TodoStore | None
    approval_ttl_s: float
    tools_for: ToolsFor | None = None
    session_prefix: str = ""

    def session_id(self, thread: Thread) -> str:
        """The agent session (and ``SessionContext.session_id``) of a thread's runs."""
        return self.session_prefix + thread.thread_id


class AgUiThreads:
    """The threads of the AG-UI route and the runs they own (build with
    :func:`open_ag_ui_threads`)."""

    def __init__(self, settings: _Settings, task_group: anyio.abc.TaskGroup) -> None:
        self._settings = settings
        self._tg = task_group
        self._threads: OrderedDict[str, Thread] = OrderedDict()
        self._encoder = EventEncoder()

    # -- threads --------------------------------------------------------------------------------

    async def thread(self, thread_id: str, owner: str, *, create: bool = True) -> Thread | None:
        """The thread ``thread_id`` of ``owner`` (loaded from the store, or new when
        ``create``); None when it is another's or unknown.

        Raises:
            StoreUnavailableError: the store cannot be read.
        """
        found = self._threads.get(thread_id)
        if found is None:
            stored = await self._settings.store.load(thread_id) if self._settings.store else None
            found = self._threads.get(thread_id)  # another request may have loaded it meanwhile
            if found is None and stored is not None:
                found = Thread(
                    thread_id=thread_id,
                    owner=stored.owner,
                    messages=[dict(m) for m in stored.messages],
                    ids=list(stored.ids),
                )
                document = stored.waiting or {}
                found.saved_waiting = stored.waiting
                found.ended = {str(k): str(v) for k, v in (document.get("ended") or {}).items()}
                if document.get("waiting"):
                    found.waiting = Waiting.from_json(document["waiting"])
                    self._tg.start_soon(self._expire_later, found, found.waiting)
            if found is None:
                if not create:
                    return None
                found = Thread(thread_id=thread_id, owner=owner)
            self._threads[thread_id] = found
            self._evict()
        self._threads.move_to_end(thread_id)
        return found if found.owner == owner else None

    def _evict(self) -> None:
        idle = [
            key
            for key, thread in self._threads.items()
            if not thread.active and (thread.waiting is None or self._settings.store is not None)
        ]
        for key in idle[: max(0, len(self._threads) - MAX_THREADS_IN_MEMORY)]:
            del self._threads[key]

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
            "state": await self._state(thread),
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
                    await self._reread_waiting(thread)
                await self._expire(thread)  # lazily too: after a restart nothing else did
            except StoreUnavailableError as error:
                return error_reply(503, "store_unavailable", str(error))
            run, snapshot = thread.run, False
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
                run.attached = True
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
                run = self._start(thread, new_message)
                snapshot = True
        return StreamingResponse(
            self._stream(thread, run, given, snapshot=snapshot),
            media_type=self._encoder.get_content_type(),
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    def _start(self, thread: Thread, message: UserMessage) -> Run:
        content = message.content
        text = (
            content
            if isinstance(content, str)
            else json.dumps([part.model_dump(mode="json", by_alias=True) for part in content])
        )
        thread.messages.append({"role": "user", "content": text})
        thread.ids.append(message.id)
        run = thread.run = Run(attached=True)
        self._tg.start_soon(self._drive, thread, run, None)
        return run

    # -- a paused run ---------------------------------------------------------------------------

    async def _answer(
        self, thread: Thread, props: SagentsProps, new_message: UserMessage | None
    ) -> Response | Run:
        """Decide items of the thread's paused run: the run that streams the answer (the
        resumed run once every item is decided), or an error."""
        waiting = thread.waiting
        assert waiting is not None
        if waiting.decided:  # decided, but its resume failed (the store): try again
            return self._resume(thread, waiting, [], attached=True)
        if props.cancel:
            self._note_ended(thread, dict.fromkeys(waiting.cancel(), _CANCELLED))
            return await self._recorded(thread, waiting) or self._resume(
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
            return self._resume(thread, waiting, ids, attached=True)
        run = Run(attached=True)  # the others still wait: a stream of the results, then that
        run.push(waiting.result_events(ids))
        run.paused = waiting.ids
        run.finish()
        return run

    async def _reread_waiting(self, thread: Thread) -> None:
        """Take what the thread's paused run waits for from the store, the truth when several
        processes serve one data directory (a decision given through another one). A thread
        the store has not kept yet stays as it is.

        Raises:
            StoreUnavailableError: the store cannot be read.
        """
        store = self._settings.store
        stored = await store.load(thread.thread_id) if store is not None else None
        if stored is None or stored.waiting == thread.saved_waiting:
            return
        document = stored.waiting or {}
        thread.saved_waiting = stored.waiting
        thread.ended = {str(k): str(v) for k, v in (document.get("ended") or {}).items()}
        thread.waiting = Waiting.from_json(document["waiting"]) if document.get("waiting") else None
        if thread.waiting is not None:  # the old copy's expiry ends with it
            self._tg.start_soon(self._expire_later, thread, thread.waiting)

    async def _recorded(self, thread: Thread, waiting: Waiting) -> Response | None:
        """Store the decisions just put on ``waiting``, unless another process decided this
        thread's items meanwhile (then nothing of this answer is kept: a 409, and the thread
        is read from the store again); None once stored."""
        store = self._settings.store
        if store is None:
            return None
        document = {"waiting": waiting.to_json(), "ended": dict(thread.ended)}
        try:
            kept = await store.replace_waiting(thread.thread_id, thread.saved_waiting, document)
        except StoreUnavailableError as error:
            kept, refused = False, error_reply(503, "store_unavailable", str(error))
        else:
            refused = error_reply(
                409,
                "decided_elsewhere",
                "this thread's waiting items were decided through another connection "
                "meanwhile: reload the thread to see what still waits",
            )
        if kept:
            thread.saved_waiting = document
            return None
        thread.waiting = None  # the answer is not kept: read the thread again next time
        self._threads.pop(thread.thread_id, None)
        return refused

    def _resume(self, thread: Thread, waiting: Waiting, ids: list[str], *, attached: bool) -> Run:
        """Continue the paused run with its decisions (in a task of the route)."""
        thread.waiting = None
        run = thread.run = Run(attached=attached)
        thread.notify()
        run.push(waiting.result_events(ids))
        self._tg.start_soon(self._drive, thread, run, waiting)
        return run

    async def _expire(self, thread: Thread) -> None:
        """Decide the items of the thread's paused run whose time passed (an approval is
        denied, a questionnaire times out); once none waits, the run goes on.

        Raises:
            StoreUnavailableError: the thread could not be saved.
        """
        waiting = thread.waiting
        if waiting is None or thread.active:
            return
        ended = waiting.expire(time.time())
        if not ended:
            return
        self._note_ended(thread, ended)
        if waiting.decided:
            self._resume(thread, waiting, list(ended), attached=False)
        else:
            await self._save(thread)

    async def _expire_later(self, thread: Thread, waiting: Waiting) -> None:
        """Expire the items of ``waiting`` when their time comes (while the thread waits)."""
        while thread.waiting is waiting:
            deadline = waiting.next_expiry()
            if deadline is None:
                return
            await anyio.sleep(max(0.0, deadline - time.time()))
            async with thread.lock:
                if thread.waiting is not waiting:
                    return
                try:
                    await self._expire(thread)
                except StoreUnavailableError as error:  # said; the next request expires them
                    logger.warning("cannot expire the items of %r: %s", thread.thread_id, error)
                    return

    def _note_ended(self, thread: Thread, ended: dict[str, str]) -> None:
        thread.ended.update(ended)
        for key in list(thread.ended)[: max(0, len(thread.ended) - MAX_ENDED)]:
            del thread.ended[key]

    async def _stream(
        self, thread: Thread, run: Run, given: RunAgentInput, *, snapshot: bool
    ) -> AsyncIterator[str]:
        encode = self._encoder.encode
        completed = False
        try:
            yield encode(RunStartedEvent(thread_id=given.thread_id, run_id=given.run_id))
            if snapshot:
                yield encode(
                    MessagesSnapshotEvent(messages=ag_ui_messages(thread.ids, thread.messages))
                )
            yield encode(StateSnapshotEvent(snapshot=await self._state(thread)))
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
        if done is not None and done.reason == "error":
            error = done.error or {}
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

    # -- the run --------------------------------------------------------------------------------

    async def _drive(self, thread: Thread, run: Run, resume: Waiting | None) -> None:
        """Run the agent for ``run``: a new run of the thread's history, or the paused run of
        ``resume`` with its decisions."""
        settings = self._settings
        translator = EventTranslator()
        given = list(thread.messages)
        given_ids = list(thread.ids)
        tools, mode = settings.tool_manager, settings.permission_mode
        if settings.tools_for is not None:
            tools, mode = settings.tools_for(thread.owner, settings.session_id(thread))
        context = SessionContext(session_id=settings.session_id(thread), permission_mode=mode)
        state = await self._state(thread)
        calls: set[str] = set()  # the tool call ids of the run's answers
        asked: dict[str, str] = {}  # a held call's approval message, by its call id
        keep = True
        try:
            with run.scope:
                paused = (
                    None if resume is None else await decided_state(self._settings.agent, resume)
                )
                stream = settings.agent.run_stream(
                    [] if paused is not None else given,
                    tool_manager=tools,
                    skill_manager=settings.skill_manager,
                    session_context=context,
                    approver=ThreadApprover(thread, ttl_s=settings.approval_ttl_s),
                    approvals="defer",
                    state=paused,
                )
                async with aclosing(stream) as events:
                    async for event in events:
                        if held_request(event, calls):  # a held call: the paused state says it
                            if isinstance(event, ApprovalRequestEvent):
                                asked[event.request_id] = event.message
                            continue
                        if isinstance(event, ApprovalRequestEvent):
                            details = await run.announce(event.request_id, event.tool_call_id)
                            translator.approval_details[event.request_id] = details
                        elif isinstance(event, QuestionnaireRequestEvent):
                            run.questionnaires[event.request_id] = event
                        elif isinstance(event, ApprovalResultEvent):
                            run.settled(event.request_id)
                        elif isinstance(event, QuestionnaireResultEvent):
                            run.settled(event.request_id, event.status)
                        elif isinstance(event, DoneEvent):
                            run.done = event
                            if event.state is not None:
                                self._pause(thread, run, event.state, asked)
                        elif isinstance(event, MessageEvent):
                            calls.update(
                                str(c.get("id")) for c in event.message.get("tool_calls") or []
                            )
                        run.push(translator.translate(event))
                        if isinstance(event, MessageEvent) and event.message.get("role") == "tool":
                            state = await self._state_delta(thread, run, state)
        except RunStateError as error:  # resumed elsewhere already, or refused: nothing ran
            run.error = error.to_dict()
            keep = error.details.get("reason") != "claimed"  # the other's save is the latest
            if not keep:  # read the thread from the store again next time
                thread.waiting = None
                self._threads.pop(thread.thread_id, None)
                if resume is not None:  # a resume that died keeps no card waiting forever
                    await self._forget_waiting(thread, resume.state_id)
        except SagentsError as error:  # the paused run cannot be loaded (its store failed)
            run.error = error.to_dict()
            thread.waiting = resume
        except Exception:  # a bug below: the run ends with an error, the process goes on
            logger.exception("the AG-UI run of thread %r failed", thread.thread_id)
        finally:
            with anyio.CancelScope(shield=True):
                run.push(translator.close())
                if keep:
                    await self._keep(thread, given, given_ids, translator.message_ids, run)
                run.finish()

    async def _forget_waiting(self, thread: Thread, state_id: str) -> None:
        store = self._settings.store
        if store is None:
            return
        try:
            await store.clear_waiting(thread.thread_id, state_id)
        except StoreUnavailableError as error:  # said; the next answer gets the same error
            logger.warning("cannot forget the resumed run of %r: %s", thread.thread_id, error)

    def _pause(self, thread: Thread, run: Run, state: RunState, asked: dict[str, str]) -> None:
        """The run paused: keep what it waits for with the thread, show the requests."""
        waiting = Waiting.paused(
            state, messages=asked, approval_ttl_s=self._settings.approval_ttl_s
        )
        thread.waiting = waiting
        run.paused = waiting.ids
        for item in waiting.items:
            name = QUESTIONNAIRE_REQUEST if item.kind == "questionnaire" else APPROVAL_REQUEST
            run.push([CustomEvent(name=name, value=item.request)])
        self._tg.start_soon(self._expire_later, thread, waiting)

    async def _keep(
        self,
        thread: Thread,
        given: list[dict[str, Any]],
        given_ids: list[str],
        new_ids: list[str],
        run: Run,
    ) -> None:
        """Take the run's settled history into the thread, and save it."""
        session = self._settings.agent.session(self._settings.session_id(thread))
        history = [dict(m) for m in session.messages] if session is not None else given
        if history[: len(given)] == given:
            ids = given_ids + new_ids
        else:  # the history was compressed: new ids for what was rewritten
            ids = [new_message_id() for _ in history]
        ids = (ids + [new_message_id() for _ in history])[: len(history)]
        thread.messages, thread.ids = history, ids
        try:
            await self._save(thread)
        except StoreUnavailableError as error:
            run.store_error = f"the conversation was not saved: {error}"

    async def _save(self, thread: Thread) -> None:
        """Save the thread: its conversation, and what its paused run waits for.

        Raises:
            StoreUnavailableError: the store cannot be written.
        """
        store = self._settings.store
        if store is None:
            return
        waiting = None
        if thread.waiting is not None or thread.ended:
            waiting = {
                "waiting": None if thread.waiting is None else thread.waiting.to_json(),
                "ended": dict(thread.ended),
            }
        thread.saved_waiting = None  # unknown until written
        await store.save(
            StoredThread(
                thread_id=thread.thread_id,
                owner=thread.owner,
                messages=tuple(thread.messages),
                ids=tuple(thread.ids),
                waiting=waiting,
            )
        )
        thread.saved_waiting = waiting

    async def _state(self, thread: Thread) -> dict[str, Any]:
        """The session state shown beside the chat: the task list, the loaded skills, the
        tools the model expanded."""
        session = self._settings.agent.session(self._settings.session_id(thread))
        skills = list(session.skills.active_skills) if session and session.skills else []
        expanded = list(session.audit_status.suggested_tools) if session else []
        todo: list[dict[str, Any]] = []
        if self._settings.todo is not None:
            try:
                context = SessionContext(session_id=self._settings.session_id(thread))
                items = await self._settings.todo.read(context)
                todo = [item.to_json() for item in items]
            except Exception:  # a broken todo store hides the list, never the chat
                logger.warning("cannot read the todo list of %r", thread.thread_id, exc_info=True)
        return {"todo": todo, "skills": skills, "expanded_tools": expanded}

    async def _state_delta(
        self, thread: Thread, run: Run, before: dict[str, Any]
    ) -> dict[str, Any]:
        after = await self._state(thread)
        delta = [
            {"op": "replace", "path": f"/{key}", "value": value}
            for key, value in after.items()
            if before.get(key) != value
        ]
        if delta:
            run.push([StateDeltaEvent.model_validate({"delta": delta})])
        return after


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
    settings = _Settings(
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
