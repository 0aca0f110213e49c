"""Tool search in ``sagents serve --tool-search``: few tools listed, nothing callable that was
not expanded (docs/gateway.md, "Tool search").

For MCP clients whose sessions carry many tools, the gateway lists only two tools of its own at
first: ``search_tools`` (an offline ranking of the session's offer by a query) and
``tool_expand_tools`` (exact names; the same result structure as in the agent loop,
:mod:`sagents.tool._expansion`). Each expanded tool is then listed too, after the ones expanded
before it (the list only grows), and the client is sent ``notifications/tools/list_changed``.
``tools/call`` of an offered tool that was not expanded is refused with a result that says to
expand it first; a name outside the session's offer stays ``unknown_tool``.

The expanded set belongs to a client identity: a handshake-era session (stdio; HTTP with
``Mcp-Session-Id``), or for 2026-07-28 clients the (bearer token, profile) they share.
Without any identity (2026-07-28 requests over HTTP without a token) there is nothing to keep
it for: ``sagents serve`` refuses ``--tool-search`` over HTTP without a token at start, and a
gateway built otherwise refuses such requests with a message saying so.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

import anyio.to_thread

from sagents.core._permissions import ToolAnnotations
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSource, ToolSpec
from sagents.errors import InvalidArgumentsError, SagentsError, ToolExecutionError
from sagents.tool._expansion import (
    EXPAND_TOOL_NAME,
    EXPAND_TOOL_SPEC,
    expand,
    not_offered_result,
    requested_names,
)

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "SEARCH_TOOL_NAME",
    "SEARCH_TOOL_SPEC",
    "SearchState",
    "ToolRanker",
    "ToolSearch",
]

logger = logging.getLogger(__name__)

SEARCH_TOOL_NAME = "search_tools"
"""The name of the search tool."""

DEFAULT_SEARCH_LIMIT = 10
"""Tools one ``search_tools`` call returns when it names no ``limit``."""
_MAX_SEARCH_LIMIT: Final = 50  # tools one search may return
_DESCRIPTION_CHARS: Final = 300  # characters of each description a search shows

ToolRanker: TypeAlias = Callable[[str, Sequence[ToolSpec], int], "list[str] | Awaitable[list[str]]"]
"""``rank(query, specs, k) -> names`` (best first; may be a coroutine function): the shape of
``sagents.agent.suggest_tools``, which ``sagents serve`` passes in (the gateway does not
import the agent layer)."""

SEARCH_TOOL_SPEC = ToolSpec(
    name=SEARCH_TOOL_NAME,
    description=(
        "Search this session's tools by what you want to do. Only a few tools are listed at "
        "a time: search, then add the ones you need with tool_expand_tools (exact names), "
        "then call them. Returns names and descriptions, best match first."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What the tool should do, in words, e.g. 'restart a device'.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": _MAX_SEARCH_LIMIT,
                "description": f"How many tools to return (default {DEFAULT_SEARCH_LIMIT}).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True),
    permission="read_only",
    source=ToolSource(kind="builtin"),
)
"""The spec of ``search_tools``."""


@dataclass(kw_only=True)
class SearchState:
    """One client identity's tool search: the tools it expanded, in expansion order."""

    expanded: list[str] = field(default_factory=list)


