"""History compression: older turns become one summary message (docs/agent.md, "History
compression").

When the request of a turn passes ``SAgent(max_history_tokens=...)`` (counted offline with the
project's token counter), or when the model calls ``compress_history``, the loop:

1. splits the history: leading system messages and the latest turns (up to
   ``CompressionSettings.keep_recent_tokens``) stay; the cut never falls between an assistant
   message's tool calls and their results, so no ``tool_call_id`` is orphaned;
2. announces it: a ``history.compress`` event with the counts, before anything runs;
3. asks the model (the agent's, or ``CompressionSettings.model``) for a summary of the rest;
4. restores what must survive in the summary message: each loaded skill's instructions (as
   ``load_skill`` gave them), the session's task list (``todo_read``, when the session has it)
   and the tools a suggestion step picked or expanded (``audit_status``);
5. replaces the older part with the user's own messages of it, verbatim (the task that started
   the run and every later instruction: a summary never replaces them), and that one message;
   records what it dropped (a JSON file in the session's records folder) and says so: a
   ``history.compressed`` event.

A model failure while summarising leaves the history untouched; ``history.compressed`` then has
``ok=false`` and the error.
"""

from __future__ import annotations

import functools
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio

from sagents.agent._chat_model import ChatModel, ModelRequest, complete
from sagents.agent._events import HistoryCompressedEvent, HistoryCompressEvent
from sagents.agent._messages import Message, TextPart, as_messages, as_openai_messages
from sagents.audit._store import default_data_dir
from sagents.core._tokens import TokenCounter, default_token_counter
from sagents.errors import InvalidArgumentsError, ModelError, SagentsError
from sagents.skill import load_skill
from sagents.tool._arguments import parse_arguments

if TYPE_CHECKING:
    from sagents.agent._run import ActiveRun
    from sagents.agent._session import AgentSession

__all__ = [
    "CompressionReason",
    "CompressionSettings",
    "HistoryCompressor",
    "MessageTokens",
    "message_tokens",
    "split_history",
]

CompressionReason = Literal["budget", "requested", "context_length"]

