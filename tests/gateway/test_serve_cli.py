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
import pytest
from mcp import Client
from typer.testing import CliRunner

from sagents.cli.main import app
from sagents.gateway._operator_secret import OPERATOR_SECRET_FILE

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
    """A loopback gateway without configured tokens: what only reaches the port is refused;
    the URL printed on the operator's terminal logs a browser in; a machine sends the secret
    as a bearer token."""
    data = tmp_path / "data"
    monkeypatch.delenv("SAGENTS_GATEWAY_TOKEN", raising=False)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(data)}
    command = [sys.executable, "-c", CODE, "serve", "--transport", "http", "--port", "0",
               "--approvals", "console"]  # fmt: skip
    with anyio.fail_after(90):
        async with await anyio.open_process(command, env=env, cwd=ROOT) as process:
            line = await read_stderr_until(process, b"console at ")
            url = line.split("console at ", 1)[1].strip()
            base = url.split("/console/", 1)[0]
            secret_file = data / OPERATOR_SECRET_FILE
            secret = secret_file.read_text().strip()
            async with httpx2.AsyncClient() as intruder, httpx2.AsyncClient() as browser:
                refused = await intruder.get(f"{base}/console/approvals")
                events = await intruder.get(f"{base}/console/events")
                login = await browser.get(url)
                page = await browser.get(f"{base}/console/approvals")
                machine = await intruder.get(
                    f"{base}/console/approvals", headers={"Authorization": f"Bearer {secret}"}
                )
            process.send_signal(signal.SIGINT)
            await process.wait()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/console/\?token=[A-Za-z0-9_-]{43}", url), url
    assert url.endswith(f"?token={secret}")
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert refused.status_code == 401
    assert events.status_code == 401
    assert login.status_code == 303
    assert login.headers["location"] == "/console/runs"
    assert page.status_code == 200
    assert "<h1>Approvals</h1>" in page.text
    assert machine.status_code == 200


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
