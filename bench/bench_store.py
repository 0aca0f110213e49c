"""The gateway's store: SQLite (embedded) versus PostgreSQL (shared by replicas,
docs/scale-out.md). Not a test: prints figures and ratios measured in one run.

1. Audit writes per second: ``AuditStore.record`` of one ``gateway_call`` row, one writer, then
   8 concurrent writers, on the embedded store (a SQLite file, one short connection per write)
   and on PostgreSQL (psycopg 3 with a pool of at most 10 connections, on a local server
   started for the run). Ratio: PostgreSQL / SQLite.
2. run_script throughput: runs per second of a one-line script (the whole path: sandbox,
   records, the one audit row), 4 at a time, with the audit row going to each store. Ratio:
   PostgreSQL / SQLite; the sandbox dominates, so the aim is >= 0.95.

Rounds alternate the two stores. The PostgreSQL server is started from Debian's binaries on a
temporary directory, as the tests do (tests/postgres_server.py), unless ``--store URL`` names
one.

Usage: ``.venv/bin/python bench/bench_store.py [--rounds 3] [--store postgresql://...]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sagents.audit._store import AuditEntry, AuditStore  # noqa: E402
from sagents.cli._script_host import run_with_manager  # noqa: E402
from sagents.script import ScriptLimits, ScriptRequest  # noqa: E402
from sagents.store import open_store, parse_store_url  # noqa: E402
from sagents.tool.tool_manager import ToolManager  # noqa: E402
from tests.postgres_server import bench_database  # noqa: E402

WRITES = 1000
WRITERS = 8
RUNS = 24
RUN_CONCURRENCY = 4


def _entry(n: int) -> AuditEntry:
    return AuditEntry(
        kind="gateway_call",
        ts=time.time(),
        tool="run_script",
        status="ok",
        session_id="bench",
        data={"n": n, "description": "bench", "calls": 3, "duration_s": 0.1},
    )


async def _writes_per_s(audit: AuditStore, writers: int) -> float:
    per_writer = WRITES // writers

    async def writer(w: int) -> None:
        for n in range(per_writer):
            await audit.record(_entry(w * per_writer + n))

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for w in range(writers):
            tg.start_soon(writer, w)
    return per_writer * writers / (time.perf_counter() - started)


async def _runs_per_s(audit: AuditStore, workspace: Path) -> float:
    limiter = anyio.Semaphore(RUN_CONCURRENCY)
    async with ToolManager() as manager:

        async def one(n: int) -> None:
            async with limiter:
                result = await run_with_manager(
                    manager,
                    ScriptRequest(code=f"print({n})", tools=(), description=f"bench {n}"),
                    workspace=workspace,
                    limits=ScriptLimits(),
                    audit=audit,
                )
                assert result.status == "ok", result

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for n in range(RUNS):
                tg.start_soon(one, n)
        return RUNS / (time.perf_counter() - started)


async def main(rounds: int, url: str | None) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="sagents-bench-store-") as tmp,
        bench_database(url) as pg,
    ):
        root = Path(tmp)
        async with (
            open_store(parse_store_url(None), data_dir=root / "sqlite") as sqlite,
            open_store(parse_store_url(pg), data_dir=root) as postgres,
        ):
            stores: dict[str, AuditStore] = {"sqlite": sqlite.audit, "postgresql": postgres.audit}
            figures: dict[str, dict[str, list[float]]] = {}
            measures: tuple[tuple[str, Callable[[AuditStore], Awaitable[float]]], ...] = (
                ("audit writes/s, 1 writer", lambda a: _writes_per_s(a, 1)),
                (f"audit writes/s, {WRITERS} writers", lambda a: _writes_per_s(a, WRITERS)),
                (
                    f"run_script runs/s, {RUN_CONCURRENCY} at a time",
                    lambda a: _runs_per_s(a, root / "ws"),
                ),
            )
            for _ in range(rounds):
                for label, measure in measures:
                    for kind, audit in stores.items():  # alternating, in each round
                        value = await measure(audit)
                        figures.setdefault(label, {}).setdefault(kind, []).append(value)
    print("| measure | SQLite (min / median) | PostgreSQL (min / median) | PG/SQLite (median) |")
    print("|---|---|---|---|")
    for label, by_kind in figures.items():
        lite, pg_values = by_kind["sqlite"], by_kind["postgresql"]
        ratio = statistics.median(pg_values) / statistics.median(lite)
        print(
            f"| {label} | {min(lite):,.0f} / {statistics.median(lite):,.0f} | "
            f"{min(pg_values):,.0f} / {statistics.median(pg_values):,.0f} | {ratio:.2f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store", default=None, help="an existing PostgreSQL database to use")
    arguments = parser.parse_args()
    anyio.run(main, arguments.rounds, arguments.store)
