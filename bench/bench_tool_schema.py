"""Benchmark: schema generation, OpenAI export and argument binding of local tools.

Run: ``.venv/bin/python bench/bench_tool_schema.py``. Prints ratios against baselines measured in
the same run (plain pydantic, ``copy.deepcopy``), never absolute targets.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, TypeAdapter

from sagents.tool._context import SessionContext
from sagents.tool._local_tool import build_local_tool
from sagents.tool.openai_export import (
    faithful_schema,
    strict_nulls_to_absent,
    strict_schema,
    to_openai_tool,
)

TOOLS = 2000  # as many tools as the get_openai_tools() benchmark of the issue
SPECS = 300  # spec generation is pydantic-bound and slow: fewer tools suffice for a ratio
CALLS = 20000


class Address(BaseModel):
    street: str
    city: str | None = None


def sample(
    query: str, limit: int = 10, tags: list[str] | None = None, where: Address | None = None
) -> dict[str, Any]:
    """Search things.

    Args:
        query: What to look for.
        limit: At most this many results.
        tags: Only results with these tags.
        where: Only results near this address.
    """
    return {}


def _timed(fn: Callable[[], object], repeat: int = 1) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return time.perf_counter() - start


def main() -> None:
    fresh = [build_local_tool(sample, name=f"tool_{i}") for i in range(SPECS)]
    ours = _timed(lambda: [local.spec for local in fresh])
    plain = _timed(lambda: [TypeAdapter(sample).json_schema() for _ in range(SPECS)])
    print(
        f"spec for {SPECS} tools: {ours:.3f}s; TypeAdapter(func).json_schema(): {plain:.3f}s; "
        f"ratio {ours / plain:.2f}"
    )

    base = fresh[0].spec
    specs = [dataclasses.replace(base, name=f"tool_{i}") for i in range(TOOLS)]
    deep = _timed(lambda: [copy.deepcopy(dict(s.input_schema)) for s in specs])
    faithful = _timed(lambda: [faithful_schema(s.input_schema) for s in specs])
    strict = _timed(lambda: [strict_schema(s.input_schema) for s in specs])
    export = _timed(lambda: [to_openai_tool(s) for s in specs])
    print(f"faithful_schema x{TOOLS}: {faithful:.3f}s, ratio to deepcopy {faithful / deep:.1f}")
    print(f"strict_schema x{TOOLS}: {strict:.3f}s, ratio to deepcopy {strict / deep:.1f}")
    print(f"to_openai_tool x{TOOLS}: {export:.3f}s, ratio to deepcopy {export / deep:.1f}")

    local, context = fresh[0], SessionContext()
    args = {"query": "q", "limit": "5", "where": {"street": "Main"}}
    model = local.resolved.model
    aliased = dict(args)
    bind = _timed(lambda: local.bind(args, context), CALLS)
    validate = _timed(lambda: model.model_validate(aliased), CALLS)
    print(
        f"bind x{CALLS}: {bind:.3f}s; model_validate: {validate:.3f}s; ratio {bind / validate:.2f}"
    )

    exported = strict_schema(local.spec.input_schema)
    sent = {"query": "q", "limit": None, "tags": None, "where": {"street": "Main", "city": None}}
    nulls = _timed(lambda: strict_nulls_to_absent(exported, sent), CALLS)
    print(f"strict_nulls_to_absent x{CALLS}: {nulls:.3f}s; ratio to bind {nulls / bind:.2f}")


if __name__ == "__main__":
    main()
