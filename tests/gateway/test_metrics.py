"""``/metrics`` (docs/observability.md): a real ``sagents serve`` scraped like Prometheus does."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from prometheus_client.parser import text_string_to_metric_families

from sagents.errors import StoreUnavailableError
from sagents.gateway import Gateway
from sagents.gateway._convert import ERROR_META_KEY
from sagents.gateway._factory import open_gateway
from sagents.gateway._metrics import AUDIT_NOT_WRITTEN, GatewayMetrics, outcome_of
from sagents.gateway._operator_secret import OPERATOR_SECRET_FILE
from sagents.gateway._pending import PendingApproval
from sagents.gateway._reload import ConfigReloader
from sagents.gateway._settings import GatewaySettings
from sagents.mcp._status import ServerStatus
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_configured import write_config
from tests.gateway.test_serve_cli import read_stderr_until

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
CODE = "from sagents.cli.main import main; main()"


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the sample ``name`` with exactly ``labels`` (0 when absent, as a counter
    that has not moved yet)."""
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return found.value
    return 0.0


def names(text: str) -> set[str]:
    return {family.name for family in text_string_to_metric_families(text)}


def serve_command(tmp_path: Path, *extra: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(tmp_path / "data")}
    env.pop("SAGENTS_GATEWAY_TOKEN", None)
    command = [sys.executable, "-c", CODE, "serve", "--config", str(write_config(tmp_path)),
               "--mode", "auto", *extra]  # fmt: skip
    return command, env


def secret_of(tmp_path: Path) -> str:
    return (tmp_path / "data" / OPERATOR_SECRET_FILE).read_text().strip()


async def test_tool_calls_move_the_counters_by_tool_and_outcome(tmp_path: Path) -> None:
    command, env = serve_command(tmp_path, "--transport", "http", "--port", "0")
    results: list[mt.CallToolResult] = []
    with anyio.fail_after(120):
        async with await anyio.open_process(command, env=env, cwd=ROOT) as process:
            line = await read_stderr_until(process, b"/mcp")
            url = line.split("sagents serve: ", 1)[1].strip()
            base = url.removesuffix("/mcp")
            auth = {"Authorization": f"Bearer {secret_of(tmp_path)}"}
            async with httpx2.AsyncClient() as http:
                refused = await http.get(f"{base}/metrics")
                wrong = await http.get(f"{base}/metrics", headers={"Authorization": "Bearer x"})
                foreign = await http.get(f"{base}/metrics", headers={**auth, "Host": "evil.com"})
                before = await http.get(f"{base}/metrics", headers=auth)
                async with Client(url, mode="legacy") as client:
                    await client.list_tools()  # the upstream is ready once it lists
                    results.append(await client.call_tool("fault__echo", {"text": "x"}))
                    results.append(await client.call_tool("fault__echo", {}))
                    results.append(await client.call_tool("no_such_tool", {}))
                    during = await http.get(f"{base}/metrics", headers=auth)
                after = await http.get(f"{base}/metrics", headers=auth)
            process.send_signal(signal.SIGINT)
            await process.wait()
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    assert wrong.status_code == 401
    assert foreign.status_code == 421
    assert before.status_code == 200
    assert before.headers["content-type"].startswith("text/plain; version=")
    assert [r.is_error for r in results] == [False, True, True]
    ok = {"tool": "fault__echo", "outcome": "ok"}
    assert sample(before.text, "sagents_tool_calls_total", **ok) == 0
    assert sample(after.text, "sagents_tool_calls_total", **ok) == 1
    bad_error = results[1].meta["sagents/error"]["code"] if results[1].meta else None
    assert bad_error is not None
    assert sample(after.text, "sagents_tool_calls_total", tool="fault__echo", outcome=bad_error)
    assert sample(
        after.text, "sagents_tool_calls_total", tool="(unknown)", outcome="unknown_tool"
    ) == 1  # fmt: skip
    assert sample(after.text, "sagents_tool_call_duration_seconds_count", server="fault") == 2
    assert sample(after.text, "sagents_tool_call_duration_seconds_count", server="") == 1
    assert sample(during.text, "sagents_sessions_open") == 1
    assert sample(after.text, "sagents_upstream_servers", state="ready") == 2
    assert sample(after.text, "sagents_upstream_restarts_total", server="fault") == 0
    assert sample(after.text, "sagents_approvals_pending") == 0
    assert all(name.startswith("sagents_") for name in names(after.text))


