"""``EmptyProvider``: a tool provider with no tools, for a gateway embedded with none."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import UnknownToolError
from sagents.tool._context import SessionContext
from sagents.tool._spec_provider import SpecProvider

__all__ = ["EmptyProvider"]


class EmptyProvider(SpecProvider):
    """A provider with no tools (every call is ``unknown_tool``)."""

    def list_specs(self) -> list[ToolSpec]:
        """No tools."""
        return []

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
        """Every name is unknown."""
        return ToolResult.from_exception(UnknownToolError(f"no tool {name!r}"))
