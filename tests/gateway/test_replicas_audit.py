"""Audit rows under concurrent clients on two ``sagents serve`` replicas sharing one PostgreSQL
database (docs/scale-out.md, "Audit"): every run_script answered has its row, once, whichever
replica ran it; one client's runs share one workspace."""

from __future__ import annotations

from pathlib import Path

import anyio
import psycopg
import pytest

from tests.gateway.replicas import client, replica

pytestmark = pytest.mark.anyio

CLIENTS = 8  # concurrent clients, each alternating between the replicas
RUNS = 12  # per client: 96 sandboxed runs (50 took 160 s of a loaded suite's time, 4 x this)


# 96 sandboxed runs: about 20 s alone on 2 shared cores, up to four times that beside other
# test workers; above the suite's 120 s default, never unbounded.
@pytest.mark.timeout(300)
async def test_audit_rows_are_complete_and_unique_under_concurrent_clients_on_both_replicas(
    tmp_path: Path, postgres_url: str
) -> None:
    failures: list[str] = []

    async def one_client(number: int, urls: tuple[str, str]) -> None:
        async with client(urls[0]) as first, client(urls[1]) as second:
            for run in range(RUNS):
                mcp = (first, second)[(run + number) % 2]  # alternates between the replicas
                result = await mcp.call_tool(
                    "run_script",
                    {"code": "print('ok')", "tools": [], "description": f"c{number}-r{run}"},
                )
                if result.is_error:
                    failures.append(str(result.content))

    with anyio.fail_after(240):
        async with (
            replica(tmp_path, "a", postgres_url) as a,
            replica(tmp_path, "b", postgres_url) as b,
            anyio.create_task_group() as tg,
        ):
            for number in range(CLIENTS):
                tg.start_soon(one_client, number, (a.url, b.url))
    async with await psycopg.AsyncConnection.connect(postgres_url) as db:
        cursor = await db.execute(
            "SELECT data->>'description', status FROM sagents_audit WHERE tool = 'run_script'"
        )
        rows = await cursor.fetchall()
    expected = {f"c{n}-r{r}" for n in range(CLIENTS) for r in range(RUNS)}
    assert failures == []
    assert len(rows) == CLIENTS * RUNS
    assert {description for description, _ in rows} == expected
    assert {status for _, status in rows} == {"ok"}
    # one client (one token): one session, one workspace, whichever replica ran each run
    sessions = list((tmp_path / "shared-workspaces" / "sessions").iterdir())
    assert len(sessions) == 1
    assert len(list(sessions[0].glob(".agent/scripts/*/run.json"))) == CLIENTS * RUNS
