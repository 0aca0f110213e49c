"""Two ``sagents serve --transport http`` replicas on one PostgreSQL database, for the replica
tests (tests/gateway/test_replicas.py, tests/gateway/test_replicas_audit.py): each its own data
dir (its own machine), one shared workspace root and store."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]
FAULT_SERVER = ROOT / "tests" / "mcp" / "servers" / "fault_server.py"
CODE = "from sagents.cli.main import main; main()"
TOKEN = "replica-token"
LEASE_S = 3.0


@dataclass
class Replica:
    url: str
    process: anyio.abc.Process
    log: list[str]


def write_config(tmp_path: Path) -> Path:
    document: dict[str, Any] = {
        "mcpServers": {
            "fault": {
                "command": sys.executable,
                "args": [str(FAULT_SERVER)],
                "env": {"PYTHONPATH": str(ROOT)},
                "toolPermissions": {"hang": "write", "echo": "write", "add": "read_only"},
            }
        },
        "store": {"leaseSec": LEASE_S},
    }
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@asynccontextmanager
async def replica(tmp_path: Path, name: str, store: str, *options: str) -> AsyncIterator[Replica]:
    """One replica: its own data dir (its own machine), the shared workspace root and store;
    ``options`` are more ``sagents serve`` arguments."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SAGENTS_DATA_DIR": str(tmp_path / f"data-{name}"),
        "SAGENTS_GATEWAY_TOKEN": TOKEN,
    }
    command = [
        sys.executable, "-c", CODE, "serve", "--transport", "http", "--port", "0",
        "--config", str(write_config(tmp_path)), "--mode", "ask", "--background-after", "1",
        "--workspace", str(tmp_path / "shared-workspaces"), "--store", store, *options,
    ]  # fmt: skip
    log: list[str] = []
    async with (
        await anyio.open_process(command, env=env, cwd=ROOT) as process,
        anyio.create_task_group() as tg,
    ):
        assert process.stderr is not None
        started = anyio.Event()
        url: list[str] = []

        async def read_log() -> None:  # drained to the end: a full pipe would stall the replica
            assert process.stderr is not None
            buffer = ""
            async for chunk in process.stderr:
                buffer += chunk.decode(errors="replace")
                *lines, buffer = buffer.split("\n")
                for line in lines:
                    log.append(line)
                    if "sagents serve: http://" in line and not url:
                        url.append(line.split("sagents serve: ", 1)[1].strip())
                        started.set()
            started.set()

        tg.start_soon(read_log)
        with anyio.fail_after(60):
            await started.wait()
        assert url, "\n".join(log)
        try:
            yield Replica(url=url[0], process=process, log=log)
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
            with anyio.fail_after(60):
                await process.wait()


def client(url: str, **kwargs: Any) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    return Client(streamable_http_client(url, http_client=http), mode="auto", **kwargs)
