"""A config that reloads: a real ``sagents serve --transport http`` subprocess, the MCP SDK's
client, real stdio upstreams, and ``SIGHUP`` or ``--watch`` (docs/configuration.md,
"Reloading"). The ``SIGHUP`` tests share one ``serve`` (each starts from its own config, applied
by a reload); ``--watch`` and the profiles' tokens need their own."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from sagents.config import load_config
from sagents.errors import ConfigError
from sagents.gateway._settings import load_profiles
from sagents.sandbox._diskuse import tree_pids
from tests.gateway.serve_probe import Serve, echo_server, http_serve, wait_exit

GATE = Path(__file__).resolve().parent / "fixtures" / "stdio_gate.py"
WAIT_S = 90


class Changes:
    """``notifications/tools/list_changed`` as a client hears them."""

    def __init__(self) -> None:
        self.event = anyio.Event()

    async def handler(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self.event.set()

    async def next(self) -> None:
        await self.event.wait()
        self.event = anyio.Event()


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Serve]:
    """One ``sagents serve`` for the module's ``SIGHUP`` tests (a start takes seconds)."""
    async with http_serve(tmp_path_factory.mktemp("reload")) as serve:
        yield serve


async def start_from(serve: Serve, servers: dict[str, Any], *tools: str) -> None:
    """Bring the shared ``serve`` to ``servers`` by a reload and wait until ``tools`` are
    listed (added servers start after the reload's line)."""
    assert serve.process.returncode is None  # nothing an earlier test did was an exit
    write_config(serve, servers)
    line = await reload(serve)
    assert "config reloaded" in line, line
    changes = Changes()
    async with Client(serve.url, mode="legacy", message_handler=changes.handler) as client:
        for tool in tools:
            await until_listed(client, changes, tool)


def upstream_pid(serve: Serve, marker: str) -> int:
    """The pid of the serve process's upstream whose command line ends with ``marker``."""
    for pid in tree_pids(serve.pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[-2:-1] == [marker.encode()]:
            return pid
    raise AssertionError(f"no upstream {marker!r} under {serve.pid}")


def write_config(serve: Serve, servers: dict[str, Any], **settings: Any) -> None:
    assert serve.config is not None
    serve.config.write_text(json.dumps({"mcpServers": servers, **settings}), encoding="utf-8")


async def reload(serve: Serve) -> str:
    """SIGHUP, and the log line of the reload's result."""
    after = len(serve.log)
    serve.process.send_signal(signal.SIGHUP)
    return await serve.wait_log("sagents serve: config ", after=after, wait_s=WAIT_S)


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def until_listed(client: Client, changes: Changes, name: str) -> set[str]:
    """The tool names once ``name`` is among them (announced as its server becomes ready)."""
    names = await tool_names(client)
    while name not in names:
        await changes.next()
        names = await tool_names(client)
    return names


@pytest.mark.anyio
async def test_a_reload_adds_removes_and_restarts_servers_and_the_session_stays_open(
    shared: Serve,
) -> None:
    serve = shared
    servers = {"alpha": echo_server("alpha"), "beta": echo_server("beta")}
    with anyio.fail_after(WAIT_S):
        await start_from(serve, servers, "alpha__echo", "beta__echo")
    changes = Changes()
    async with Client(serve.url, mode="legacy", message_handler=changes.handler) as client:
        with anyio.fail_after(WAIT_S):
            names = await until_listed(client, changes, "beta__echo")
            assert "alpha__echo" in names
            alpha, beta = upstream_pid(serve, "alpha"), upstream_pid(serve, "beta")
            write_config(
                serve,
                {"beta": echo_server("beta", "v2"), "gamma": echo_server("gamma")},
                scripts={"maxCalls": 7},
            )
            changes.event = anyio.Event()  # only the reload's notifications from here
            line = await reload(serve)
            assert "removed alpha" in line, line
            assert "added gamma" in line, line
            assert "restarted beta" in line, line
            assert "applied only at the next start" in line, line
            assert "scripts" in line.rsplit("next start", 1)[1], line
            await changes.next()  # the open session hears of it
            names = await until_listed(client, changes, "gamma__echo")
            names = await until_listed(client, changes, "beta__echo")
            assert not any(name.startswith("alpha__") for name in names), names
            await wait_exit(alpha)  # the removed server's process ended
            await wait_exit(beta)  # the changed one's too, and it runs again:
            assert upstream_pid(serve, "v2") != beta
            for name in ("beta__echo", "gamma__echo"):
                called = await client.call_tool(name, {"text": "after"})
                assert not called.is_error, called
                assert called.content == [mt.TextContent(text="after")]
            gone = await client.call_tool("alpha__echo", {"text": "x"})
            assert gone.is_error


@pytest.mark.anyio
async def test_a_config_that_fails_validation_is_refused_and_the_running_one_stays(
    shared: Serve,
) -> None:
    serve = shared
    with anyio.fail_after(WAIT_S):
        await start_from(serve, {"echo": echo_server()}, "echo__echo")
    async with Client(serve.url, mode="legacy") as client:
        with anyio.fail_after(WAIT_S):
            assert "echo__echo" in await tool_names(client)
            write_config(serve, {"echo": echo_server()}, profiles={"ops": {"servrs": []}})
            line = await reload(serve)
            assert serve.config is not None
            with pytest.raises(ConfigError) as at_start:
                load_profiles(serve.config)
            assert "config not reloaded, the running one stays" in line, line
            assert str(at_start.value) in line, line
            # bad JSON too
            serve.config.write_text('{"mcpServers": {', encoding="utf-8")
            line = await reload(serve)
            with pytest.raises(ConfigError) as bad_json:
                load_config(serve.config)
            assert str(bad_json.value) in line, line
            called = await client.call_tool("echo__echo", {"text": "still"})
            assert called.content == [mt.TextContent(text="still")]
    assert serve.process.returncode is None  # a bad file is a state, never an exit


@pytest.mark.anyio
async def test_watch_reloads_when_the_file_changes(tmp_path: Path) -> None:
    async with http_serve(tmp_path, args=("--watch",)) as serve:
        changes = Changes()
        async with Client(serve.url, mode="legacy", message_handler=changes.handler) as client:
            with anyio.fail_after(WAIT_S):
                await until_listed(client, changes, "echo__echo")
                after = len(serve.log)
                write_config(serve, {"echo": echo_server(), "gamma": echo_server("gamma")})
                line = await serve.wait_log("sagents serve: config ", after=after, wait_s=WAIT_S)
                assert "added gamma" in line, line
                await until_listed(client, changes, "gamma__echo")


@pytest.mark.anyio
async def test_a_removed_server_stops_after_its_call_finishes(
    shared: Serve, tmp_path: Path
) -> None:
    serve = shared
    fifo = tmp_path / "gate.fifo"
    os.mkfifo(fifo)
    servers = {"echo": echo_server(), "gate": {"command": sys.executable, "args": [str(GATE)]}}
    with anyio.fail_after(WAIT_S):
        await start_from(serve, servers, "echo__echo", "gate__wait")
    changes = Changes()
    async with (
        Client(serve.url, mode="legacy", message_handler=changes.handler) as client,
        anyio.create_task_group() as tg,
    ):
        with anyio.fail_after(WAIT_S):
            await until_listed(client, changes, "gate__wait")
            gate = upstream_pid(serve, str(GATE))
            answers: list[mt.CallToolResult] = []

            async def call() -> None:
                answers.append(await client.call_tool("gate__wait", {"fifo": str(fifo)}))
                # ended before reading? release the writer's open below, which then fails
                os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))

            tg.start_soon(call)
            # opening the pipe returns once the tool opened it: the call is in flight
            writer = await anyio.to_thread.run_sync(
                lambda: open(fifo, "w", encoding="utf-8"),  # noqa: SIM115 - closed below
                abandon_on_cancel=True,
            )
            assert not answers, answers  # in flight
            write_config(serve, {"echo": echo_server()})
            after = len(serve.log)
            changes.event = anyio.Event()  # only the reload's notifications from here
            serve.process.send_signal(signal.SIGHUP)
            await serve.wait_log("reloading", after=after)
            await changes.next()  # its tools are gone: told before its call ends
            assert "gate__wait" not in await tool_names(client)
            assert not answers  # still running
            writer.write("finished\n")
            writer.close()
            line = await serve.wait_log("sagents serve: config ", after=after)
            assert "removed gate" in line, line
            await wait_exit(gate)
    assert [answer.content for answer in answers] == [[mt.TextContent(text="finished")]]
    assert not answers[0].is_error


