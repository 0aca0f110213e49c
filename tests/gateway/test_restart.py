"""A run interrupted by a restart is not lost: ``sagents serve`` killed while a background
run_script runs, then started again (sagents.gateway._restart)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from anyio.abc import Process
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from sagents.audit._tasks import SqliteTaskStore
from sagents.gateway._restart import (
    LOCK_NAME,
    RESTART_REASON,
    StartupLock,
    sweep_runs,
    sweep_tasks,
)
from sagents.gateway._workspaces import Workspaces
from tests.gateway.test_configured import write_config

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
CODE = "from sagents.cli.main import main; main()"
SLEEPER = "import time\nprint('started', flush=True)\ntime.sleep(60)\n"
TOKEN = "restart-token"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def serving(tmp_path: Path, config: Path) -> AsyncIterator[tuple[str, Process]]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SAGENTS_DATA_DIR": str(tmp_path / "data"),
        "SAGENTS_GATEWAY_TOKEN": TOKEN,
    }
    command = [
        sys.executable, "-c", CODE, "serve", "--transport", "http", "--port", "0",
        "--config", str(config), "--mode", "auto", "--background-after", "1",
        "--workspace", str(tmp_path / "ws"),
    ]  # fmt: skip
    async with await anyio.open_process(command, env=env, cwd=ROOT) as process:
        assert process.stderr is not None
        buffer = b""
        while b"/mcp" not in buffer:
            chunk = await process.stderr.receive()
            buffer += chunk
        line = next(li for li in buffer.decode().splitlines() if "/mcp" in li)
        try:
            yield line.split("sagents serve: ", 1)[1].strip(), process
        finally:
            # Over HTTP the gateway stops only on a signal: a failing body must not leave
            # the exit waiting for it (and the real error hidden behind the test's timeout).
            if process.returncode is None:
                process.kill()


def client(url: str, **kwargs: Any) -> Client:
    # The MCP SDK's own timeouts (httpx's default 5 s read timeout would end a response
    # stream the gateway holds open while upstreams start on a loaded machine).
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {TOKEN}"}, timeout=httpx2.Timeout(30, read=300)
    )
    return Client(streamable_http_client(url, http_client=http), mode="legacy", **kwargs)


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
async def test_a_background_run_killed_with_the_gateway_is_reported_after_restart(
    tmp_path: Path, stop: signal.Signals
) -> None:
    config = write_config(tmp_path)
    notices: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.LoggingMessageNotification):
            notices.append(message.params.data)

    with anyio.fail_after(120):
        async with serving(tmp_path, config) as (url, process):
            async with client(url) as mcp:
                handed = await mcp.call_tool(
                    "run_script", {"code": SLEEPER, "tools": [], "description": "sleep"}
                )
            process.send_signal(stop)  # SIGKILL: no clean-up at all, the hardest case
            await process.wait()
        assert handed.structured_content is not None
        task_id = handed.structured_content["task_id"]
        async with (
            serving(tmp_path, config) as (url, process),
            client(url, message_handler=on_message) as mcp,
        ):
            await mcp.list_tools()
            status = await mcp.call_tool("script_status", {"id": task_id})
            listing = await mcp.call_tool("script_status", {})
            process.send_signal(signal.SIGINT)
    assert status.structured_content is not None
    assert listing.structured_content is not None
    assert [t["id"] for t in listing.structured_content["tasks"]] == [task_id]
    (run_json,) = (tmp_path / "ws" / "sessions").glob("*/.agent/scripts/*/run.json")
    with sqlite3.connect(tmp_path / "data" / "audit.sqlite3") as db:
        rows = db.execute("SELECT status, data FROM audit WHERE tool = 'run_script'").fetchall()
    if status.structured_content["status"] == "cancelled":
        # An orderly stop (SIGTERM handled like end of input) cancels the run and records it.
        assert stop == signal.SIGTERM
        assert json.loads(run_json.read_text())["status"] == "cancelled"
        assert [s for s, _ in rows] == ["cancelled"]
        return
    assert status.structured_content["status"] == "failed"
    assert status.structured_content["reason"] == RESTART_REASON
    assert [n["task_id"] for n in notices if n.get("status") == "failed"] == [task_id]
    assert json.loads(run_json.read_text())["status"] == "aborted"
    assert [(s, json.loads(d)["reason"]) for s, d in rows] == [("aborted", RESTART_REASON)]


async def test_a_gateway_that_is_not_alone_leaves_running_tasks_to_their_owner(
    tmp_path: Path,
) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.sqlite3")
    store.started("t1", owner="token:x:", tool="run_script", started_at=1.0)
    live = StartupLock(tmp_path)
    assert live.acquire() is True
    starting = StartupLock(tmp_path)
    assert starting.acquire() is False  # another gateway holds the lock: no sweep
    live.release()
    starting.release()
    stored = store.get("t1")
    assert stored is not None
    assert stored.status == "running"
    alone = StartupLock(tmp_path)
    assert alone.acquire() is True
    assert [t.task_id for t in await sweep_tasks(store)] == ["t1"]
    alone.release()
    assert [t.task_id for t in store.take_unannounced("token:x:")] == ["t1"]
    assert store.take_unannounced("token:x:") == []
    assert store.owned("") == []


def test_a_lock_file_replaced_by_a_symlink_is_not_followed_and_nothing_is_swept(
    tmp_path: Path,
) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("x")
    (tmp_path / LOCK_NAME).symlink_to(target)
    assert StartupLock(tmp_path).acquire() is False
    assert target.read_text() == "x"


async def test_the_restart_sweep_never_follows_a_symlink_out_of_a_sessions_records(
    tmp_path: Path,
) -> None:
    # A records tree a session could tamper with must not make the sweep rewrite a file
    # elsewhere: a symlinked run folder, a symlinked scripts/ and a symlinked .agent.
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".agent" / "scripts" / "victim").mkdir(parents=True)
    victim = elsewhere / ".agent" / "scripts" / "victim" / "run.json"
    outside = elsewhere / "run.json"
    for path in (victim, outside):
        path.write_text(json.dumps({"status": "running", "mine": True}))
    root = tmp_path / "ws"
    sessions = [root / "sessions" / (digit * 32) for digit in "abc"]
    for session in sessions:
        session.mkdir(parents=True)
    (sessions[0] / ".agent" / "scripts").mkdir(parents=True)
    (sessions[0] / ".agent" / "scripts" / "planted").symlink_to(elsewhere)
    (sessions[1] / ".agent").mkdir()
    (sessions[1] / ".agent" / "scripts").symlink_to(elsewhere / ".agent" / "scripts")
    (sessions[2] / ".agent").symlink_to(elsewhere / ".agent")
    fifo = sessions[0] / ".agent" / "scripts" / "fifo"  # reading it would block the start
    fifo.mkdir()
    os.mkfifo(fifo / "run.json")
    own = sessions[0] / ".agent" / "scripts" / "own"
    own.mkdir()
    (own / "run.json").write_text(json.dumps({"status": "running"}))
    marked = await sweep_runs(Workspaces(root), None)
    assert marked == [f"sessions/{'a' * 32}/.agent/scripts/own"]
    assert json.loads((own / "run.json").read_text())["status"] == "aborted"
    for path in (victim, outside):
        assert json.loads(path.read_text()) == {"status": "running", "mine": True}


async def test_a_sweep_that_fails_gives_the_startup_lock_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sagents.gateway import _tasks as tasks_module
    from sagents.gateway._restart import LOCK_NAME
    from sagents.gateway._tasks import GatewayTasks

    async def broken(store: object) -> None:
        raise OSError("the disk went away")

    monkeypatch.setattr(tasks_module, "sweep_tasks", broken)
    store = SqliteTaskStore(tmp_path / "tasks.sqlite3")
    with pytest.raises(OSError, match="the disk went away"):
        async with GatewayTasks(store):
            pass
    fd = os.open(tmp_path / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody holds it any more
    finally:
        os.close(fd)
