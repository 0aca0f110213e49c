"""The terminal chat behind ``sagents chat``: the approver, the renderer and the loop.

Kept apart from :mod:`sagents.cli._chat` so that ``sagents --help`` does not import the agent
loop and the ``openai`` SDK.
"""

from __future__ import annotations

import json
import math
import re
import signal
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass, field
from typing import Any

import anyio
from rich.console import Console
from rich.text import Text

from sagents.agent import DoneEvent, MessageDeltaEvent, MessageEvent, SAgent
from sagents.agent._events import AgentEvent
from sagents.cli._chat_tools import register_chat_builtins
from sagents.cli._rich import stderr_console, stdout_console
from sagents.cli.terminal_approval import TerminalApprover
from sagents.config.tools import build_tool_manager
from sagents.core.events import ScriptProgressEvent, ToolProgressEvent
from sagents.skill import SkillProxy
from sagents.tool._approval import Approver
from sagents.tool._context import SessionContext
from sagents.tool._tool_proxy import ToolProxy
from sagents.tool.questions import Questioner
from sagents.tool.tool_manager import ToolManager

__all__ = ["ChatRenderer", "TerminalApprover", "json_line", "literal", "run_chat"]

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


def _read_line(prompt: str) -> str:
    return input(prompt)


@dataclass(kw_only=True)
class ChatRenderer:
    """Shows a run's events on the terminal (text on stdout, the rest on stderr)."""

    out: Console = field(default_factory=stdout_console)
    err: Console = field(default_factory=stderr_console)
    _in_text: bool = False

    def show(self, event: AgentEvent) -> None:
        """Render one event."""
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
        elif isinstance(event, ScriptProgressEvent):
            bar = ""
            if event.total:
                share = (event.done or 0) / event.total
                bar = f" [{'#' * int(share * 20):<20}] {event.done:g}/{event.total:g}"
            note = f" {event.message}" if event.message else ""
            calls = f"{event.calls} call" + ("" if event.calls == 1 else "s")
            self.err.print(
                literal(f"  ⚙ script {event.status}: {calls}, {event.failures} failed{bar}{note}"),
                style="cyan",
            )
        elif isinstance(event, DoneEvent):
            if event.reason == "error" and event.error is not None:
                hint = f" ({event.error['hint']})" if event.error.get("hint") else ""
                self.err.print(literal(f"error: {event.error['message']}{hint}"), style="red")
            elif event.reason != "stop":
                self.err.print(Text(f"(turn ended: {event.reason})", style="yellow"))

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

    async def turn(self, text: str) -> DoneEvent | None:
        self.history.append({"role": "user", "content": text})
        done: DoneEvent | None = None
        self.running, self.cancelling = True, False
        try:
            stream = self.agent.run_stream(
                self.history,
                tool_manager=self.tools,
                skill_manager=self.skills,
                session_context=self.context,
                approver=self.approver,
                questioner=self.questioner,
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
        finally:
            self.running = False
        if done is not None:
            self.history = [dict(m) for m in done.messages]
        return done

    def command(self, line: str) -> bool:
        """Run a ``/command``; False for ``/quit``."""
        out = self.renderer.out
        name = line.split()[0]
        if name in ("/quit", "/exit"):
            return False
        if name == "/tools":
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
            out.print(Text(f"unknown command {name!r}; try /tools, /skills, /history, /quit"))
        return True


async def run_chat(
    agent: SAgent,
    loaded: Any,
    skills: SkillProxy | None,
    context: SessionContext,
    approver: Approver | None,
    as_json: bool,
    prompt: str | None,
    interactive: bool,
    questioner: Questioner | None = None,
) -> int:
    """Run the chat (one ``prompt`` turn, or the interactive loop); returns the exit code.

    The configured built-in tools that need no sandbox are offered, and ``questionnaire``
    with a ``questioner`` (unless a configured tool already has the name)."""
    async with AsyncExitStack() as stack:
        stack.push_async_callback(agent.model.aclose)
        if loaded is not None:
            manager = await stack.enter_async_context(await build_tool_manager(loaded))
        else:
            manager = await stack.enter_async_context(ToolManager())
        register_chat_builtins(manager, loaded, questionnaire=questioner is not None)
        session = _Chat(
            agent=agent,
            tools=ToolProxy([manager]),
            skills=skills,
            context=context,
            approver=approver,
            questioner=questioner,
            renderer=ChatRenderer(),
            as_json=as_json,
        )
        if prompt is not None:
            done = await _with_interrupts(session, lambda: session.turn(prompt))
            return 0 if done is not None and done.reason in ("stop", "max_turns") else 1
        code: int = await _with_interrupts(session, lambda: _repl(session, interactive))
        return code
    return 0  # pragma: no cover - the block returns


async def _repl(session: _Chat, interactive: bool) -> int:
    out = session.renderer.out
    if interactive and not session.as_json:
        out.print("sagents chat: /tools, /skills, /history, /quit; Ctrl-C cancels a turn.")
    code = 0
    while True:
        try:
            line = await anyio.to_thread.run_sync(_read_line, "> " if interactive else "")
        except EOFError:
            return code
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            if not session.command(text):
                return code
            continue
        done = await session.turn(text)
        code = 0 if done is not None and done.reason in ("stop", "max_turns") else 1


async def _with_interrupts(session: _Chat, work: Callable[[], Any]) -> Any:
    """Run ``work`` with Ctrl-C cancelling the running turn, and a second one quitting."""
    result: Any = 1
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _signal in signals:
                    if session.running and not session.cancelling:
                        session.cancelling = True
                        session.agent.cancel()
                        session.renderer.err.print("\n(cancelling the turn; Ctrl-C again quits)")
                    else:
                        tg.cancel_scope.cancel()
                        return

        async def run() -> None:
            nonlocal result
            result = await work()
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        tg.start_soon(run)
    return result