async def test_metrics_public_answers_without_a_token(tmp_path: Path) -> None:
    command, env = serve_command(tmp_path, "--transport", "http", "--port", "0", "--metrics-public")
    with anyio.fail_after(120):
        async with await anyio.open_process(command, env=env, cwd=ROOT) as process:
            line = await read_stderr_until(process, b"/mcp")
            base = line.split("sagents serve: ", 1)[1].strip().removesuffix("/mcp")
            async with httpx2.AsyncClient() as http:
                scraped = await http.get(f"{base}/metrics")
            process.send_signal(signal.SIGINT)
            await process.wait()
    assert scraped.status_code == 200
    assert {"sagents_tool_calls", "sagents_sessions_open"} <= names(scraped.text)


async def test_metrics_port_serves_metrics_beside_stdio(tmp_path: Path) -> None:
    command, env = serve_command(tmp_path, "--metrics-port", "0")
    with anyio.fail_after(120):
        async with await anyio.open_process(command, env=env, cwd=ROOT) as process:
            line = await read_stderr_until(process, b"metrics at ")
            url = line.split("metrics at ", 1)[1].strip()
            auth = {"Authorization": f"Bearer {secret_of(tmp_path)}"}
            async with httpx2.AsyncClient() as http:
                refused = await http.get(url)
                scraped = await http.get(url, headers=auth)
                other = await http.get(url.removesuffix("/metrics") + "/mcp", headers=auth)
            assert process.stdin is not None
            await process.stdin.aclose()  # stdio's EOF ends the gateway
            code = await process.wait()
    assert url.startswith("http://127.0.0.1:")
    assert refused.status_code == 401
    assert scraped.status_code == 200
    assert sample(scraped.text, "sagents_sessions_open") == 0
    assert other.status_code == 404
    assert code == 0


async def test_two_gateways_in_one_process_count_apart() -> None:
    first = GatewayMetrics(sessions_open=lambda: 1, approvals_pending=lambda: 0)
    second = GatewayMetrics(sessions_open=lambda: 2, approvals_pending=lambda: 0)

    async def answer() -> mt.CallToolResult:
        return mt.CallToolResult(content=[])

    await first.counting(answer(), tool="t", server=lambda: None)
    one = first.exposition().decode()
    two = second.exposition().decode()
    assert sample(one, "sagents_tool_calls_total", tool="t", outcome="ok") == 1
    assert sample(two, "sagents_tool_calls_total", tool="t", outcome="ok") == 0
    assert sample(two, "sagents_sessions_open") == 2


async def test_background_tasks_are_counted_by_status() -> None:
    provider = FakeProvider()
    ended = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.LoggingMessageNotification):
            ended.set()  # the completion notice

    async with (
        Gateway(provider, background_after_s=0.05) as gateway,
        Client(gateway.server, mode="legacy", message_handler=on_message) as client,
    ):
        with anyio.fail_after(30):
            before = gateway.metrics.exposition().decode()
            handed = await client.call_tool("fleet__slow", {})
            during = gateway.metrics.exposition().decode()
            provider.release.set()
            await ended.wait()
            after = gateway.metrics.exposition().decode()
    assert "task_id" in (handed.structured_content or {})
    assert sample(before, "sagents_background_tasks", status="running") == 0
    assert sample(during, "sagents_background_tasks", status="running") == 1
    assert sample(after, "sagents_background_tasks", status="running") == 0
    assert sample(after, "sagents_background_tasks", status="ok") == 1


async def test_run_script_runs_their_calls_and_sandboxes_are_counted(tmp_path: Path) -> None:
    settings = GatewaySettings(
        config=write_config(tmp_path), mode="auto", workspace=tmp_path / "ws"
    )
    script = (
        "from agent_tools import call_many\n"
        "call_many('fault__add', [{'a': i, 'b': 1} for i in range(20)])\n"
    )
    async with open_gateway(settings) as gateway, Client(gateway.server, mode="legacy") as client:
        with anyio.fail_after(120):
            await client.list_tools()
            before = gateway.metrics.exposition().decode()
            ran = await client.call_tool(
                "run_script", {"code": script, "tools": [], "description": "twenty adds"}
            )
            broken = await client.call_tool(
                "run_script", {"code": "raise SystemExit(3)", "tools": [], "description": "x"}
            )
            after = gateway.metrics.exposition().decode()
    assert not ran.is_error, ran
    assert broken.is_error
    assert sample(before, "sagents_script_runs_total", outcome="ok") == 0
    assert sample(after, "sagents_script_runs_total", outcome="ok") == 1
    failed = outcome_of(broken)
    assert sample(after, "sagents_script_runs_total", outcome=failed) == 1
    assert sample(before, "sagents_script_calls_total") == 0
    assert sample(after, "sagents_script_calls_total") == 20
    assert sample(before, "sagents_sandboxes") == 0
    assert sample(after, "sagents_sandboxes") == 1  # the session's, kept for its next run


