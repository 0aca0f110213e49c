"""A real ``sagents serve --transport http`` subprocess and what its process tree holds.

Shared by the session-lifetime tests (tests/gateway/test_session_lifetime.py) and
``bench/bench_sessions.py``: the gateway is started as a user starts it, with one stdio
upstream (tests/gateway/fixtures/stdio_echo.py) so that ``run_script`` is offered, and
:func:`tree_usage` reads from ``/proc`` what the serve process and its descendants hold.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from sagents.sandbox._diskuse import tree_pids

ROOT = Path(__file__).resolve().parents[2]
ECHO = Path(__file__).resolve().parent / "fixtures" / "stdio_echo.py"
_CGROUP = re.compile(r"sagents-[0-9a-f]{16}")
_SERVE = "from sagents.cli.main import main; main()"


@dataclass(frozen=True, kw_only=True)
class TreeUsage:
    """What a process and its descendants hold at one moment.

    Attributes:
        fds: Open descriptors of the process itself (``/proc/PID/fd``).
        processes: Its descendants (children, grandchildren...), the upstream included.
        cgroups: Distinct sandbox cgroups (``sagents-<hex>``) its descendants are in.
        rss_bytes: Resident memory of the process itself.
        tree_rss_bytes: Resident memory of the process and every descendant.
    """

    fds: int
    processes: int
    cgroups: int
    rss_bytes: int
    tree_rss_bytes: int


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass  # ended meanwhile
    return 0


def _cgroups_of(pid: int) -> set[str]:
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return set(_CGROUP.findall(f.read()))
    except OSError:
        return set()


def tree_usage(pid: int) -> TreeUsage:
    """What ``pid`` and its descendants hold now (see :class:`TreeUsage`)."""
    pids = tree_pids(pid)
    descendants = [p for p in pids if p != pid]
    cgroups: set[str] = set()
    for p in descendants:
        cgroups |= _cgroups_of(p)
    return TreeUsage(
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        processes=len(descendants),
        cgroups=len(cgroups),
        rss_bytes=_rss_bytes(pid),
        tree_rss_bytes=sum(_rss_bytes(p) for p in pids),
    )


def sandbox_pids(pid: int) -> list[int]:
    """The descendants of ``pid`` that run in a sandbox (in a ``sagents-<hex>`` cgroup)."""
    return [p for p in tree_pids(pid) if p != pid and _cgroups_of(p)]


async def wait_exit(pid: int) -> None:
    """Wait, on a pidfd (a kernel signal), until ``pid`` has exited (unbounded: the caller
    bounds it)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


@dataclass(kw_only=True)
class Serve:
    """A running ``sagents serve --transport http``."""

    url: str
    pid: int
    process: anyio.abc.Process
    log: list[str] = field(default_factory=list)
    """Its stderr lines so far."""
    config: Path | None = None
    """Its config file."""
    new_line: list[anyio.Event] = field(default_factory=lambda: [anyio.Event()])
    """Set (and replaced) at each stderr line."""

    async def wait_log(self, text: str, *, after: int = 0, wait_s: float = 60.0) -> str:
        """The first stderr line from index ``after`` on that contains ``text``, waited for
        at most ``wait_s`` seconds."""
        with anyio.fail_after(wait_s):
            while True:
                for line in self.log[after:]:
                    if text in line:
                        return line
                await self.new_line[0].wait()

    def usage(self) -> TreeUsage:
        """What the serve process tree holds now."""
        return tree_usage(self.pid)

    async def settled_usage(self, wait_s: float = 60.0) -> TreeUsage:
        """What the tree holds once every sandbox process of it has exited (waited for on
        pidfds, at most ``wait_s`` seconds), measured inside an open probe session after one
        round trip: by then the server has read the end of every earlier connection, and
        every measurement holds the same one probe connection."""
        with anyio.fail_after(wait_s):
            for pid in sandbox_pids(self.pid):
                await wait_exit(pid)
        async with Client(self.url, mode="legacy") as probe:
            await probe.list_tools()
            return self.usage()

    async def settled_like(self, before: TreeUsage, wait_s: float = 60.0) -> TreeUsage:
        """:meth:`settled_usage` measured again (at most ``wait_s`` seconds) until processes,
        cgroups and descriptors are ``before``'s: the release of a session that just ended
        runs after its client saw the end, so one measurement may come before it. A leak
        never settles: the last measurement is returned for the caller to compare."""
        usage = await self.settled_usage(wait_s)
        with anyio.move_on_after(wait_s):
            while (usage.processes, usage.cgroups, usage.fds) != (
                before.processes,
                before.cgroups,
                before.fds,
            ):
                await anyio.sleep(0.25)  # descriptors have no event to wait on
                usage = await self.settled_usage(wait_s)
        return usage


