"""examples/durable_web: one agent served by two worker processes (uvicorn) over one store; a
run pauses in one request and is resumed in another, by the other worker, through a real HTTP
client, including after the worker that paused was SIGKILLed (docs/agent.md, "Pausing and
resuming")."""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest

from sagents.testing import ScriptedModel, reply, tool_call
from tests.postgres_server import PostgresServer
from tests.small_disk import fill_disk

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
APP_DIR = ROOT / "examples" / "durable_web"
START_TIMEOUT_S = 180.0  # generous: the machine is shared, and a worker opens its store
REQUEST_TIMEOUT_S = 120.0


async def _drain(stream: anyio.abc.ByteReceiveStream, ready: anyio.Event, seen: list[str]) -> None:
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            seen.append(line.decode(errors="replace"))
            if b"Uvicorn running on" in line:  # logged once the socket listens
                ready.set()


@asynccontextmanager
async def _workers(
    env: dict[str, str], count: int = 1
) -> AsyncIterator[list[tuple[str, anyio.abc.Process]]]:
    """``count`` uvicorn processes serving the example, each on a socket this test bound (no
    port race), started together; their base URLs once every one is ready."""
    started: list[tuple[int, anyio.abc.Process, anyio.Event, list[str]]] = []
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(count):
                listener = socket.socket()
                listener.bind(("127.0.0.1", 0))
                listener.listen(128)
                port = int(listener.getsockname()[1])
                command = [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "--app-dir",
                    str(APP_DIR),
                    "app:app",
                    "--fd",
                    str(listener.fileno()),
                    "--no-access-log",
                ]
                with listener:
                    process = await anyio.open_process(
                        command, env=env, stdout=None, stderr=-1, pass_fds=(listener.fileno(),)
                    )
                ready, seen = anyio.Event(), list[str]()
                started.append((port, process, ready, seen))
                assert process.stderr is not None
                tg.start_soon(_drain, process.stderr, ready, seen)
            for _port, _process, ready, seen in started:
                try:
                    with anyio.fail_after(START_TIMEOUT_S):
                        await ready.wait()
                except TimeoutError:
                    raise AssertionError("a worker did not start:\n" + "\n".join(seen)) from None
            try:
                yield [(f"http://127.0.0.1:{port}", process) for port, process, _, _ in started]
            finally:
                tg.cancel_scope.cancel()
    finally:
        for _port, process, _ready, _seen in started:
            if process.returncode is None:
                process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()


def _env(tmp_path: Path, model: ScriptedModel, store_url: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SAGENTS_STATE_KEY="w" * 64,
        SAGENTS_DATA_DIR=str(tmp_path / "data"),
        NOTES_DIR=str(tmp_path / "notes"),
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY="scripted-key",
        SAGENTS_MODEL="openai:scripted-model",
        PYTHONPATH=str(ROOT),
    )
    if store_url is not None:
        env["SAGENTS_STORE"] = store_url
    return env


def _notes(tmp_path: Path) -> list[str]:
    path = tmp_path / "notes" / "notes.txt"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    return None if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))


async def _post(client: httpx2.AsyncClient, url: str, body: dict[str, Any]) -> httpx2.Response:
    with anyio.fail_after(REQUEST_TIMEOUT_S):
        return await client.post(url, json=body)


SCRIPT = [tool_call("write_note", {"text": "milk is out"}, id="call_1"), reply("Noted.")]


async def test_a_run_paused_by_one_worker_is_resumed_by_the_other_exactly_once(
    tmp_path: Path, store_url: str | None
) -> None:
    async with ScriptedModel(SCRIPT) as model:
        env = _env(tmp_path, model, store_url)
        async with (
            _workers(env, 2) as [(first, _), (second, _)],  # started together
            httpx2.AsyncClient(timeout=REQUEST_TIMEOUT_S) as client,
        ):
            pids = {(await client.get(f"{url}/worker")).json()["pid"] for url in (first, second)}
            paused = await _post(
                client, f"{first}/chat", {"session_id": "s1", "message": "milk is out"}
            )
            body = paused.json()
            assert body["status"] == "interrupted", body
            assert [i["id"] for i in body["interruptions"]] == ["call_1"]
            assert body["interruptions"][0]["arguments"] == {"text": "milk is out"}
            assert _notes(tmp_path) == []  # nothing ran before the approval
            resume = {
                "session_id": "s1",
                "state_id": body["state_id"],
                "decisions": {"call_1": {"approve": "once"}},
            }
            answers: list[httpx2.Response] = []

            async def post(url: str) -> None:
                answers.append(await _post(client, f"{url}/resume", resume))

            async with anyio.create_task_group() as tg:  # both workers at once: one wins
                tg.start_soon(post, second)
                tg.start_soon(post, first)
            stranger = await _post(client, f"{second}/resume", {**resume, "session_id": "s2"})
            bad = await client.post(f"{second}/resume", content=b"{not json")
    assert len(pids) == 2
    assert sorted(a.status_code for a in answers) == [200, 409]
    (won,) = [a.json() for a in answers if a.status_code == 200]
    (lost,) = [a.json() for a in answers if a.status_code == 409]
    assert won == {"status": "done", "reason": "stop", "output": "Noted."}
    assert lost["error"]["details"]["reason"] == "claimed"
    assert stranger.status_code == 409
    assert stranger.json()["error"]["details"]["reason"] == "session"
    assert bad.status_code == 400
    assert _notes(tmp_path) == ["milk is out"]