@pytest.mark.anyio
async def test_a_removed_profile_refuses_its_open_session_and_a_changed_one_applies(
    tmp_path: Path,
) -> None:
    tokens = {"SAGENTS_GATEWAY_TOKEN": "operator-token", "OPS_TOKEN": "ops-token"}
    profiles: dict[str, dict[str, Any]] = {
        "ops": {"bearerTokenEnv": "OPS_TOKEN", "tools": ["echo__echo", "echo__big"]},
        "dev": {"tools": ["echo__echo"]},
    }
    async with http_serve(tmp_path, {"profiles": profiles}, env=tokens) as serve:
        headers = {"Authorization": "Bearer ops-token"}
        http_client = httpx2.AsyncClient(headers=headers)
        transport = streamable_http_client(serve.url, http_client=http_client)
        async with Client(transport, mode="legacy") as client:
            with anyio.fail_after(WAIT_S):
                names = await tool_names(client)
                assert {"echo__echo", "echo__big"} <= names, names
                # narrowed: the open session's next list follows the profile
                narrowed = {**profiles, "ops": {**profiles["ops"], "tools": ["echo__echo"]}}
                write_config(serve, {"echo": echo_server()}, profiles=narrowed)
                assert "config reloaded" in await reload(serve)
                names = await tool_names(client)
                assert "echo__echo" in names, names
                assert "echo__big" not in names, names
                # removed (with its token): the next request is refused
                write_config(serve, {"echo": echo_server()}, profiles={"dev": profiles["dev"]})
                assert "config reloaded" in await reload(serve)
                with pytest.raises(MCPError):  # the transport's 401
                    await client.call_tool("echo__echo", {"text": "x"})
        # a new connection with the removed token is refused at once
        async with httpx2.AsyncClient(headers=headers) as http:
            answer = await http.post(serve.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert answer.status_code == 401
