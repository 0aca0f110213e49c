"""The threads of the AG-UI route and the agent runs they own (:mod:`sagents.agent.ag_ui`
serves them over HTTP).

A thread lives in memory while it is in use and in its store (``threads.sqlite3``) for good: its
conversation, and what its paused run waits for (:mod:`sagents.agent._ag_ui_waiting`). A run is
one ``SAgent.run_stream`` of the thread's history, or the resume of its paused run with the
decisions given; its AG-UI events gather on the :class:`~sagents.agent._ag_ui_threads.Run` that
the route streams. Items of a paused run whose time passes are decided here (an approval is
denied, a questionnaire times out), in a task of the route's task group.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.abc
from ag_ui.core import CustomEvent, StateDeltaEvent, StateSnapshotEvent, UserMessage

from sagents.agent._ag_ui_events import (
    APPROVAL_REQUEST,
    QUESTIONNAIRE_REQUEST,
    EventTranslator,
    new_message_id,
)
from sagents.agent._ag_ui_threads import Run, Thread, ThreadApprover
from sagents.agent._ag_ui_waiting import MAX_ENDED, Waiting, decided_state, held_request
from sagents.agent._events import (
    DoneEvent,
    MessageEvent,
    QuestionnaireRequestEvent,
    QuestionnaireResultEvent,
    not_started,
)
from sagents.agent._loop import SAgent
from sagents.agent._state import RunState
from sagents.core._permissions import PermissionMode
from sagents.core.events import ApprovalRequestEvent, ApprovalResultEvent
from sagents.errors import RunStateError, SagentsError, StoreUnavailableError
from sagents.skill._proxy import SkillSource
from sagents.store._threads import SqliteThreads, StoredThread
from sagents.tool._context import SessionContext
from sagents.tool._provider import ToolProvider
from sagents.tool.impl._todo import TodoStore

__all__ = ["MAX_THREADS_IN_MEMORY", "RunSettings", "ThreadRuns", "ToolsFor"]

logger = logging.getLogger(__name__)

MAX_THREADS_IN_MEMORY: Final = 1000
"""Threads kept in memory without a run (the least recently used are reloaded from the store
when they come back)."""

ToolsFor = Callable[[str, str], tuple[ToolProvider, PermissionMode]]
"""``(identity, session id)`` → the tools and permission mode of that identity's run in that
session (read at the start of each run), for a host whose callers are offered different tools
(the console: each profile its own)."""


@dataclass(kw_only=True)
class RunSettings:
    """What every run of the route's threads is given (see
    :func:`sagents.agent.ag_ui.open_ag_ui_threads`)."""

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


class ThreadRuns:
    """The threads, in memory and in their store, and the runs they own, in ``task_group``."""

    def __init__(self, settings: RunSettings, task_group: anyio.abc.TaskGroup) -> None:
        self._settings = settings
        self._tg = task_group
        self._threads: OrderedDict[str, Thread] = OrderedDict()

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

    def start(self, thread: Thread, message: UserMessage) -> Run:
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

    async def reread_waiting(self, thread: Thread) -> None:
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

    async def record(self, thread: Thread, waiting: Waiting) -> bool:
        """Store the decisions just put on ``waiting``, unless another process decided this
        thread's items meanwhile: then nothing of this answer is kept (False), and the thread
        is read from the store again next time. True once stored (or with no store).

        Raises:
            StoreUnavailableError: the store cannot be written (nothing is kept either).
        """
        store = self._settings.store
        if store is None:
            return True
        document = {"waiting": waiting.to_json(), "ended": dict(thread.ended)}
        try:
            kept = await store.replace_waiting(thread.thread_id, thread.saved_waiting, document)
        except StoreUnavailableError:
            self._forget(thread)
            raise
        if kept:
            thread.saved_waiting = document
        else:
            self._forget(thread)
        return kept

    def _forget(self, thread: Thread) -> None:
        """Drop the thread from memory: it is read from the store again next time."""
        thread.waiting = None
        self._threads.pop(thread.thread_id, None)

    def resume(self, thread: Thread, waiting: Waiting, ids: list[str], *, attached: bool) -> Run:
        """Continue the paused run with its decisions (in a task of the route)."""
        thread.waiting = None
        run = thread.run = Run(attached=attached)
        thread.notify()
        run.push(waiting.result_events(ids))
        self._tg.start_soon(self._drive, thread, run, waiting)
        return run

    async def expire(self, thread: Thread) -> None:
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
        self.note_ended(thread, ended)
        if waiting.decided:
            self.resume(thread, waiting, list(ended), attached=False)
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
                    await self.expire(thread)
                except StoreUnavailableError as error:  # said; the next request expires them
                    logger.warning("cannot expire the items of %r: %s", thread.thread_id, error)
                    return

    def note_ended(self, thread: Thread, ended: dict[str, str]) -> None:
        thread.ended.update(ended)
        for key in list(thread.ended)[: max(0, len(thread.ended) - MAX_ENDED)]:
            del thread.ended[key]

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
        state = await self.state(thread)
        # the snapshot is the state the run's deltas apply to: its first event, in order with
        # them (a snapshot the stream read itself could already hold what a delta repeats)
        run.push([StateSnapshotEvent(snapshot=state)])
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
                            if event.state is not None and _stored(event):
                                self._pause(thread, run, event.state, asked)
                            elif resume is not None and not_started(event):
                                thread.waiting = resume  # the same answer may be tried again
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
        if not_started(run.done):  # the agent's session is older than what the thread holds
            session = None
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

    async def state(self, thread: Thread) -> dict[str, Any]:
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
        after = await self.state(thread)
        delta = [
            {"op": "replace", "path": f"/{key}", "value": value}
            for key, value in after.items()
            if before.get(key) != value
        ]
        if delta:
            run.push([StateDeltaEvent.model_validate({"delta": delta})])
        return after


def _stored(done: DoneEvent) -> bool:
    """Whether the paused run of ``done`` is in the agent's store, where an answer resumes it
    from: an error beside ``interrupted`` is the store's failure to keep it (docs/agent.md,
    "Pausing and resuming"), and then no card is shown that could not be answered."""
    return done.reason != "interrupted" or done.error is None