class ToolSearch:
    """The gateway's tool-search mode (see the module docstring).

    Args:
        rank: The offline ranking, ``rank(query, specs, k) -> names``.
    """

    def __init__(self, rank: ToolRanker) -> None:
        self.rank = rank

    @property
    def own_specs(self) -> tuple[ToolSpec, ToolSpec]:
        """The two tools the gateway lists first: ``search_tools``, ``tool_expand_tools``."""
        return (SEARCH_TOOL_SPEC, EXPAND_TOOL_SPEC)

    def is_own(self, name: str) -> bool:
        """Whether ``name`` is one of :attr:`own_specs`."""
        return name in (SEARCH_TOOL_NAME, EXPAND_TOOL_NAME)

    def listed(self, state: SearchState, offered: Sequence[ToolSpec]) -> list[ToolSpec]:
        """What ``tools/list`` shows: the two own tools, then the expanded tools still
        offered, in expansion order."""
        by_name = {spec.name: spec for spec in offered}
        return [*self.own_specs, *(by_name[n] for n in state.expanded if n in by_name)]

    def refusal(self, state: SearchState, name: str) -> ToolResult | None:
        """The result refusing a call of the offered tool ``name``, when it was not expanded."""
        return None if name in state.expanded else not_offered_result(name)

    async def call(
        self,
        state: SearchState,
        name: str,
        arguments: Mapping[str, Any],
        offered: Sequence[ToolSpec],
    ) -> tuple[ToolResult, bool]:
        """Run ``search_tools`` or ``tool_expand_tools`` for the session offered ``offered``.

        Returns:
            The result, and whether the session's tool list changed.
        """
        try:
            if name == EXPAND_TOOL_NAME:
                own = [spec.name for spec in self.own_specs]  # always listed: already selected
                expansion = expand(
                    requested_names(arguments),
                    allowed=[*own, *(spec.name for spec in offered)],
                    selected=[*own, *state.expanded],
                )
                state.expanded.extend(expansion.expanded)
                return expansion.to_result(), bool(expansion.expanded)
            return await self._search(state, arguments, offered), False
        except SagentsError as error:
            return ToolResult.from_exception(error), False

    async def _search(
        self, state: SearchState, arguments: Mapping[str, Any], offered: Sequence[ToolSpec]
    ) -> ToolResult:
        query = arguments.get("query")
        limit = arguments.get("limit", DEFAULT_SEARCH_LIMIT)
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgumentsError(
                f"{SEARCH_TOOL_NAME} needs a 'query': what the tool should do, in words",
                hint=f'call {SEARCH_TOOL_NAME}({{"query": "restart a device"}})',
                details={"tool": SEARCH_TOOL_NAME, "argument": "query"},
            )
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= _MAX_SEARCH_LIMIT
        ):
            raise InvalidArgumentsError(
                f"{SEARCH_TOOL_NAME}'s 'limit' must be a whole number from 1 to "
                f"{_MAX_SEARCH_LIMIT}, not {limit!r}",
                details={"tool": SEARCH_TOOL_NAME, "argument": "limit"},
            )
        try:
            if inspect.iscoroutinefunction(self.rank):
                ranked: Any = await self.rank(query, list(offered), limit)
            else:  # off the event loop: a first ranking of a tool set builds its index
                ranked = await anyio.to_thread.run_sync(self.rank, query, list(offered), limit)
                if inspect.isawaitable(ranked):
                    ranked = await ranked
            ranked = [] if isinstance(ranked, str | bytes) else list(ranked)
        except Exception as error:  # the ranking is the caller's: its failure is this call's
            logger.warning("search_tools: the ranking failed on %.200r", query, exc_info=True)
            raise ToolExecutionError(
                f"{SEARCH_TOOL_NAME} could not rank the tools: {error!r}",
                hint=f"call {EXPAND_TOOL_NAME} with an empty list to see every name",
                details={"tool": SEARCH_TOOL_NAME},
            ) from error
        by_name = {spec.name: spec for spec in offered}
        found: list[dict[str, Any]] = []
        for raw in ranked:
            spec = by_name.get(raw) if isinstance(raw, str) else None
            if len(found) == limit:
                break
            if spec is not None and all(item["name"] != spec.name for item in found):
                found.append(
                    {
                        "name": spec.name,
                        "description": _short(spec.description),
                        "expanded": spec.name in state.expanded,
                    }
                )
        return ToolResult.from_structured(
            {
                "query": query,
                "tools": found,
                "next": f"call {EXPAND_TOOL_NAME} with the names you need, then call them",
            }
        )


def _short(description: str) -> str:
    text = " ".join(description.split())
    if len(text) <= _DESCRIPTION_CHARS:
        return text
    return text[: _DESCRIPTION_CHARS - 1].rstrip() + "…"
