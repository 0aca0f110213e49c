"""``build_gateway(settings)``: the gateway ``sagents serve`` runs.

It is a :class:`~sagents.gateway.runtime.ConfiguredGateway`: the config's MCP servers through the
tool core, the skills of its ``skills`` section, progress from the tool core's hub.
:class:`EmptyProvider` remains for embedding the gateway with no tools at all.
"""

from __future__ import annotations

from sagents.gateway.empty import EmptyProvider
from sagents.gateway.runtime import ConfiguredGateway
from sagents.gateway.settings import GatewaySettings
from sagents.gateway.tool_search import ToolRanker
from sagents.tool.approval import Approver
from sagents.tool.impl import VisionModel

__all__ = ["EmptyProvider", "build_gateway"]


def build_gateway(
    settings: GatewaySettings,
    *,
    approver: Approver | None = None,
    wait_for_servers: bool = True,
    image_model: VisionModel | None = None,
    tool_ranker: ToolRanker | None = None,
) -> ConfiguredGateway:
    """Build the gateway ``sagents serve`` runs (enter it with ``async with`` before serving).

    ``wait_for_servers=False`` enters without waiting for upstream servers (see
    :class:`ConfiguredGateway`). ``tool_ranker`` ranks the tools of ``settings.tool_search``
    (``sagents serve`` passes ``sagents.agent.suggest_tools``). ``image_model`` is the vision
    model of the ``image_understanding`` built-in tool, when the config enables it.

    Raises:
        ConfigError: the config file is unreadable or invalid, a skill directory is missing, or
            ``settings.tool_search`` without a ``tool_ranker``.
    """
    return ConfiguredGateway(
        settings,
        approver=approver,
        wait_for_servers=wait_for_servers,
        tool_ranker=tool_ranker,
        image_model=image_model,
    )
