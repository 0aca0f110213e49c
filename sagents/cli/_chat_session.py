"""The terminal chat behind ``sagents chat``: the approver, the renderer and the loop.

Kept apart from :mod:`sagents.cli._chat` so that ``sagents --help`` does not import the agent
loop and the ``openai`` SDK.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import re
import select
import signal
import sys
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from rich.console import Console
from rich.text import Text

from sagents.agent import DoneEvent, MessageDeltaEvent, MessageEvent, RunState, SAgent
from sagents.agent._durable import approval_request
from sagents.agent._events import AgentEvent, not_started
from sagents.agent._messages import as_openai_messages
from sagents.agent._state import Interruption, Resolution
from sagents.cli._chat_tools import open_chat_tools
from sagents.cli._rich import stderr_console, stdout_console
from sagents.cli.terminal_approval import TerminalApprover
from sagents.core.events import ScriptProgressEvent, ToolProgressEvent
from sagents.errors import RunStateError, SagentsError
from sagents.skill import SkillProxy
from sagents.tool._approval import Approver, settle_answer
from sagents.tool._context import SessionContext
from sagents.tool._tool_proxy import ToolProxy
from sagents.tool.questions import Questioner, QuestionnaireAnswer

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TURN_FAILED",
    "ChatRenderer",
    "TerminalApprover",
    "json_line",
    "literal",
    "open_chat",
    "run_chat",
]

T = TypeVar("T")

_RESULT_PREVIEW_CHARS = 200  # characters of a tool result shown in the transcript


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 (but tab, newline), DEL, C1


def literal(text: str) -> Text:
    """``text`` as a rich ``Text`` shown literally: no markup is read, and every control
    character but tab and newline is shown as an escape (``\\x1b``), so that text from the
    model, a tool or a script cannot move the cursor, clear lines or retitle the terminal
    (ECMA-48 control functions)."""
    return Text(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def json_line(value: Any) -> str:
    """``value`` as one line of strict JSON (RFC 8259), as ``--json`` prints each event: a NaN
    or infinite number, which JSON cannot write, becomes ``null``."""
    return json.dumps(_finite(value), ensure_ascii=False, allow_nan=False)


_REDRAW = "\r\x1b[2K"  # carriage return, erase the line (ECMA-48 EL 2)


class _MainThreadWaits:
    """Waits of the main thread that Ctrl-C interrupts at once, and only there.

    The kernel may deliver SIGINT to any thread; Python's handler then runs in the main thread
    only when that thread next runs Python code, which a thread blocked in ``read`` or on a
    lock does not. So the main thread waits in ``select`` on what it waits for and on the
    signal wake-up fd (:func:`signal.set_wakeup_fd`): a signal wakes it wherever it landed.
    While :attr:`immediate` is False (the prompt and the turns), Ctrl-C is only noted and
    raised as ``KeyboardInterrupt`` by :meth:`wait`, so that it never lands between two
    statements of the code that handles the previous one; while True (opening and closing the
    tools) it raises at once.
    """

    immediate: bool = True

    def __enter__(self) -> _MainThreadWaits:
        self._pending = False
        self._wake, self._wake_w = os.pipe()
        self._done, self._done_w = os.pipe()  # a finished future's callback writes here
        self._asked, self._asked_w = os.pipe()  # ask_line writes here
        self._asks: queue.SimpleQueue[tuple[str, Future[str]]] = queue.SimpleQueue()
        self._held: list[Future[str]] = []
        for fd in self._fds():
            os.set_blocking(fd, False)
        self._old = signal.set_wakeup_fd(self._wake_w)
        self._old_handler = signal.signal(signal.SIGINT, self._interrupted)
        return self

    def __exit__(self, *exc_info: object) -> None:
        signal.signal(signal.SIGINT, self._old_handler)
        signal.set_wakeup_fd(self._old)
        self.release_asks()
        for fd in self._fds():
            os.close(fd)

    def _fds(self) -> tuple[int, ...]:
        return (self._wake, self._wake_w, self._done, self._done_w, self._asked, self._asked_w)

    def _interrupted(self, _signum: int, _frame: object) -> None:
        if self.immediate:
            raise KeyboardInterrupt
        self._pending = True

    def wait(self, *fds: int) -> list[int]:
        """Return once one of ``fds`` is readable (those that are); raises KeyboardInterrupt
        on Ctrl-C."""
        while True:
            if self._pending:
                self._pending = False
                raise KeyboardInterrupt
            ready, _, _ = select.select([self._wake, *fds], [], [])
            if self._wake in ready:
                _drain(self._wake)
                continue  # the handler runs, then the check above
            return [fd for fd in fds if fd in ready]

    def ask_line(self, prompt: str) -> str:
        """Read one line in the main thread, from a worker thread (the approver's and the
        questioner's reads during a turn): the main thread reads it in :meth:`result`, so a
        Ctrl-C there ends the read, and no thread is left reading stdin afterwards.

        Raises:
            EOFError: the end of input, or the turn was cancelled while it asked.
        """
        asked: Future[str] = Future()
        self._asks.put((prompt, asked))
        with contextlib.suppress(OSError):
            os.write(self._asked_w, b".")
        return asked.result()

    def _serve_asks(self) -> None:
        _drain(self._asked)
        while True:
            try:
                prompt, asked = self._asks.get_nowait()
            except queue.Empty:
                return
            try:
                asked.set_result(self.read_line(prompt) + "\n")
            except EOFError as end:
                asked.set_exception(end)
            except KeyboardInterrupt:
                # not answered here: the turn is cancelled first (release_asks after), so that
                # the read's end is not taken for the end of input (a denial)
                self._held.append(asked)
                raise

    def release_asks(self) -> None:
        """End the reads Ctrl-C interrupted, and any asked since (EOFError)."""
        held, self._held = self._held, []
        for asked in held:
            asked.set_exception(EOFError("cancelled"))
        self._refuse_asks()

    def _refuse_asks(self) -> None:
        while True:
            try:
                _prompt, asked = self._asks.get_nowait()
            except queue.Empty:
                return
            asked.set_exception(EOFError("cancelled"))

    def read_line(self, prompt: str) -> str:
        """``input(prompt)``, with Ctrl-C raising at once wherever the signal landed.

        Raises:
            EOFError: the end of input. KeyboardInterrupt: Ctrl-C.
        """
        try:
            fd = sys.stdin.fileno()
        except (OSError, ValueError, AttributeError):  # not a real file (a test's stdin)
            return input(prompt)
        sys.stdout.write(prompt)
        sys.stdout.flush()
        self.wait(fd)
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    def result(self, future: Future[T]) -> T:
        """``future.result()``, with Ctrl-C raising at once (the future keeps running)."""
        future.add_done_callback(self._wake_result)
        while not future.done():
            if self._asked in self.wait(self._done, self._asked):
                self._serve_asks()
            _drain(self._done)
        return future.result()

    def _wake_result(self, _future: Future[Any]) -> None:
        with contextlib.suppress(OSError):  # full (a wake-up waits already) or closed
            os.write(self._done_w, b".")


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 512):
            pass


@dataclass(kw_only=True)
class ChatRenderer:
    """Shows a run's events on the terminal (text on stdout, the rest on stderr)."""

    out: Console = field(default_factory=stdout_console)
    err: Console = field(default_factory=stderr_console)
    _in_text: bool = False
    _status_open: bool = False

    def show(self, event: AgentEvent) -> None:
        """Render one event."""
        if isinstance(event, ScriptProgressEvent):
            self._end_text()
            self._script_status(event)
            return
        self._close_status()
        if isinstance(event, MessageDeltaEvent):
            self.out.print(literal(event.delta), end="")
            self._in_text = True
            return
        self._end_text()
        if isinstance(event, MessageEvent):
            self._message(event.message)
        elif isinstance(event, ToolProgressEvent):
            if event.text:
                style = "red" if event.stream == "stderr" else "dim"
                for line in event.text.splitlines():
                    self.err.print(literal(f"  │ {line}"), style=style, overflow="fold")
        elif isinstance(event, DoneEvent):
            if event.error is not None:  # also after an answer: the store did not keep it
                hint = f" ({event.error['hint']})" if event.error.get("hint") else ""
                self.err.print(literal(f"error: {event.error['message']}{hint}"), style="red")
            if event.reason not in ("stop", "interrupted", "error"):  # interrupted: it asks
                self.err.print(Text(f"(turn ended: {event.reason})", style="yellow"))

    def _script_status(self, event: ScriptProgressEvent) -> None:
        """A run_script's status line: on a terminal one line redrawn in place until its final
        status; elsewhere one line per snapshot."""
        bar = ""
        if event.total:
            share = (event.done or 0) / event.total
            bar = f" [{'#' * int(share * 20):<20}] {event.done:g}/{event.total:g}"
        note = f" {event.message}" if event.message else ""
        calls = f"{event.calls} call" + ("" if event.calls == 1 else "s")
        status = literal(f"  ⚙ script {event.status}: {calls}, {event.failures} failed{bar}{note}")
        if not self.err.is_terminal:
            self.err.print(status, style="cyan")
            return
        self.err.file.write(_REDRAW)
        self.err.print(status, style="cyan", end="", overflow="ellipsis", no_wrap=True)
        self.err.file.flush()
        self._status_open = event.status == "running"
        if not self._status_open:
            self.err.print()

    def _close_status(self) -> None:
        if self._status_open:  # the status line stays as it was last drawn
            self.err.print()
            self._status_open = False

    def _end_text(self) -> None:
        if self._in_text:
            self.out.print()
            self._in_text = False

    def _message(self, message: Any) -> None:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                self.err.print(
                    literal(f"  → {function.get('name')}({function.get('arguments', '')})"),
                    style="bold",
                    overflow="fold",
                )
        elif message.get("role") == "tool":
            content = " ".join(str(message.get("content") or "").split())  # one line
            first = content[:_RESULT_PREVIEW_CHARS]
            if len(content) > _RESULT_PREVIEW_CHARS:
                first += " …"
            self.err.print(literal(f"  ← {first}"), style="dim", overflow="fold")


@dataclass(kw_only=True)
class _Chat:
    """The chat's conversation. With an approver (a person at the terminal) its runs defer
    (``approvals="defer"``): a call that needs the person pauses the run, whose state the
    agent's store keeps, then the chat asks and resumes it; a chat that ended while it asked
    (killed, closed, quit) is continued by ``sagents chat --resume`` from that state."""

    agent: SAgent
    tools: ToolProxy
    skills: SkillProxy | None
    context: SessionContext
    approver: Approver | None
    questioner: Questioner | None
    renderer: ChatRenderer
    as_json: bool
    history: list[dict[str, Any]] = field(default_factory=list)
    running: bool = False
    cancelling: bool = False
    left: RunState | None = None  # a paused run, decided, whose resume the store refused
    _asking: anyio.CancelScope | None = None

    async def turn(self, text: str) -> DoneEvent | None:
        """Run one turn for the user's ``text`` (asking what its paused runs wait for); a
        paused run whose resume the store refused is continued first, with its answers (a
        later turn would leave it waiting in the store, for ``--resume`` to take over)."""
        if self.left is not None:
            done = await self._run_to_end(self.left)
            if self.left is not None:  # the store still refuses it: the text is not sent
                self.renderer.err.print(
                    Text("(not sent: the turn that waits for the store goes first)")
                )
                return done
        self.history.append({"role": "user", "content": text})
        return await self._run_to_end(None)

    async def resume(self, state: RunState) -> DoneEvent | None:
        """Continue a paused run the store kept: ask what it waits for, then run on."""
        return await self._run_to_end(state)

    def cancel(self) -> None:
        """Cancel the turn: its run, or the questions a paused run waits for (the run is then
        resumed cancelled, so nothing of it stays pending)."""
        self.cancelling = True
        self.agent.cancel()
        if self._asking is not None:
            self._asking.cancel()

    async def restore(self) -> RunState | None:
        """Take the stored conversation of this chat's session (``--resume``); the paused run
        it left waiting, if any (a state that cannot be continued is said and left).

        Raises:
            StoreError: the store failed.
            RunStateError: the stored session cannot be read.
        """
        stored = await self.agent.load_session(self.context.session_id)
        if stored is not None:
            self.history = [dict(m) for m in as_openai_messages(stored.history)]
        state_id = await self.agent.store.pending_state(self.context.session_id)
        if state_id is None:
            return None
        try:
            return await self.agent.load_state(state_id)
        except RunStateError as error:
            self.renderer.err.print(literal(f"the paused turn cannot be resumed: {error}"))
            return None

    async def _run_to_end(self, state: RunState | None) -> DoneEvent | None:
        self.running, self.cancelling = True, False
        try:
            done = None
            if state is None:
                done = await self._stream(self.history, None)
                state = done.state if done is not None else None
            while state is not None:  # the run paused: ask, then continue it
                await self._decide(state)
                done = await self._stream([], state)
                self.left = state if not_started(done) else None  # nothing claimed: kept
                state = done.state if done is not None else None
        finally:
            self.running = False
        if done is not None:
            self.history = [dict(m) for m in done.messages]
        return done

    async def _stream(
        self, messages: list[dict[str, Any]], state: RunState | None
    ) -> DoneEvent | None:
        done: DoneEvent | None = None
        stream = self.agent.run_stream(
            messages,
            tool_manager=self.tools,
            skill_manager=self.skills,
            session_context=self.context,
            approver=self.approver,
            questioner=self.questioner,
            approvals="wait" if self.approver is None else "defer",
            state=state,
        )
        async with aclosing(stream):
            async for event in stream:
                if self.as_json:
                    sys.stdout.write(json_line(event.to_dict()) + "\n")
                    sys.stdout.flush()
                else:
                    self.renderer.show(event)
                if isinstance(event, DoneEvent):
                    done = event
        return done

    async def _decide(self, state: RunState) -> None:
        """Ask the person each item the paused run waits for and put the answers on the
        state; a cancelled turn cancels what is left (the resume then ends the run)."""
        with anyio.CancelScope() as self._asking:
            if self.cancelling:  # Ctrl-C came as the run paused
                self._asking.cancel()
            for item in state.undecided:
                if item.kind == "questionnaire":
                    await self._answer(state, item)
                else:
                    await self._approve(state, item)
        self._asking = None
        if state.undecided:
            state.cancel(reason="the turn was cancelled at the prompt")

    async def _approve(self, state: RunState, item: Interruption) -> None:
        request = approval_request(item, state.session_id)
        if self.approver is None:
            state.deny(item.id, reason="nobody could be asked (stdin is not a terminal)")
            return
        answer = settle_answer(request, await self.approver.approve(request))
        if answer == "deny":
            state.deny(item.id)
        else:
            state.approve(item.id, scope="session" if answer == "allow_session" else "once")

    async def _answer(self, state: RunState, item: Interruption) -> None:
        answer = QuestionnaireAnswer(status="cancelled", message="nobody could be asked")
        if self.questioner is not None:
            answer = await self.questioner.ask(item.questionnaire(), time_limit=math.inf)
        if answer.status == "answered":
            state.answer(item.id, answer.answers)
        else:  # declined, cancelled or timed out: the tool says so to the model
            state.decisions[item.id] = Resolution(questionnaire=answer)

    def command(self, line: str) -> bool:
        """Run a ``/command``; False for ``/quit``."""
        out = self.renderer.out
        name = line.split()[0]
        if name in ("/quit", "/exit"):
            return False
        if name == "/tools":
            wanted = line.split()[1:]
            if wanted:
                self._show_schema(wanted[0])
                return True
            for spec in self.tools.list_specs():
                out.print(literal(f"{spec.name}  ({spec.permission})  {spec.summary}"))
        elif name == "/skills":
            skills = self.skills.list_skills() if self.skills is not None else []
            if not skills:
                out.print("no skills (pass --skills DIR)")
            for skill in skills:
                out.print(literal(f"{skill.name}  {skill.description}"))
        elif name == "/history":
            for message in self.history:
                out.print(literal(json.dumps(message, ensure_ascii=False)), overflow="fold")
        else:
            out.print(
                Text(f"unknown command {name!r}; try /tools [NAME], /skills, /history, /quit")
            )
        return True

    def _show_schema(self, name: str) -> None:
        """``/tools NAME``: the tool's description and its input schema (JSON Schema)."""
        specs = {spec.name: spec for spec in self.tools.list_specs()}
        spec = specs.get(name)
        if spec is None:
            close = [n for n in specs if name.lower() in n.lower()][:5]
            hint = f"; did you mean {', '.join(close)}?" if close else "; /tools lists them"
            self.renderer.out.print(literal(f"no tool {name!r} in this session{hint}"))
            return
        out = self.renderer.out
        out.print(literal(f"{spec.name}  ({spec.permission})"))
        if spec.description:
            out.print(literal(spec.description), overflow="fold")
        schema = json.dumps(dict(spec.input_schema), indent=2, ensure_ascii=False)
        out.print(literal(schema), overflow="fold")


@asynccontextmanager
async def open_chat(
    agent: SAgent,
    loaded: Any,
    skills: SkillProxy | None,
    context: SessionContext,
    approver: Approver | None,
    as_json: bool,
    questioner: Questioner | None = None,
) -> AsyncIterator[_Chat]:
    """The chat's session with its tools open: the configured built-in tools that need no
    sandbox are offered, and ``questionnaire`` with a ``questioner`` (unless a configured tool
    already has the name). Leaving closes the tools and the model client, then the agent (which
    saves again a session its store did not keep)."""
    async with (
        agent,
        open_chat_tools(agent.model, loaded, questionnaire=questioner is not None) as manager,
    ):
        yield _Chat(
            agent=agent,
            tools=ToolProxy([manager]),
            skills=skills,
            context=context,
            approver=approver,
            questioner=questioner,
            renderer=ChatRenderer(),
            as_json=as_json,
        )


EXIT_OK = 0
"""The last turn ended normally (``stop`` or ``max_turns``), or there was none."""
EXIT_TURN_FAILED = 1
"""The last turn ended in an error, or was cancelled; or the store did not keep the chat."""
EXIT_INTERRUPTED = 130
"""A second Ctrl-C quit while a turn was being cancelled (128 + SIGINT, as shells say)."""


class _Quit(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def run_chat(
    agent: SAgent,
    loaded: Any,
    skills: SkillProxy | None,
    context: SessionContext,
    approver: Approver | None,
    as_json: bool,
    prompt: str | None,
    interactive: bool,
    questioner: Questioner | None = None,
    *,
    resume: bool = False,
) -> int:
    """Run the chat (one ``prompt`` turn, or the interactive loop); returns the exit code
    (:data:`EXIT_OK`, :data:`EXIT_TURN_FAILED`, :data:`EXIT_INTERRUPTED`). With ``resume``
    the session's stored conversation is taken first, and a turn it left waiting for the
    person is asked again and continued.

    The event loop runs in a thread of its own (an anyio blocking portal) and this thread reads
    the prompt, so that Ctrl-C (delivered to this thread) interrupts the prompt at once: at the
    prompt it clears the line, and a second one in a row quits; during a turn it cancels the
    turn, and a second one quits. Nothing of it ends in a traceback.

    A chat whose session the store still did not keep when the agent closed says so, and
    its exit code is :data:`EXIT_TURN_FAILED` (unless it was already another failure)."""

    def opening(waits: _MainThreadWaits) -> AbstractAsyncContextManager[_Chat]:
        return open_chat(
            agent,
            loaded,
            skills,
            context,
            _reading(approver, waits),
            as_json,
            _reading(questioner, waits),
        )

    code = _chat_code(opening, prompt, interactive, resume)
    if context.session_id in agent.unsaved_sessions:
        stderr_console().print(
            literal(
                f"error: the chat {context.session_id} was not saved: the store failed "
                "(its error is above)"
            ),
            style="red",
        )
        return EXIT_TURN_FAILED if code == EXIT_OK else code
    return code


def _chat_code(
    opening: Callable[[_MainThreadWaits], AbstractAsyncContextManager[_Chat]],
    prompt: str | None,
    interactive: bool,
    resume: bool,
) -> int:
    err = stderr_console()
    try:
        with (
            _MainThreadWaits() as waits,
            start_blocking_portal(backend="asyncio") as portal,
            portal.wrap_async_context_manager(opening(waits)) as session,
        ):
            waits.immediate = False
            try:
                if resume:
                    code = _resume(portal, waits, session)
                    if code is not None and prompt is None and not interactive:
                        return code  # nothing more to read: the continued turn's code
                if prompt is not None:
                    done = _turn(portal, waits, session, prompt)
                    return _code_of(done)
                return _repl(portal, waits, session, interactive)
            except _Quit as quit:
                err.print(Text("(quit)"))
                return quit.code
            finally:
                waits.immediate = True
    except KeyboardInterrupt:  # Ctrl-C while the tools were being opened or closed
        err.print(Text("(interrupted)"))
        return EXIT_INTERRUPTED


def _resume(portal: BlockingPortal, waits: _MainThreadWaits, session: _Chat) -> int | None:
    """Take the stored conversation; continue the turn it left waiting, if any (its exit
    code; None when there was none)."""
    try:
        paused = portal.call(session.restore)
    except SagentsError as error:  # the store failed, or its session cannot be read
        session.renderer.err.print(literal(f"error: cannot resume the chat: {error}"), style="red")
        raise _Quit(EXIT_TURN_FAILED) from None
    session.renderer.err.print(
        literal(f"(resumed {session.context.session_id}: {len(session.history)} messages)")
    )
    if paused is None:
        return None
    waiting = len(paused.undecided)
    session.renderer.err.print(
        Text(f"(the last turn waits for {waiting} answer{'' if waiting == 1 else 's'})")
    )
    return _code_of(_turn(portal, waits, session, paused))


R = TypeVar("R", bound=Approver | Questioner | None)


def _reading(asker: R, waits: _MainThreadWaits) -> R:
    """The terminal approver or questioner reading its answers in the main thread (so that
    Ctrl-C ends a read, and no thread keeps reading stdin after it); any other as it is."""
    from sagents.cli._chat_questions import TerminalQuestioner  # it imports this module

    if isinstance(asker, TerminalApprover):
        return cast(R, replace(asker, ask=waits.ask_line))
    if isinstance(asker, TerminalQuestioner):
        return cast(R, replace(asker, read=lambda: waits.ask_line("")))
    return asker


def _code_of(done: DoneEvent | None) -> int:
    return (
        EXIT_OK if done is not None and done.reason in ("stop", "max_turns") else EXIT_TURN_FAILED
    )


def _turn(
    portal: BlockingPortal, waits: _MainThreadWaits, session: _Chat, text: str | RunState
) -> DoneEvent | None:
    """Run one turn in the portal (or continue a paused one); Ctrl-C cancels it, a second
    one quits."""
    if isinstance(text, RunState):
        future = portal.start_task_soon(session.resume, text)
    else:
        future = portal.start_task_soon(session.turn, text)
    cancelling = False
    while True:
        try:
            return waits.result(future)
        except KeyboardInterrupt:
            if cancelling:
                future.cancel()
                raise _Quit(EXIT_INTERRUPTED) from None
            cancelling = True
            session.renderer.err.print(Text("\n(cancelling the turn; Ctrl-C again quits)"))
            portal.call(session.cancel)
            waits.release_asks()  # after the cancel: the read it ended is no answer


def _repl(
    portal: BlockingPortal, waits: _MainThreadWaits, session: _Chat, interactive: bool
) -> int:
    out, err = session.renderer.out, session.renderer.err
    if interactive and not session.as_json:
        out.print(
            Text(
                "sagents chat: /tools [NAME], /skills, /history, /quit; Ctrl-C cancels a turn, "
                "or clears the line (twice in a row: quit)."
            )
        )
    code = EXIT_OK
    interrupted = False
    while True:
        try:
            line = waits.read_line("> " if interactive else "")
        except EOFError:
            return code
        except KeyboardInterrupt:
            if interrupted:
                err.print(Text("\n(Ctrl-C twice: quit)"))
                return code
            interrupted = True
            err.print(Text("\n(line cleared; Ctrl-C again quits)"))
            continue
        interrupted = False
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            if not session.command(text):
                return code
            continue
        code = _code_of(_turn(portal, waits, session, text))
