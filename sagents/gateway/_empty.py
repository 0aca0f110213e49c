"""``EmptyProvider``: a tool provider with no tools, for a gateway embedded with none."""

from __future__ import annotations

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import UnknownToolError
from sagents.tool._call import ToolRequest
from sagents.tool._spec_provider import SpecProvider

__all__ = ["EmptyProvider"]


class EmptyProvider(SpecProvider):
    """A provider with no tools (every call is ``unknown_tool``)."""

    def list_specs(self) -> list[ToolSpec]:
        """No tools."""
        return []

    async def call(self, request: ToolRequest) -> ToolResult:
        """Every name is unknown."""
        return ToolResult.from_exception(UnknownToolError(f"no tool {request.name!r}"))
