"""``build_gateway(settings)``: where ``sagents serve`` gets its tools.

Until the integration connects the real provider (the config's upstream MCP servers through the
tool core, run_script and skills), the gateway serves :class:`EmptyProvider`, which offers no
tools; the lead replaces the body of :func:`build_provider`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagents.core.result import ToolResult
from sagents.core.spec import ToolSpec
from sagents.errors import UnknownToolError
from sagents.gateway.server import Gateway
from sagents.gateway.settings import GatewaySettings
from sagents.tool.context import SessionContext

__all__ = ["EmptyProvider", "build_gateway", "build_provider"]


class EmptyProvider:
    """A provider with no tools (every call is ``unknown_tool``)."""

    def list_specs(self) -> list[ToolSpec]:
        """No tools."""
        return []

    async def run_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        session_context: SessionContext | None,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the seed API's run_tool signature
    ) -> ToolResult:
        """Every name is unknown."""
        return ToolResult.from_exception(UnknownToolError(f"no tool {name!r}"))


def build_provider(settings: GatewaySettings) -> EmptyProvider:
    """The tool provider for ``settings`` (integration point: connect ToolManager/ToolProxy)."""
    return EmptyProvider()


def build_gateway(settings: GatewaySettings) -> Gateway:
    """Build the gateway ``sagents serve`` runs (enter it with ``async with`` before serving)."""
    return Gateway(
        build_provider(settings),
        mode=settings.mode,
        profile=settings.profile,
        token_profiles=settings.token_profiles,
        background_after_s=settings.background_after_s,
        workspace=str(settings.workspace) if settings.workspace else None,
        name=settings.name,
    )
