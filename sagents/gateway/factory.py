"""``build_gateway(settings)``: the gateway ``sagents serve`` runs.

It is a :class:`~sagents.gateway.runtime.ConfiguredGateway`: the config's MCP servers through the
tool core, the skills of its ``skills`` section, progress from the tool core's hub.
:class:`EmptyProvider` remains for embedding the gateway with no tools at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagents.core.result import ToolResult
from sagents.core.spec import ToolSpec
from sagents.errors import UnknownToolError
from sagents.gateway.approval import Approver
from sagents.gateway.runtime import ConfiguredGateway
from sagents.gateway.settings import GatewaySettings
from sagents.gateway.tool_search import ToolRanker
from sagents.tool.context import SessionContext

__all__ = ["EmptyProvider", "build_gateway"]


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


def build_gateway(
    settings: GatewaySettings,
    *,
    approver: Approver | None = None,
    wait_for_servers: bool = True,
    tool_ranker: ToolRanker | None = None,
) -> ConfiguredGateway:
    """Build the gateway ``sagents serve`` runs (enter it with ``async with`` before serving).

    ``wait_for_servers=False`` enters without waiting for upstream servers (see
    :class:`ConfiguredGateway`). ``tool_ranker`` ranks the tools of ``settings.tool_search``
    (``sagents serve`` passes ``sagents.agent.suggest_tools``).

    Raises:
        ConfigError: the config file is unreadable or invalid, a skill directory is missing, or
            ``settings.tool_search`` without a ``tool_ranker``.
    """
    return ConfiguredGateway(
        settings, approver=approver, wait_for_servers=wait_for_servers, tool_ranker=tool_ranker
    )
