"""The bundled demo: a simulated fleet MCP server and the run_script job that reports on it.

``sagents demo`` runs :data:`FLEET_SCRIPT` against :mod:`sagents.demo.fleet_server` with no
configuration at all: :func:`demo_config` is the configuration it uses. Floor 4 of
``docs/architecture.md`` ("Layers").
"""

from __future__ import annotations

import sys
from pathlib import Path

from sagents.config._loader import SagentsConfig, parse_config

__all__ = ["FLEET_SCRIPT", "SERVER_NAME", "demo_config"]

SERVER_NAME = "fleet"
FLEET_SCRIPT = Path(__file__).resolve().parent / "scripts" / "fleet_report.py"
"""The demo's script: all 500 devices through ``call_many``, then a short summary."""


def demo_config() -> SagentsConfig:
    """The demo's configuration: the fleet server over stdio, run by this interpreter."""
    return parse_config(
        {
            "mcpServers": {
                SERVER_NAME: {
                    "command": sys.executable,
                    "args": ["-m", "sagents.demo.fleet_server"],
                }
            }
        },
        file="<sagents demo>",
    )
