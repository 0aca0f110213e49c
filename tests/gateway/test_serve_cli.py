"""``sagents serve`` from the command line: HTTP on a free loopback port, and refusals."""

from __future__ import annotations

import os
import re
import signal
import stat
import sys
from pathlib import Path

import anyio
import anyio.abc
import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from typer.testing import CliRunner

from sagents.cli.main import app
from sagents.gateway._operator_secret import OPERATOR_SECRET_FILE
from tests.gateway.console.test_console_http import csrf_of

ROOT = Path(__file__).resolve().parents[2]
CODE = "from sagents.cli.main import main; main()"


def test_serve_refuses_a_public_bind_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAGENTS_GATEWAY_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["serve", "--transport", "http", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "refusing to bind '0.0.0.0' without a bearer token" in result.output
    assert "SAGENTS_GATEWAY_TOKEN" in result.output


def test_serve_refuses_an_unknown_mode() -> None:
    result = CliRunner().invoke(app, ["serve", "--mode", "yolo"])
    assert result.exit_code == 2
    assert "unknown permission mode 'yolo'" in result.output


@pytest.mark.anyio
async def test_serve_over_http_announces_its_url_and_answers_mcp() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", CODE, "serve", "--transport", "http", "--port", "0"]
    with anyio.fail_after(60):
        async with await anyio.open_process(command, env=env, cwd=ROOT) as process:
            assert process.stderr is not None
            buffer = b""
            while b"/mcp" not in buffer:
                buffer += await process.stderr.receive()
            line = next(li for li in buffer.decode().splitlines() if "/mcp" in li)
            url = line.split("sagents serve: ", 1)[1].strip()
            async with Client(url, mode="legacy") as client:
                tools = (await client.list_tools()).tools
            process.send_signal(signal.SIGINT)
            code = await process.wait()
    assert url.startswith("http://127.0.0.1:")
    assert tools == []
    assert code in (0, 130)


async def read_stderr_until(process: anyio.abc.Process, marker: bytes) -> str:
    """The process's stderr up to the line holding ``marker`` (the caller bounds the wait)."""
    assert process.stderr is not None
    buffer = b""
    while marker not in buffer or not buffer.split(marker, 1)[1].count(b"\n"):
        buffer += await process.stderr.receive()
    return next(li for li in buffer.decode().splitlines() if marker.decode() in li)


@pytest.mark.anyio
async def test_serve_prints_a_login_url_and_nothing_else_makes_the_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The red team's path on a real loopback gateway without configured tokens: a client's
    write call waits for the console; a process that only reaches the port loads the approvals
    page, takes its CSRF token and posts "Allow once" (401, nothing approved); the URL printed on
    the operator's terminal logs a browser in, which answers; a machine sends the secret as a
    bearer token."""
    from tests.gateway.test_configured import write_config

    data = tmp_path / "data"
    monkeypatch.delenv("SAGENTS_GATEWAY_TOKEN", raising=False)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(data)}
    command = [sys.executable, "-c", CODE, "serve", "--transport", "http", "--port", "0",
               "--config", str(write_config(tmp_path)), "--approvals", "console"]  # fmt: skip
    results: list[mt.CallToolResult] = []
    with anyio.fail_after(120):
        async with await anyio.open_process(command, env=env, cwd=ROOT) as process:
            line = await read_stderr_until(process, b"console at ")
            url = line.split("console at ", 1)[1].strip()
            base = url.split("/console/", 1)[0]
            secret_file = data / OPERATOR_SECRET_FILE
            secret = secret_file.read_text().strip()
            machine_auth = {"Authorization": f"Bearer {secret}"}
            async with (
                httpx2.AsyncClient() as intruder,
                httpx2.AsyncClient() as browser,
                httpx2.AsyncClient(headers=machine_auth) as machine,
                anyio.create_task_group() as tg,
            ):

                async def write_call() -> None:
                    async with Client(f"{base}/mcp", mode="legacy") as client:
                        await client.list_tools()  # the upstream is ready once it lists
                        results.append(await client.call_tool("fault__echo", {"text": "x"}))

                async with machine.stream("GET", f"{base}/console/events") as stream:
                    tg.start_soon(write_call)
                    async for event in stream.aiter_lines():  # until the call waits
                        if '"approvals.changed"' in event:
                            break
                listed = await machine.get(f"{base}/console/approvals")
                found = re.search(r'id="approvals" data-pending="([^"]*)"', listed.text)
                waiting = [i for i in (found.group(1) if found else "").split(",") if i]
                answer_url = f"{base}/console/approvals/{waiting[0]}"
                refused = await intruder.get(f"{base}/console/approvals")
                posted = await intruder.post(
                    answer_url, data={"decision": "allow_once", "csrf": csrf_of(refused.text)}
                )
                events = await intruder.get(f"{base}/console/events")
                still = await machine.get(f"{base}/console/approvals")
                login = await browser.get(url)
                page = await browser.get(f"{base}/console/approvals")
                denied = await browser.post(
                    answer_url, data={"decision": "deny", "csrf": csrf_of(page.text)}
                )
            process.send_signal(signal.SIGINT)
            await process.wait()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/console/\?token=[A-Za-z0-9_-]{43}", url), url
    assert url.endswith(f"?token={secret}")
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert refused.status_code == 401
    assert waiting[0] not in refused.text
    assert posted.status_code == 401
    assert events.status_code == 401
    assert waiting[0] in still.text  # the intruder approved nothing
    assert login.status_code == 303
    assert login.headers["location"] == "/console/runs"
    assert page.status_code == 200
    assert denied.status_code == 303
    assert results[0].is_error is True
    assert "not approved" in str(results[0].content)


@pytest.mark.anyio
async def test_sagents_console_makes_its_own_secret_in_its_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SAGENTS_GATEWAY_TOKEN", raising=False)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(tmp_path / "other")}
    command = [sys.executable, "-c", CODE, "console", "--data-dir", str(tmp_path), "--port", "0"]
    with anyio.fail_after(90):
        async with await anyio.open_process(command, env=env, cwd=ROOT) as process:
            line = await read_stderr_until(process, b"log in at ")
            url = line.split("log in at ", 1)[1].strip()
            base = url.split("/console/", 1)[0]
            async with httpx2.AsyncClient() as http:
                refused = await http.get(f"{base}/console/runs")
                await http.get(url)
                runs = await http.get(f"{base}/console/runs")
            process.send_signal(signal.SIGINT)
            await process.wait()
    secret = (tmp_path / OPERATOR_SECRET_FILE).read_text().strip()
    assert url.endswith(f"/console/?token={secret}")
    assert refused.status_code == 401
    assert runs.status_code == 200