SUMMARY_PREFIX: Final = "[Summary of the earlier conversation]"
_SUMMARY_PROMPT: Final = (
    "You compress a conversation between a user and an AI agent that uses tools. Write a "
    "summary the agent can continue from: the user's goals and constraints, decisions made, "
    "facts learned (names, paths, numbers, URLs), what each tool call found, and what is still "
    "open. Be concise and concrete; do not invent anything."
)
_MESSAGE_OVERHEAD_TOKENS: Final = 4  # role and separators of one chat message
_MIN_MESSAGE_TOKENS: Final = 100  # the least of one message shown to the summariser

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class CompressionSettings:
    """How the loop compresses a history.

    Attributes:
        keep_recent_tokens: Tokens of the latest messages kept as they are (at least the last
            exchange is kept whatever its size); half the budget when None (2,000 without one).
        summary_tokens: The summary is cut to this many tokens; a quarter of the budget when
            None (1,000 without one).
        summary_input_tokens: Tokens of the older part shown to the summariser at most (each
            message is cut to its share; the records keep everything).
        model: The model that summarises; the agent's own when None.
        records_dir: Where the dropped parts are written; when None,
            ``<workspace>/.agent/history/`` if the session's workspace is a host folder, else
            ``<data dir>/sessions/<session id>/history/``.
    """

    keep_recent_tokens: int | None = None
    summary_tokens: int | None = None
    summary_input_tokens: int = 30_000
    model: ChatModel | None = None
    records_dir: Path | None = None

    def keep_tokens(self, budget: int | None) -> int:
        if self.keep_recent_tokens is not None:
            return self.keep_recent_tokens
        return budget // 2 if budget else 2000

    def summary_cap(self, budget: int | None) -> int:
        if self.summary_tokens is not None:
            return self.summary_tokens
        return max(budget // 4, 50) if budget else 1000


def message_tokens(message: Mapping[str, Any], counter: TokenCounter) -> int:
    """Tokens of one chat message as sent (its JSON, which counts content, calls and ids)."""
    return counter.count(json.dumps(message, ensure_ascii=False)) + _MESSAGE_OVERHEAD_TOKENS


class MessageTokens:
    """Counts the tokens of messages, each distinct message once (the history grows by a few
    messages a turn: counting it whole each turn would cost ~0.3 s at 100,000 tokens)."""

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter
        self._known: dict[tuple[int, int], int] = {}  # (length, hash) of a message's JSON

    def total(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The sum of :func:`message_tokens` over ``messages``."""
        total = 0
        for message in messages:
            text = json.dumps(message, ensure_ascii=False)
            key = (len(text), hash(text))
            count = self._known.get(key)
            if count is None:
                count = self._known[key] = self._counter.count(text) + _MESSAGE_OVERHEAD_TOKENS
            total += count
        return total


def split_history(
    messages: Sequence[Mapping[str, Any]], *, keep_tokens: int, counter: TokenCounter
) -> tuple[int, int]:
    """``(start, cut)``: messages before ``start`` are leading system messages (kept),
    ``messages[start:cut]`` are summarised, ``messages[cut:]`` are kept.

    The cut falls only before a message that is not a tool result, so every tool call stays
    with its results; the kept part is the longest such tail within ``keep_tokens``, and at
    least the last exchange (an assistant message with its results, or one message).
    ``cut == start`` means there is nothing to summarise.
    """
    start = 0
    while start < len(messages) and messages[start].get("role") == "system":
        start += 1
    cut = len(messages)
    used = 0
    index = len(messages)
    while index > start:
        index -= 1
        used += message_tokens(messages[index], counter)
        if messages[index].get("role") == "tool":
            continue  # the cut cannot fall here: its call comes before it
        if cut != len(messages) and used > keep_tokens:
            break
        cut = index
        if used > keep_tokens:
            break  # the last exchange alone is over the share: keep it, nothing more
    return start, max(cut, start)


def _render(message: Mapping[str, Any], tokens: int, counter: TokenCounter) -> str:
    role = str(message.get("role"))
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "[image]")) for p in content if isinstance(p, Mapping))
    if content:
        label = f"tool result {message.get('tool_call_id', '')}".strip() if role == "tool" else role
        parts.append(f"[{label}] {content}")
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(f"[{role} calls {function.get('name')}] {function.get('arguments', '')}")
    text = "\n".join(parts)
    if counter.exceeds(text, tokens):
        text = counter.head(text, tokens) + " [...cut]"
    return text


def _users_own(dropped: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The user's messages of the dropped part, verbatim (not earlier summaries)."""
    return [
        dict(m)
        for m in dropped
        if m.get("role") == "user"
        and not (isinstance(m.get("content"), str) and m["content"].startswith(SUMMARY_PREFIX))
    ]


def _skill_name(call: Mapping[str, Any]) -> str | None:
    function = call.get("function") or {}
    if function.get("name") != "load_skill":
        return None
    try:  # the model's text: depth- and size-safe, as the call itself was parsed
        arguments = parse_arguments("load_skill", function.get("arguments"))
    except InvalidArgumentsError:
        return None
    name = arguments.get("name")
    return name if isinstance(name, str) else None


def _skill_texts(dropped: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """What ``load_skill`` returned for each skill loaded in ``dropped`` (the last time)."""
    names: dict[str, str] = {}
    texts: dict[str, str] = {}
    for message in dropped:
        for call in message.get("tool_calls") or []:
            name = _skill_name(call)
            if name is not None:
                names[str(call.get("id"))] = name
        if message.get("role") == "tool" and message.get("tool_call_id") in names:
            content = message.get("content")
            if isinstance(content, str) and not content.startswith("Error ["):
                texts[names[str(message["tool_call_id"])]] = content
    return texts


class HistoryCompressor:
    """Compresses one run's history (the loop makes one per run).

    Args:
        run: The run's state (history, events, tools).
        model: The agent's model.
        budget: ``SAgent.max_history_tokens`` (None: only when the model asks).
        settings: See :class:`CompressionSettings`.
        system: Builds the turn's system messages (counted against the budget).
    """

    def __init__(
        self,
        run: ActiveRun,
        *,
        model: ChatModel,
        budget: int | None,
        settings: CompressionSettings,
        system: Callable[[AgentSession], list[dict[str, Any]]],
    ) -> None:
        self._run = run
        self._model = settings.model or model
        self._budget = budget
        self._settings = settings
        self._system = system

    @functools.cached_property
    def _lock(self) -> anyio.Lock:
        # Made on first use: most runs never compress, and an anyio lock made for each run
        # that takes a step (every run with a tool call) was a measurable part of its
        # set-up (bench/bench_agent_loop.py --calls).
        return anyio.Lock()

    @functools.cached_property
    def _counter(self) -> TokenCounter:
        # Taken on first use, not per run: loading the tiktoken encoding adds ~46 MB to the
        # process, which a run without a budget never needs (bench/bench_agent_memory.py).
        return default_token_counter()

    @functools.cached_property
    def _tally(self) -> MessageTokens:
        return MessageTokens(self._counter)

    def request_tokens(self) -> int:
        """Tokens of the next request's messages: system prompt and history."""
        return self._tally.total([*self._system(self._run.session), *self._run.session.messages])

    async def compress_if_over_budget(self) -> Mapping[str, Any] | None:
        """Compress when the next request passes the budget; the report, or None."""
        if self._budget is None:
            return None
        tokens = await anyio.to_thread.run_sync(self.request_tokens)  # CPU: off the loop
        if tokens <= self._budget:
            return None
        return await self.compress(reason="budget")

    async def compress(
        self, *, reason: CompressionReason, focus: str | None = None
    ) -> Mapping[str, Any]:
        """Summarise the older part of the history now.

        Returns:
            ``{"compressed", "reason", "dropped", "kept", "tokens_before", "tokens_after",
            "record", "error"}``.
        """
        async with self._lock:
            return await self._compress(reason, focus)

    async def _compress(self, reason: CompressionReason, focus: str | None) -> dict[str, Any]:
        state = self._run.session
        history = state.history
        messages = as_openai_messages(history)
        counter = self._counter
        tokens_before = self.request_tokens()
        keep = self._settings.keep_tokens(self._budget)
        if reason == "context_length":
            # the model refused this request as too long, whatever the budget says (a budget
            # for a larger model, a count below the model's own tokenizer's): keep at most
            # half of what it refused, so that there is an older part to summarise
            keep = min(keep, tokens_before // 2)
        start, cut = split_history(messages, keep_tokens=keep, counter=counter)
        report: dict[str, Any] = {
            "compressed": False,
            "reason": reason,
            "dropped": cut - start,
            "kept": len(messages) - cut,
            "tokens_before": tokens_before,
            "tokens_after": tokens_before,
            "record": None,
            "error": None,
        }
        if cut - start < 2:
            report["dropped"] = 0
            report["reason"] = f"the history has {tokens_before:,} tokens and no older turns"
            return report
        dropped = [dict(m) for m in messages[start:cut]]
        ts = self._run.hubs[0].clock.time()
        await self._run.emit(
            HistoryCompressEvent(
                reason=reason,
                messages=len(messages),
                dropped=len(dropped),
                kept=len(messages) - cut,
                tokens_before=tokens_before,
                budget=self._budget,
                ts=ts,
            )
        )
        try:
            summary = await self._summarise(dropped, focus)
        except SagentsError as failure:
            return await self._failed(report, f"the model could not summarise: {failure.message}")
        restored = await self._restored(dropped, messages[cut:])
        try:  # nothing is dropped without its record
            record = await anyio.to_thread.run_sync(self._record, dropped, summary, reason)
        except OSError as failure:
            folder = self._records_dir()
            return await self._failed(
                report, f"the dropped messages could not be written to {folder}: {failure}"
            )
        content = "\n\n".join(
            [
                f"{SUMMARY_PREFIX} {len(dropped)} earlier messages were summarised; the full "
                f"text is kept in {record}.",
                summary,
                *restored,
            ]
        )
        if history is not state.history or len(history) < cut:
            raise RuntimeError("the history changed while it was being compressed")
        # the user's own messages stay as they were, before the summary (in place: the run
        # holds the list)
        history[start:cut] = as_messages(
            [*_users_own(dropped), {"role": "user", "content": content}]
        )
        report.update(compressed=True, tokens_after=self.request_tokens(), record=str(record))
        await self._run.emit(
            HistoryCompressedEvent(
                ok=True,
                dropped=len(dropped),
                tokens_before=tokens_before,
                tokens_after=report["tokens_after"],
                record=str(record),
                ts=self._run.hubs[0].clock.time(),
            )
        )
        return report

    async def _summarise(self, dropped: Sequence[Mapping[str, Any]], focus: str | None) -> str:
        counter = self._counter
        share = max(_MIN_MESSAGE_TOKENS, self._settings.summary_input_tokens // len(dropped))
        transcript = "\n\n".join(_render(m, share, counter) for m in dropped)
        ask = "Summarise this part of the conversation:\n\n" + transcript
        if focus:
            ask += f"\n\nKeep in particular: {focus}"
        request = ModelRequest(
            system_prompt=_SUMMARY_PROMPT,
            messages=(Message(role="user", parts=(TextPart(text=ask),)),),
        )
        text = (await complete(self._model, request, purpose="compression")).message.text.strip()
        if not text:
            raise ModelError(f"the model {self._model.model!r} answered an empty summary")
        cap = self._settings.summary_cap(self._budget)
        return counter.head(text, cap) if counter.exceeds(text, cap) else text

    async def _restored(
        self, dropped: Sequence[Mapping[str, Any]], kept: Sequence[Mapping[str, Any]]
    ) -> list[str]:
        """What must survive the cut: loaded skills, the task list, expanded tools."""
        state = self._run.session
        parts: list[str] = []
        if state.skills is not None and state.skill_source is not None:
            texts = _skill_texts(dropped)
            kept_calls = {_skill_name(c) for m in kept for c in m.get("tool_calls") or []}
            for name in state.skills.active_skills:
                if name in kept_calls:
                    continue  # its load_skill result is still in the history
                text = texts.get(name)
                if text is None:
                    try:
                        text = load_skill(state.skill_source, name).to_text()
                    except SagentsError:
                        continue
                parts.append(f"The skill {name!r} is loaded; its instructions:\n{text}")
        if state.tool_manager.has_tool("todo_read"):
            result = await state.tool_manager.run_tool(
                "todo_read", {}, state.context_for_tools(), tool_call_id=None
            )
            if not result.is_error:
                parts.append(f"The session's task list (todo_read):\n{result.text}")
        audit = state.audit_status
        if audit.suggested_tools:
            parts.append(f"Tools picked for this session: {', '.join(audit.suggested_tools)}.")
        if audit.tools_expanded:
            parts.append("The full tool list was expanded in this session.")
        return parts

    async def _failed(self, report: dict[str, Any], error: str) -> dict[str, Any]:
        """Leave the history as it is and say why (``history.compressed`` with ``ok: false``)."""
        logger.warning("history compression failed: %s", error)
        report["error"] = error
        await self._run.emit(
            HistoryCompressedEvent(
                ok=False,
                dropped=0,
                tokens_before=report["tokens_before"],
                tokens_after=report["tokens_before"],
                error=error,
                ts=self._run.hubs[0].clock.time(),
            )
        )
        return report

    def _records_dir(self) -> Path:
        if self._settings.records_dir is not None:
            return Path(self._settings.records_dir)  # a str too
        context = self._run.session.context
        if context.workspace and Path(context.workspace).is_dir():
            return Path(context.workspace) / ".agent" / "history"
        return default_data_dir() / "sessions" / context.session_id / "history"

    def _record(
        self, dropped: Sequence[Mapping[str, Any]], summary: str, reason: CompressionReason
    ) -> Path:
        folder = self._records_dir()
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}.json"
        path = folder / name
        record = {
            "session_id": self._run.session.session_id,
            "reason": reason,
            "created": time.time(),
            "summary": summary,
            "dropped": list(dropped),
        }
        path.write_text(json.dumps(record, ensure_ascii=False, indent=1), encoding="utf-8")
        return path
