"""The cost of secret redaction (docs/gateway.md, "Secrets") on a large tool result.

Two figures, each a ratio against the unredacted path measured in the same run:

- **end to end**: ``MCPSupervisor.call_tool`` of the ``big`` tool of
  ``tests/mcp/servers/fault_server.py`` over stdio (a 5 MB text result), on two servers of the
  same process, one with a :class:`~sagents.core._secrets.Redactor` of ``SECRETS`` secrets in
  its settings and one without; the calls alternate, and each figure is the median of
  ``ROUNDS`` calls;
- **redaction alone**: ``Redactor.result`` on that 5 MB result when no secret occurs in it
  (the common case: a scan per form of each secret) and when ``HITS`` occurrences do (the
  scans, then one regex pass that replaces them), against ``json.dumps`` of the same text
  (what the gateway does to any result on its way to the client).

Not a test. Usage: ``.venv/bin/python bench/bench_redaction.py [ROUNDS] [SECRETS]``
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
from mcp import StdioServerParameters

from sagents.core._result import TextContent, ToolResult
from sagents.core._secrets import Redactor
from sagents.mcp import MCPSupervisor, ServerSettings

FAULT_SERVER = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "servers" / "fault_server.py"
HITS = 100  # occurrences of a secret in the "with hits" case


def _secrets(count: int) -> list[tuple[str, str]]:
    return [(f"SECRET_{n}", f"sk-{n:04d}-Zq8wLr2PvNc5Tj7K") for n in range(count)]


def _median_ms(work: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def _end_to_end(rounds: int, redactor: Redactor) -> tuple[float, float]:
    params = StdioServerParameters(command=sys.executable, args=[str(FAULT_SERVER)])
    plain_s: list[float] = []
    redacted_s: list[float] = []
    with tempfile.TemporaryDirectory() as logs:
        async with MCPSupervisor(log_dir=Path(logs)) as supervisor:
            await supervisor.add_server("plain", params, ServerSettings())
            await supervisor.add_server("redacted", params, ServerSettings(redactor=redactor))
            for _ in range(2):  # warm both up
                await supervisor.call_tool("plain", "big")
                await supervisor.call_tool("redacted", "big")
            for _ in range(rounds):
                for name, into in (("plain", plain_s), ("redacted", redacted_s)):
                    start = time.perf_counter()
                    result = await supervisor.call_tool(name, "big")
                    into.append(time.perf_counter() - start)
                    assert not result.is_error, result.error
    return statistics.median(plain_s) * 1000, statistics.median(redacted_s) * 1000


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    secrets = _secrets(count)
    redactor = Redactor(secrets)
    plain_ms, redacted_ms = anyio.run(_end_to_end, rounds, redactor)
    print(f"end to end, 5 MB result over stdio, {count} secrets, median of {rounds} calls:")
    print(f"  unredacted {plain_ms:.1f} ms, redacted {redacted_ms:.1f} ms, "
          f"ratio {redacted_ms / plain_ms:.3f}")  # fmt: skip

    text = "x" * 5_000_000
    clean = ToolResult(content=(TextContent(text=text),))
    step = len(text) // HITS
    hit_text = "".join(text[i : i + step - 30] + secrets[0][1] for i in range(0, len(text), step))
    hits = ToolResult(content=(TextContent(text=hit_text),))
    dumps_ms = _median_ms(lambda: json.dumps(text), rounds)
    clean_ms = _median_ms(lambda: redactor.result(clean), rounds)
    hits_ms = _median_ms(lambda: redactor.result(hits), rounds)
    assert "[redacted:SECRET_0]" in redactor.result(hits).text
    print(f"redaction alone, 5 MB text, {count} secrets ({len(redactor.forms)} forms), "
          f"median of {rounds}:")  # fmt: skip
    print(f"  json.dumps {dumps_ms:.1f} ms; no hit {clean_ms:.1f} ms "
          f"(ratio {clean_ms / dumps_ms:.2f}); {HITS} hits {hits_ms:.1f} ms "
          f"(ratio {hits_ms / dumps_ms:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