@asynccontextmanager
async def http_serve(
    workdir: Path,
    settings: dict[str, Any] | None = None,
    *,
    servers: dict[str, Any] | None = None,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> AsyncIterator[Serve]:
    """``sagents serve --transport http --port 0`` (and ``args``) on a config with the echo
    upstream (or ``servers``; and ``settings`` beside them), its data dir in ``workdir``;
    stopped (SIGTERM) on leaving."""
    config = workdir / "sagents.json"
    upstreams = servers if servers is not None else {"echo": echo_server()}
    config.write_text(json.dumps({"mcpServers": upstreams, **(settings or {})}), encoding="utf-8")
    command = [sys.executable, "-c", _SERVE, "serve", "--transport", "http", "--port", "0"]
    command += ["--config", str(config), *args]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SAGENTS_DATA_DIR": str(workdir / "data"),
        **(env or {}),
    }
    async with await anyio.open_process(command, env=env, cwd=workdir) as process:
        assert process.stderr is not None
        stderr = process.stderr
        log: list[str] = []
        new_line = [anyio.Event()]
        announced = anyio.Event()
        url: list[str] = []

        async def read_log() -> None:
            buffer = b""
            async for chunk in stderr:  # read to the end: a full pipe would block serve
                buffer += chunk
                *lines, rest = buffer.split(b"\n")
                buffer = rest
                for raw in lines:
                    line = raw.decode(errors="replace")
                    log.append(line)
                    new_line[0].set()
                    new_line[0] = anyio.Event()
                    if "sagents serve: " in line and "/mcp" in line and not url:
                        url.append(line.split("sagents serve: ", 1)[1].strip())
                        announced.set()
            announced.set()  # ended before announcing: the caller sees no url

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_log)
            with anyio.fail_after(60):
                await announced.wait()
            if not url:
                raise RuntimeError("sagents serve ended before serving:\n" + "\n".join(log))
            try:
                yield Serve(
                    url=url[0],
                    pid=process.pid,
                    process=process,
                    log=log,
                    config=config,
                    new_line=new_line,
                )
            finally:
                if process.returncode is None:
                    process.terminate()
                with anyio.fail_after(30):
                    await process.wait()


def echo_server(*args: str) -> dict[str, Any]:
    """The config entry of the stdio echo upstream (``args`` after its transport)."""
    return {"command": sys.executable, "args": [str(ECHO), "sdk", *args]}


RUN_SCRIPT_ARGS = {"code": "print('hello')", "tools": ["echo__echo"], "description": "probe"}


async def short_session(url: str, *, delete: bool = True) -> None:
    """One short client session: list the tools, call one, run one script, disconnect
    (with the transport's ``DELETE`` when ``delete``, else by dropping the connection)."""
    transport = streamable_http_client(url, terminate_on_close=delete)
    async with Client(transport, mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "run_script" in names, names
        called = await client.call_tool("echo__echo", {"text": "hi"})
        assert not called.is_error, called
        ran = await client.call_tool("run_script", RUN_SCRIPT_ARGS)
        assert not ran.is_error, ran