async def test_config_reloads_are_counted_applied_or_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    settings = GatewaySettings(config=config, mode="auto", workspace=tmp_path / "ws")
    async with open_gateway(settings, wait_for_servers=True) as gateway:
        reloader = ConfigReloader(gateway, settings)
        with anyio.fail_after(60):
            applied = await reloader.reload()
            good = config.read_text(encoding="utf-8")
            config.write_text("{", encoding="utf-8")
            refused = await reloader.reload()
            config.write_text(good, encoding="utf-8")
        text = gateway.metrics.exposition().decode()
    assert applied.error is None
    assert refused.error is not None
    assert sample(text, "sagents_config_reloads_total", outcome="applied") == 1
    assert sample(text, "sagents_config_reloads_total", outcome="refused") == 1


async def test_approvals_pending_and_answered_are_counted() -> None:
    async with Gateway(FakeProvider()) as gateway:
        pending = gateway.pending
        item = PendingApproval(approval_id="a1", kind="call", session_id="s", tools=("t",))
        answers: list[str] = []
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:

                async def ask() -> None:
                    answers.append(await pending.ask(item))

                tg.start_soon(ask)
                await pending.changed()  # the card waits
                during = gateway.metrics.exposition().decode()
                assert pending.answer("a1", "allow_once", by=None)
            after = gateway.metrics.exposition().decode()
    assert answers == ["allow_once"]
    assert sample(during, "sagents_approvals_pending") == 1
    assert sample(during, "sagents_approvals_answered_total", answer="allow_once") == 0
    assert sample(after, "sagents_approvals_pending") == 0
    assert sample(after, "sagents_approvals_answered_total", answer="allow_once") == 1


async def test_store_errors_are_counted_from_answers_and_runs_without_their_audit_row() -> None:
    metrics = GatewayMetrics(sessions_open=lambda: 0, approvals_pending=lambda: 0)
    refused = StoreUnavailableError("the database is down").to_dict()

    async def answer(result: mt.CallToolResult) -> mt.CallToolResult:
        return result

    store_down = mt.CallToolResult(content=[], is_error=True, _meta={ERROR_META_KEY: refused})
    unaudited = mt.CallToolResult(
        content=[], structured_content={"status": "ok", "calls": 1, "audit": "missing"}
    )
    audited = mt.CallToolResult(
        content=[], structured_content={"status": "ok", "calls": 1, "audit": "written"}
    )
    await metrics.counting(answer(store_down), tool="t", server=lambda: None)
    for result in (unaudited, audited):
        await metrics.counting(answer(result), tool="run_script", server=lambda: None)
    text = metrics.exposition().decode()
    assert sample(text, "sagents_store_errors_total", code="store_unavailable") == 1
    assert sample(text, "sagents_store_errors_total", code=AUDIT_NOT_WRITTEN) == 1
    assert sample(text, "sagents_tool_calls_total", tool="t", outcome="store_unavailable") == 1


async def test_approvals_answered_by_the_client_through_elicitation_are_counted() -> None:
    answers = iter(["allow_once", "deny"])

    async def answer(context: ClientRequestContext, params: mt.ElicitRequestParams) -> Any:
        return mt.ElicitResult(action="accept", content={"decision": next(answers)})

    provider = FakeProvider()
    for era in ("legacy", "auto"):  # elicitation mid-call; the 2026-07-28 input request
        async with (
            Gateway(provider) as gateway,
            Client(gateway.server, mode=era, elicitation_callback=answer) as client,
        ):
            with anyio.fail_after(30):
                before = gateway.metrics.exposition().decode()
                await client.call_tool("fleet__configure", {})
                after = gateway.metrics.exposition().decode()
        assert sum(sample(before, "sagents_approvals_answered_total", answer=a)
                   for a in ("allow_once", "deny")) == 0  # fmt: skip
        expected = "allow_once" if era == "legacy" else "deny"
        assert sample(after, "sagents_approvals_answered_total", answer=expected) == 1
    assert len(provider.calls) == 1  # the allowed one ran


async def test_a_gateway_shows_the_gauges_of_the_parts_it_was_built_with() -> None:
    # Given at construction (docs/architecture.md, "Lifecycles"): nothing is set afterwards.
    statuses = [ServerStatus(name="fleet", state="ready", transport="stdio: fleet")]
    gateway = Gateway(FakeProvider(), sandboxes_alive=lambda: 3, upstream_statuses=lambda: statuses)
    text = gateway.metrics.exposition().decode()
    assert sample(text, "sagents_sandboxes") == 3
    assert sample(text, "sagents_upstream_servers", state="ready") == 1
    bare = Gateway(FakeProvider()).metrics.exposition().decode()
    assert sample(bare, "sagents_sandboxes") == 0
    assert sample(bare, "sagents_upstream_servers", state="ready") == 0
