"""``ToolProvider``: the interface ``ToolManager`` and ``ToolProxy`` share.

An agent holds a ``ToolProvider`` and need not know whether it is the registry itself or a
session's whitelisted view of several registries (``ToolProxy``). A call goes down the chain
through one method, :meth:`ToolProvider.call` with a :class:`~sagents.tool.ToolRequest`
(:mod:`sagents.tool._call`); ``run_tool`` is the seed API's positional form of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.tool._call import ToolRequest
from sagents.tool._context import SessionContext

__all__ = ["ToolProvider"]


@runtime_checkable
class ToolProvider(Protocol):
    """What an agent needs from a tool registry: list, describe, export, run."""

    def has_tool(self, name: str) -> bool:
        """True when ``name`` (registered or exported) can be called here."""
        ...

    def list_all_tools_name(self) -> list[str]:
        """The registered names, sorted."""
        ...

    def list_specs(self) -> list[ToolSpec]:
        """The specs of the tools, sorted by registered name."""
        ...

    def get_tool_spec(self, name: str) -> ToolSpec:
        """The spec of a tool, by registered or exported name.

        Raises:
            UnknownToolError: when there is no such tool.
            NotAllowedError: when the tool exists but is hidden from this session.
        """
        ...

    def get_openai_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """OpenAI function-calling tools, sorted by registered name, with exported names."""
        ...

    def get_responses_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """OpenAI Responses function tools, sorted by registered name."""
        ...

    def get_anthropic_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """Anthropic Messages tools, sorted by registered name."""
        ...

    def get_gemini_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        """Gemini function declarations, sorted by registered name."""
        ...

    def resolve_exported_name(self, name: str) -> str:
        """The registered name behind an exported (or registered) name.

        Raises:
            UnknownToolError: when no tool has that name.
        """
        ...

    async def call(self, request: ToolRequest) -> ToolResult:
        """Run one call; every failure is an error result, cancellation propagates."""
        ...

    async def run_tool(
        self,
        name: str,
        args: Mapping[str, Any] | str | None = None,
        session_context: SessionContext | None = None,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the public API's per-call timeout
        strict: bool = False,
    ) -> ToolResult:
        """``call`` with a ``ToolRequest`` of these values."""
        ...
