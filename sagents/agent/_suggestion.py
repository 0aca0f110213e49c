"""Tool suggestion in the agent loop: few schemas per turn, nothing callable that was not offered
(docs/agent.md, "Tool suggestion").

With ``SAgent(max_tools_per_turn=k)``, each turn's request carries only:

- the tools a suggester picked for the request (at most ``k`` per pick, from the session's
  allowed tools: the proxy's whitelist, its permission mode, the active skills'
  ``allowed-tools``), and the tools the model expanded with ``tool_expand_tools``;
- the ``always_include`` tools, the loop's own (``load_skill``/``read_skill_file``,
  ``run_script`` when offered) and ``tool_expand_tools`` itself, when something is left to
  expand.

The session's tool list is append-only and byte-stable: a tool keeps its place from the turn it
was first offered, new ones are added at the end, so that a provider's prompt cache survives
(a tool the session is no longer allowed, after a skill's ``allowed-tools``, is dropped: the
permission boundary wins over the cache). :attr:`AgentSession.offered_tools` keeps the order
across runs; ``audit_status.suggested_tools`` lists what suggestion and expansion selected.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import anyio.to_thread

from sagents.agent._session import AgentSession
from sagents.agent._suggest import ToolSelector, suggest_tools
from sagents.core._permissions import PermissionMode
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.tool._expansion import EXPAND_TOOL_NAME, expand, requested_names
from sagents.tool._tool_proxy import ToolProxy

__all__ = [
    "AllowedTool",
    "SuggestWhen",
    "ToolSuggester",
    "ToolSuggestion",
    "allowed_tools",
    "check_suggest_when",
    "expansion_result",
    "request_query",
]

logger = logging.getLogger(__name__)

SuggestWhen: TypeAlias = Literal["first_turn", "every_turn"]
"""When the suggester picks tools: before the first turn of each request (``first_turn``,
the default; later turns of the request add only what the model expanded), or before every
turn (``every_turn``: the query then includes the work so far)."""

ToolSuggester: TypeAlias = (
    ToolSelector | Callable[[str, Sequence[ToolSpec], int], "list[str] | Awaitable[list[str]]"]
)
"""A :class:`~sagents.agent._suggest.ToolSelector` (``await selector.select(query, tools,
k)``), or a function of that shape (the shape of ``sagents.agent.suggest_tools``; it may be a
coroutine function). The offline ``suggest_tools`` is the default."""

_QUERY_CHARS = 2000  # characters of the conversation a pick ranks against


@dataclass(frozen=True, kw_only=True)
class AllowedTool:
    """One tool the session may call this turn: its spec and its OpenAI export."""

    name: str
    """The name the model uses (the export's ``function.name``)."""
    spec: ToolSpec
    exported: Mapping[str, Any]


def check_suggest_when(when: object) -> None:
    """Refuse a ``tool_suggestion`` value that is not a :data:`SuggestWhen`.

    Raises:
        ValueError: ``when`` is not ``first_turn`` or ``every_turn``.
    """
    if when not in ("first_turn", "every_turn"):
        raise ValueError(f"tool_suggestion must be 'first_turn' or 'every_turn', not {when!r}")


def allowed_tools(
    proxy: ToolProxy, mode: PermissionMode, *, skip: Collection[str] = ()
) -> list[AllowedTool]:
    """The session's allowed tools, in the proxy's order: disabled tools never, in
    ``read_only`` mode only read-only ones, and none of ``skip`` (the loop's own tools)."""
    found = []
    for exported in proxy.get_openai_tools():
        name = str(exported["function"]["name"])
        spec = proxy.get_tool_spec(name)
        if spec.permission == "disabled" or spec.name in skip or name in skip:
            continue
        if mode == "read_only" and spec.permission != "read_only":
            continue
        found.append(AllowedTool(name=name, spec=spec, exported=exported))
    return found


def request_query(messages: Sequence[Mapping[str, Any]], *, every_turn: bool) -> str:
    """What a pick ranks against: the last user message; for ``every_turn``, also the text of
    the messages after it (the model's words, the tool results), the last characters first
    kept."""
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            start = index
            break
    parts = [_text(messages[start].get("content"))] if messages else []
    if every_turn:
        tail = " ".join(_text(m.get("content")) for m in messages[start + 1 :])
        parts.append(tail[-_QUERY_CHARS:])
    return " ".join(p for p in parts if p).strip()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


class ToolSuggestion:
    """The suggestion settings of an agent, and the per-turn choice of tools.

    Args:
        k: Tools one pick may add (``max_tools_per_turn``).
        when: See :data:`SuggestWhen`.
        always_include: Names always offered (when the session allows them).
        suggester: The ranking; ``sagents.agent.suggest_tools`` when None.
    """

    def __init__(
        self,
        *,
        k: int,
        when: SuggestWhen = "first_turn",
        always_include: Sequence[str] = (),
        suggester: ToolSuggester | None = None,
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(
                f"max_tools_per_turn takes a whole number of tools (e.g. 8) or None, not {k!r}"
            )
        if k < 1:
            raise ValueError(f"max_tools_per_turn must be at least 1 (or None), not {k!r}")
        check_suggest_when(when)
        if isinstance(always_include, str):
            raise TypeError("always_include_tools takes a list of names, not one string")
        self.k = k
        self.when: SuggestWhen = when
        self.always_include = tuple(always_include)
        self.suggester = suggester

    async def pick(self, query: str, candidates: Sequence[AllowedTool]) -> list[str]:
        """The suggester's names for ``query`` among ``candidates`` (at most ``k``, known ones).

        A suggester that fails is logged and picks nothing: the model still has
        ``tool_expand_tools``.
        """
        if not candidates or not query:
            return []
        specs = [c.spec for c in candidates]
        suggester = self.suggester
        try:
            if suggester is None:  # the offline ranking; a first index build takes a moment
                picked: Any = await anyio.to_thread.run_sync(suggest_tools, query, specs, self.k)
            elif isinstance(suggester, ToolSelector):
                picked = await suggester.select(query, specs, self.k)
            else:
                picked = suggester(query, specs, self.k)
                if inspect.isawaitable(picked):
                    picked = await picked
        except Exception:  # a broken ranking must not end the run: expansion still works
            logger.warning("the tool suggester failed; no tools suggested", exc_info=True)
            return []
        if isinstance(picked, str | bytes) or not isinstance(picked, Iterable):
            logger.warning(
                "the tool suggester returned %.200r, not a list of tool names; no tools suggested",
                picked,
            )
            return []
        by_registered = {c.spec.name: c.name for c in candidates}
        names = {c.name for c in candidates}
        chosen: list[str] = []
        for raw in picked:  # unknown names are skipped before counting to k
            if not isinstance(raw, str):
                continue
            name = by_registered.get(raw) or (raw if raw in names else None)
            if name is not None and name not in chosen:
                chosen.append(name)
                if len(chosen) == self.k:
                    break
        return chosen

    async def offered(
        self,
        session: AgentSession,
        allowed: Sequence[AllowedTool],
        own: Sequence[Mapping[str, Any]],
        *,
        query: str | None,
    ) -> list[dict[str, Any]]:
        """This turn's tool list (OpenAI exports), and the session's bookkeeping updated.

        Args:
            session: The session (its ``offered_tools`` order and ``audit_status``).
            allowed: The session's allowed tools this turn (:func:`allowed_tools`).
            own: The loop's own tools this turn, ``tool_expand_tools`` among them.
            query: What to rank against when this turn picks; None: no pick this turn.
        """
        status = session.audit_status
        names = [a.name for a in allowed]
        always = [n for n in self.always_include if n in names]
        if query is not None:
            pool = [a for a in allowed if a.name not in always]
            for name in await self.pick(query, pool):
                if name not in status.suggested_tools:
                    status.suggested_tools.append(name)
        exports: dict[str, Mapping[str, Any]] = {a.name: a.exported for a in allowed}
        exports.update((str(t["function"]["name"]), t) for t in own)
        wanted = [*always, *(n for n in status.suggested_tools if n in names)]
        wanted += [
            str(t["function"]["name"]) for t in own if t["function"]["name"] != EXPAND_TOOL_NAME
        ]
        if any(n not in wanted for n in names) or EXPAND_TOOL_NAME in session.offered_tools:
            wanted.append(EXPAND_TOOL_NAME)
        for name in wanted:
            if name not in session.offered_tools and name in exports:
                session.offered_tools.append(name)
        return [dict(exports[n]) for n in session.offered_tools if n in exports]


def expansion_result(
    session: AgentSession,
    arguments: Mapping[str, Any],
    allowed: Sequence[AllowedTool],
    *,
    own: Collection[str] = (),
) -> ToolResult:
    """Run ``tool_expand_tools`` for the session: validated against ``allowed`` (the session's
    allowed set), valid names join ``audit_status.suggested_tools`` at once and set
    ``audit_status.tools_expanded``; the next turn offers them. ``own`` (the loop's own
    tools, offered in every turn) are reported as already selected."""
    requested = requested_names(arguments)
    status = session.audit_status
    aliases = {a.spec.name: a.name for a in allowed if a.spec.name != a.name}
    selected = {*status.suggested_tools, *session.offered_tools, *own}
    expansion = expand(
        requested,
        allowed=[*sorted(own), *(a.name for a in allowed)],
        selected=selected,
        aliases=aliases,
    )
    if expansion.expanded:
        status.suggested_tools.extend(expansion.expanded)
        status["tools_expanded"] = True
    return expansion.to_result()
