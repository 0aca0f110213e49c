"""Tokens of run_script's description (docs/run_script.md, "Typed stubs"), per registry.

Run: ``.venv/bin/python bench/bench_script_description.py [--json]``; on older code, with
``PYTHONPATH=<export of it>``, for the "before" figures (the counts are deterministic).

Counts the description run_script gets in ``ask`` mode, with its tools listed (the default;
the agent loop's tool suggestion reorders them, the count stays within the same budget) and
counted only (``list_tools=False``, the gateway's with tool search), with the project's
offline counter (tiktoken ``cl100k_base``, :func:`sagents.core._tokens.
default_token_counter`), for:

- the reference servers of the run_script tests (the fleet demo, ``mcp-server-git``, sagents'
  memory and todo servers), listed live from the real servers;
- a synthetic 1,000-tool registry (``bench_suggest.synthetic_registry``: 10 services of
  CRUD-like tools with 2-4 parameters each), as MCP tools of those services.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the reference servers: tests/

from bench.bench_suggest import synthetic_registry
from sagents.core._spec import ToolSource, ToolSpec
from sagents.core._tokens import default_token_counter
from sagents.script._description import run_script_description
from tests.script.preflight_reference import reference_specs


def _as_mcp(specs: list[ToolSpec]) -> list[ToolSpec]:
    """The synthetic tools as tools of MCP servers (``<service>__<tool>``), read-only but for
    the writing actions."""
    converted = []
    for spec in specs:
        server, _, original = spec.name.partition("__")
        writes = ("create", "update", "delete", "archive", "share", "tag", "lock")
        converted.append(
            replace(
                spec,
                permission="write" if original.startswith(writes) else "read_only",
                source=ToolSource(kind="mcp", server=server, original_name=original),
            )
        )
    return converted


async def main() -> dict[str, Any]:
    counter = default_token_counter()
    with tempfile.TemporaryDirectory() as data:
        reference = await reference_specs(Path(data))
    registries = {
        "reference servers": reference,
        "1,000-tool registry": _as_mcp(synthetic_registry(1000)),
    }
    figures: dict[str, Any] = {"counter": counter.name}
    print(f"run_script's description in ask mode, tokens ({counter.name})")
    print(f"{'registry':<24}{'tools':>7}{'listed':>10}{'counted only':>14}")
    for label, specs in registries.items():
        listed = counter.count(run_script_description(specs, mode="ask"))
        counted = counter.count(run_script_description(specs, mode="ask", list_tools=False))
        print(f"{label:<24}{len(specs):>7}{listed:>10}{counted:>14}")
        figures[label] = {"tools": len(specs), "listed": listed, "counted_only": counted}
    return figures


if __name__ == "__main__":
    result = anyio.run(main)
    if "--json" in sys.argv[1:]:
        print(json.dumps(result))
