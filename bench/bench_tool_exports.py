"""Benchmark: the Responses, Anthropic and Gemini exports against the Chat Completions export.

Run: ``.venv/bin/python bench/bench_tool_exports.py``. Prints each export's cost as a ratio to
``to_openai_tool`` on the same schemas, measured in the same run (first export, uncached: what
``get_*_tools`` pays once per tool), and the cost of refusing a hostile ``$ref`` ladder as a
ratio to exporting one ordinary tool. No absolute targets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from sagents.core._spec import ToolSpec
from sagents.errors import SchemaExportError
from sagents.tool._local_tool import build_local_tool
from sagents.tool.export_anthropic import to_anthropic_tool
from sagents.tool.export_gemini import to_gemini_function_declaration
from sagents.tool.export_responses import to_responses_tool
from sagents.tool.openai_export import to_openai_tool

TOOLS = 300
LADDER_DEPTH = 24  # inlined, 2**24 nodes: refused at the node bound


class Address(BaseModel):
    street: str = Field(description="Street and number.")
    city: str | None = Field(default=None, description="City.")


class Query(BaseModel):
    text: str
    near: Address | None = Field(default=None, description="Only results near this address.")
    tags: list[str] = []


def sample(query: Query, limit: int = 10, cursor: str | None = None) -> dict[str, Any]:
    """Search things.

    Args:
        query: What to look for.
        limit: At most this many results.
        cursor: Where the previous page ended.
    """
    return {}


def _timed(fn: Callable[[], object], repeat: int = 1) -> float:
    """The best of ``repeat`` runs of ``fn``, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _export_all(
    export: Callable[..., dict[str, Any]], specs: list[ToolSpec], strict: bool
) -> Callable[[], object]:
    return lambda: [export(s, strict=strict) for s in specs]


def _ladder() -> ToolSpec:
    defs: dict[str, Any] = {f"L{LADDER_DEPTH}": {"type": "string"}}
    for i in range(LADDER_DEPTH):
        rung = {"$ref": f"#/$defs/L{i + 1}", "description": f"rung {i}"}
        defs[f"L{i}"] = {"type": "object", "properties": {"a": rung, "b": rung}}
    schema = {"type": "object", "properties": {"top": {"$ref": "#/$defs/L0"}}, "$defs": defs}
    return ToolSpec(name="ladder", input_schema=schema)


def main() -> None:
    specs = [build_local_tool(sample, name=f"tool_{i}").spec for i in range(TOOLS)]
    exports: dict[str, Callable[..., dict[str, Any]]] = {
        "chat completions": to_openai_tool,
        "responses": to_responses_tool,
        "anthropic": to_anthropic_tool,
        "gemini": to_gemini_function_declaration,
    }
    for strict in (False, True):
        base = _timed(_export_all(to_openai_tool, specs, strict), repeat=5)
        for label, export in exports.items():
            took = _timed(_export_all(export, specs, strict), repeat=5)
            mode = "strict" if strict else "faithful"
            print(f"{label:>16} {mode:>8}: {took / base:5.2f}x chat completions ({TOOLS} tools)")
    one = _timed(lambda: to_gemini_function_declaration(specs[0], strict=True), repeat=20)
    ladder = _ladder()
    for label, export in (
        ("gemini", to_gemini_function_declaration),
        ("anthropic", to_anthropic_tool),
    ):

        def refuse(export: Callable[..., dict[str, Any]] = export) -> None:
            try:
                export(ladder, strict=True)
            except SchemaExportError:
                return
            raise AssertionError("the ladder was exported")

        took = _timed(refuse, repeat=3)
        print(
            f"{label:>16} ladder depth {LADDER_DEPTH}: refused in {took / one:6.0f}x "
            "the time of one ordinary strict export"
        )


if __name__ == "__main__":
    main()