async def test_a_run_paused_by_a_worker_that_was_sigkilled_is_resumed_by_another(
    tmp_path: Path,
) -> None:
    async with ScriptedModel(SCRIPT) as model:
        env = _env(tmp_path, model, None)
        async with httpx2.AsyncClient(timeout=REQUEST_TIMEOUT_S) as client:
            async with _workers(env) as [(first, process)]:
                paused = (
                    await _post(client, f"{first}/chat", {"session_id": "s1", "message": "m"})
                ).json()
                assert paused["status"] == "interrupted", paused
                process.send_signal(signal.SIGKILL)
                with anyio.fail_after(START_TIMEOUT_S):
                    assert await process.wait() == -signal.SIGKILL
            async with _workers(env) as [(second, _)]:
                done = await _post(
                    client,
                    f"{second}/resume",
                    {
                        "session_id": "s1",
                        "state_id": paused["state_id"],
                        "decisions": {"call_1": {"approve": "once"}},
                    },
                )
    assert done.json() == {"status": "done", "reason": "stop", "output": "Noted."}
    assert _notes(tmp_path) == ["milk is out"]


async def test_a_pause_the_store_could_not_keep_is_an_error_and_the_chat_goes_on_once_it_can(
    tmp_path: Path, small_disk: Path
) -> None:
    script = [
        reply("Hello."),
        tool_call("write_note", {"text": "milk is out"}, id="call_1"),
        tool_call("write_note", {"text": "milk is out"}, id="call_2"),
        reply("Noted."),
    ]
    async with ScriptedModel(script) as model:
        env = {**_env(tmp_path, model, None), "SAGENTS_DATA_DIR": str(small_disk)}
        note = {"session_id": "s1", "message": "milk is out"}
        async with (
            _workers(env) as [(url, _)],
            httpx2.AsyncClient(timeout=REQUEST_TIMEOUT_S) as client,
        ):
            hello = await _post(client, f"{url}/chat", {"session_id": "s1", "message": "hi"})
            filler = fill_disk(small_disk)
            unkept = await _post(client, f"{url}/chat", note)  # its pause cannot be stored
            still = await _post(client, f"{url}/chat", note)  # its session cannot be saved
            filler.unlink()
            paused = await _post(client, f"{url}/chat", note)
            resume = {
                "session_id": "s1",
                "state_id": paused.json().get("state_id"),
                "decisions": {"call_2": {"approve": "once"}},
            }
            done = await _post(client, f"{url}/resume", resume)
    assert hello.json()["output"] == "Hello."
    for failed in (unkept, still):  # never an interrupted run nobody can resume, nor a 500
        assert failed.status_code == 503, failed.text
        assert failed.json()["error"]["code"] == "store_unavailable"
    assert paused.json()["status"] == "interrupted"
    assert done.json() == {"status": "done", "reason": "stop", "output": "Noted."}
    assert _notes(tmp_path) == ["milk is out"]


async def test_a_resume_while_the_database_is_down_is_503_and_runs_once_it_is_back(
    tmp_path: Path, own_postgres: PostgresServer
) -> None:
    async with ScriptedModel(SCRIPT) as model:
        env = _env(tmp_path, model, own_postgres.new_database())
        async with (
            _workers(env) as [(url, _)],
            httpx2.AsyncClient(timeout=REQUEST_TIMEOUT_S) as client,
        ):
            paused = (
                await _post(client, f"{url}/chat", {"session_id": "s1", "message": "m"})
            ).json()
            resume = {
                "session_id": "s1",
                "state_id": paused["state_id"],
                "decisions": {"call_1": {"approve": "once"}},
            }
            own_postgres.stop()
            down = await _post(client, f"{url}/resume", resume)  # the paused run cannot be read
            own_postgres.start()
            done = await _post(client, f"{url}/resume", resume)
    assert down.status_code == 503, down.text
    assert down.json()["error"]["code"] == "store_unavailable"
    assert done.json() == {"status": "done", "reason": "stop", "output": "Noted."}
    assert _notes(tmp_path) == ["milk is out"]
