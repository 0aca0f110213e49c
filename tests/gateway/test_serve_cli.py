"""``sagents serve`` from the command line: HTTP on a free loopback port, and refusals."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from typer.testing import CliRunner

from sagents.cli.main import app

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
