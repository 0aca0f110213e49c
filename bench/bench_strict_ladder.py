"""Benchmark: strict export of a described-``$ref`` ladder grows linearly with its rungs.

Run: ``.venv/bin/python bench/bench_strict_ladder.py``. A ladder of ``n`` definitions, each
referring twice (with a description, as pydantic writes ``Field(description=...)``) to the next,
once inlined to 8.9 MB at 14 rungs and 35 MB at 16. Prints, for each size, the output size and
the time of ``strict_schema`` as ratios against the 16-rung ladder measured in the same run
(linear growth: the ratio of times follows the ratio of rungs), never absolute targets.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sagents.tool.openai_export import strict_schema

RUNGS = (16, 64, 256, 1024)
REPEAT = 5


def ladder(rungs: int) -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"L{rungs}": {"type": "object", "properties": {"v": {"type": "integer"}}}
    }
    for i in range(rungs - 1, -1, -1):
        down = f"#/$defs/L{i + 1}"
        defs[f"L{i}"] = {
            "type": "object",
            "properties": {
                "a": {"$ref": down, "description": "left"},
                "b": {"$ref": down, "description": "right"},
            },
        }
    return {"type": "object", "properties": {"root": {"$ref": "#/$defs/L0"}}, "$defs": defs}


def timed(rungs: int) -> tuple[float, int]:
    schema = ladder(rungs)
    best = float("inf")
    size = 0
    for _ in range(REPEAT):
        start = time.perf_counter()
        exported = strict_schema(schema)
        best = min(best, time.perf_counter() - start)
        size = len(json.dumps(exported.schema))
    return best, size


def main() -> None:
    base_time, base_size = timed(RUNGS[0])
    print(f"baseline: {RUNGS[0]} rungs, {base_size} bytes, {base_time * 1000:.2f} ms")
    for rungs in RUNGS[1:]:
        seconds, size = timed(rungs)
        print(
            f"{rungs:5d} rungs ({rungs // RUNGS[0]:3d}x): size {size / base_size:6.1f}x, "
            f"time {seconds / base_time:6.1f}x"
        )


if __name__ == "__main__":
    main()
