"""Configuration: the ``mcpServers`` file and sagents' settings, as plain typed values.

Floor 3 of ``docs/architecture.md`` ("Layers"), beside ``sagents.tool`` (it builds the
configured ``ToolManager``): shared by the CLI, run_script and the gateway.

The names below load on first use (``sagents.core._lazy``): the loader needs the MCP SDK, which
an agent run that only reads run_script's settings (``sagents.config._models``) does not import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sagents.core._lazy import lazy_names

if TYPE_CHECKING:
    from sagents.config._loader import (
        BackgroundCallsSettings,
        ImageUnderstandingSettings,
        MCPServerConfig,
        QuotaSettings,
        SagentsConfig,
        SandboxSettings,
        SkillsSettings,
        load_config,
        parse_config,
    )

__all__ = [
    "BackgroundCallsSettings",
    "ImageUnderstandingSettings",
    "MCPServerConfig",
    "QuotaSettings",
    "SagentsConfig",
    "SandboxSettings",
    "SkillsSettings",
    "load_config",
    "parse_config",
]

__getattr__, __dir__ = lazy_names(__name__, dict.fromkeys(__all__, "_loader"))
