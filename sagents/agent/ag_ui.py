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
stream then ends with ``RUN_FINISHED`` (``result: {"sagents": {"waiting": [ids]}}``) while the
run waits in this process. The next ``RunAgentInput`` of the thread answers in
``forwardedProps.sagents.decisions`` (``{id: {"decision": "allow_once" | "allow_session" |
"deny", "reason"?}}`` or ``{id: {"answers": {...}}}``) and streams the rest of the run.
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
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
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
    new_message_id,
)
from sagents.agent._ag_ui_threads import (
    APPROVAL_TTL_S,
    DecisionError,
    Run,
    Thread,
    ThreadApprover,
    parse_sagents_props,
)
from sagents.agent._events import (
    DoneEvent,
    MessageEvent,
    QuestionnaireRequestEvent,
    QuestionnaireResultEvent,
)
from sagents.agent._loop import SAgent
from sagents.core._permissions import PermissionMode
from sagents.core.events import ApprovalRequestEvent, ApprovalResultEvent
from sagents.errors import StoreUnavailableError
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
            if found is None:
                if not create:
                    return None
                found = Thread(thread_id=thread_id, owner=owner)
            self._threads[thread_id] = found
            self._evict()
        self._threads.move_to_end(thread_id)
        return found if found.owner == owner else None

    def _evict(self) -> None:
        idle = [key for key, thread in self._threads.items() if not thread.active]
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
        return [m.model_dump(mode="json", by_alias=True) for m in _ag_ui_messages(thread)]

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
        return {
            "messages": [m.model_dump(mode="json", by_alias=True) for m in _ag_ui_messages(thread)],
            "state": await self._state(thread),
            "waiting": run.waiting_requests() if run is not None and thread.active else [],
        }

    # -- one request ----------------------------------------------------------------------------

    async def handle(self, request: Request, owner: str) -> Response:
        """Answer one ``POST`` of a ``RunAgentInput``: an SSE stream of AG-UI events, or an
        error (JSON ``{"error", "message"}``: 400/413/422 bad input, 404 another's thread, 409
        a run in the way, 503 the store is unavailable)."""
        body = await request.body()
        if len(body) > MAX_INPUT_BYTES:
            return _error(413, "too_large", f"a RunAgentInput of at most {MAX_INPUT_BYTES} bytes")
        try:
            given = RunAgentInput.model_validate_json(body)
        except ValidationError as error:
            return _error(422, "invalid_input", _validation_text(error))
        try:
            props = parse_sagents_props(given.forwarded_props)
        except DecisionError as error:
            return _error(422, "invalid_decisions", str(error))
        try:
            thread = await self.thread(given.thread_id, owner)
        except StoreUnavailableError as error:
            return _error(503, "store_unavailable", str(error))
        if thread is None:
            return _error(404, "unknown_thread", f"no thread {given.thread_id!r} of yours")
        async with thread.lock:
            run = thread.run
            if run is not None and run.attached:  # a client that just went away (Stop)?
                with anyio.move_on_after(_DETACH_WAIT_S):
                    while run.attached:
                        await run.changed().wait()
            if run is not None and run.attached:
                return _error(
                    409, "run_streaming", "this thread's run streams to another client now"
                )
            new_message = _new_user_message(given, thread)
            if run is not None and thread.active and run.cancelling and new_message is not None:
                with anyio.move_on_after(_CANCEL_WAIT_S):  # a Stop just before: let it end
                    while not run.finished:
                        await run.changed().wait()
            if run is not None and thread.active:
                if props.cancel:
                    run.cancelling = True
                    run.scope.cancel()
                elif new_message is not None:
                    if run.waiting:
                        return _error(
                            409,
                            "decisions_needed",
                            f"the thread's run waits for {', '.join(run.waiting)}: answer in "
                            "forwardedProps.sagents.decisions (without a new message), or "
                            "cancel with forwardedProps.sagents.cancel",
                        )
                    return _error(409, "run_in_progress", "the thread's run has not ended yet")
                else:
                    try:
                        run.check(props.decisions)
                    except DecisionError as error:
                        return _error(422, "invalid_decisions", str(error))
                    run.decide(props.decisions)
                run.attached = True
                snapshot = False
            else:
                if props.decisions:
                    ended = run.ended_text(next(iter(props.decisions))) if run else None
                    return _error(
                        422,
                        "invalid_decisions",
                        ended or "nothing in this thread waits for a decision (its run ended)",
                    )
                if new_message is None:
                    return _error(
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
        self._tg.start_soon(self._drive, thread, run)
        return run

    async def _stream(
        self, thread: Thread, run: Run, given: RunAgentInput, *, snapshot: bool
    ) -> AsyncIterator[str]:
        encode = self._encoder.encode
        completed = False
        try:
            yield encode(RunStartedEvent(thread_id=given.thread_id, run_id=given.run_id))
            if snapshot:
                yield encode(MessagesSnapshotEvent(messages=_ag_ui_messages(thread)))
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

    async def _drive(self, thread: Thread, run: Run) -> None:
        settings = self._settings
        translator = EventTranslator()
        given = list(thread.messages)
        given_ids = list(thread.ids)
        tools, mode = settings.tool_manager, settings.permission_mode
        if settings.tools_for is not None:
            tools, mode = settings.tools_for(thread.owner, settings.session_id(thread))
        context = SessionContext(session_id=settings.session_id(thread), permission_mode=mode)
        state = await self._state(thread)
        try:
            with run.scope:
                stream = settings.agent.run_stream(
                    given,
                    tool_manager=tools,
                    skill_manager=settings.skill_manager,
                    session_context=context,
                    approver=ThreadApprover(thread, ttl_s=settings.approval_ttl_s),
                )
                async with aclosing(stream) as events:
                    async for event in events:
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
                        run.push(translator.translate(event))
                        if isinstance(event, MessageEvent) and event.message.get("role") == "tool":
                            state = await self._state_delta(thread, run, state)
        except Exception:  # a bug below: the run ends with an error, the process goes on
            logger.exception("the AG-UI run of thread %r failed", thread.thread_id)
        finally:
            with anyio.CancelScope(shield=True):
                run.push(translator.close())
                await self._keep(thread, given, given_ids, translator.message_ids, run)
                run.finish()

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
        store = self._settings.store
        if store is None:
            return
        try:
            await store.save(
                StoredThread(
                    thread_id=thread.thread_id,
                    owner=thread.owner,
                    messages=tuple(history),
                    ids=tuple(ids),
                )
            )
        except StoreUnavailableError as error:
            run.store_error = f"the conversation was not saved: {error}"

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
            return _unauthorized()
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
            return _unauthorized()
        return await holder[0].handle(request, owner)

    return Starlette(routes=[Route(path, endpoint, methods=["POST"])], lifespan=lifespan)


def _unauthorized() -> JSONResponse:
    return _error(401, "unauthorized", "log in, or send Authorization: Bearer TOKEN")


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


def _validation_text(error: ValidationError) -> str:
    problems = [
        f"{'.'.join(str(p) for p in item['loc']) or 'body'}: {item['msg']}"
        for item in error.errors(include_url=False)[:5]
    ]
    return "not a RunAgentInput: " + "; ".join(problems)


def _new_user_message(given: RunAgentInput, thread: Thread) -> UserMessage | None:
    """The input's new user message: its last message, when that is a user message the
    thread has not seen (a client re-sends its whole history; only this part is taken)."""
    if not given.messages:
        return None
    last = given.messages[-1]
    if not isinstance(last, UserMessage) or last.id in thread.ids:
        return None
    return last


def _ag_ui_messages(thread: Thread) -> list[Any]:
    """The thread's history as AG-UI messages."""
    out: list[Any] = []
    for message_id, message in zip(thread.ids, thread.messages, strict=False):
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        if role == "user":
            out.append(UserMessage(id=message_id, content=text))
        elif role == "assistant":
            calls = [
                ToolCall(
                    id=str(call.get("id")),
                    function=FunctionCall(
                        name=str((call.get("function") or {}).get("name")),
                        arguments=str((call.get("function") or {}).get("arguments") or "{}"),
                    ),
                )
                for call in message.get("tool_calls") or []
            ]
            out.append(AssistantMessage(id=message_id, content=text, tool_calls=calls or None))
        elif role == "tool":
            out.append(
                ToolMessage(
                    id=message_id, content=text, tool_call_id=str(message.get("tool_call_id"))
                )
            )
        else:
            out.append(SystemMessage(id=message_id, content=text))
    return out
