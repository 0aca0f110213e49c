"""Configuration: the ``mcpServers`` file and sagents' settings, as plain typed values.

Floor 3 of ``docs/architecture.md`` ("Layers"), beside ``sagents.tool`` (it builds the
configured ``ToolManager``): shared by the CLI, run_script and the gateway.
"""

from sagents.config._loader import (
    BackgroundCallsSettings,
    MCPServerConfig,
    QuotaSettings,
    SagentsConfig,
    SkillsSettings,
    load_config,
    parse_config,
)

__all__ = [
    "BackgroundCallsSettings",
    "MCPServerConfig",
    "QuotaSettings",
    "SagentsConfig",
    "SkillsSettings",
    "load_config",
    "parse_config",
]
