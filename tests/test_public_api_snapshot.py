"""The public API, recorded: the names each public module exports (its ``__all__``), checked
against a snapshot that changes only on purpose.

A change to a public module's names fails here until the snapshot is updated with
``pytest tests/test_public_api_snapshot.py --snapshot-update`` and the change is reviewed (and,
for a removed or renamed name, documented in ``docs/``).
"""

from __future__ import annotations

import importlib

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

PUBLIC_MODULES = (
    # the packages' façades
    "sagents",
    "sagents.errors",
    "sagents.core",
    "sagents.sandbox",
    "sagents.audit",
    "sagents.store",
    "sagents.mcp",
    "sagents.progress",
    "sagents.tool",
    "sagents.tool.impl",
    "sagents.config",
    "sagents.script",
    "sagents.skill",
    "sagents.gateway",
    "sagents.gateway.console",
    "sagents.agent",
    "sagents.agent.ag_ui",  # the AG-UI route (docs/chat.md)
    "sagents.cli",
    "sagents.testing",
    "sagents.testing.serve",
    "sagents.demo",
    "sagents.mcp_servers",
    # the documented import paths of the tool layer (docs/tools.md)
    "sagents.tool.tool_base",
    "sagents.tool.tool_schema",
    "sagents.tool.tool_progress",
    "sagents.tool.mcp_proxy",
    "sagents.tool.mcp_tool_base",
    "sagents.tool.tool_manager",
    # the exporters and names (docs/tool-schema.md), the questionnaire (docs/builtin_tools.md)
    "sagents.tool.openai_export",
    "sagents.tool.export_responses",
    "sagents.tool.export_anthropic",
    "sagents.tool.export_gemini",
    "sagents.tool.export_inline",
    "sagents.tool.naming",
    "sagents.tool.questions",
    # build_tool_manager (docs/cli-tools.md), fetch_mcp_skills (docs/skills.md), the typed
    # events (docs/progress.md), the terminal approver (docs/run_script.md)
    "sagents.config.tools",
    "sagents.skill.mcp_skills",
    "sagents.core.events",
    "sagents.cli.terminal_approval",
    # entry points a user types: `sagents` (pyproject.toml), `python -m ...` (docs/)
    "sagents.cli.main",
    "sagents.mcp_servers.memory",
    "sagents.mcp_servers.todo",
    "sagents.demo.fleet_server",
)
"""Every public module: a module under ``sagents/`` whose name (or a package's) does not start
with ``_`` is listed here and documented in ``docs/api.md`` (tests/test_public_api.py)."""


@pytest.fixture
def json_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_the_public_names_of_each_public_module_match_the_snapshot(
    name: str, json_snapshot: SnapshotAssertion
) -> None:
    module = importlib.import_module(name)
    assert sorted(module.__all__) == json_snapshot
