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
    "sagents",
    "sagents.tool",
    "sagents.agent",
    "sagents.mcp",
    "sagents.skill",
    "sagents.script",
    "sagents.gateway",
    "sagents.testing",
    # the documented import paths of the tool layer (docs/tools.md)
    "sagents.tool.tool_base",
    "sagents.tool.tool_schema",
    "sagents.tool.tool_progress",
    "sagents.tool.mcp_proxy",
    "sagents.tool.mcp_tool_base",
    "sagents.tool.tool_manager",
)


@pytest.fixture
def json_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_the_public_names_of_each_public_module_match_the_snapshot(
    name: str, json_snapshot: SnapshotAssertion
) -> None:
    module = importlib.import_module(name)
    assert sorted(module.__all__) == json_snapshot
