"""Shared helpers of the MCP tests: paths of test servers and peers, free ports, child counts."""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
from anyio.streams.text import TextReceiveStream
from mcp import StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
SERVERS = Path(__file__).resolve().parent / "servers"
PEERS = ROOT / ".peers"
NODE_MODULES = PEERS / "node" / "node_modules" / "@modelcontextprotocol"
PEER_BIN = PEERS / "venv" / "bin"


def documented_config(after: str, data: Path, repo: Path) -> dict[str, object]:
    """The first JSON block of docs/mcp.md after the text ``after``, with this checkout, a data
    directory and a repository put in for ``/path/to/sagents``, ``/srv/data``, ``/srv/repo``."""
    text = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    assert after in text, f"docs/mcp.md lost {after!r}"
    block = re.search(r"```json\n(.*?)```", text[text.index(after) :], re.DOTALL)
    assert block is not None, f"docs/mcp.md has no JSON block after {after!r}"
    filled = (
        block.group(1)
        .replace("/path/to/sagents", str(ROOT))
        .replace("/srv/data", str(data))
        .replace("/srv/repo", str(repo))
    )
    document: dict[str, object] = json.loads(filled)
    return document


def fault_server(*modes: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    """stdio params of ``servers/fault_server.py`` in ``modes``."""
    return StdioServerParameters(
        command=sys.executable, args=[str(SERVERS / "fault_server.py"), *modes], env=env
    )


def tiny_legacy() -> StdioServerParameters:
    """stdio params of the stdlib-only legacy server."""
    return StdioServerParameters(command=sys.executable, args=[str(SERVERS / "tiny_legacy.py")])


def node_server(
    package: str, *args: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    """stdio params of an npm reference server installed by scripts/setup-peers.sh."""
    script = NODE_MODULES / package / "dist" / "index.js"
    return StdioServerParameters(command="node", args=[str(script), *args], env=env)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def child_pids() -> list[int]:
    """Pids of this process's children, zombies included (from /proc)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me:
            found.append(int(entry.name))
    return found


def process_state(pid: int) -> str | None:
    """The kernel state letter of ``pid`` (``Z`` for a zombie), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


@asynccontextmanager
async def http_peer(transport: str, port: int | None = None) -> AsyncIterator[int]:
    """Run server-everything on ``transport`` (``sse`` or ``streamableHttp``); yield its port.

    Readiness is its "listening" line on stderr (a pipe), never a sleep.
    """
    port = port or free_port()
    script = NODE_MODULES / "server-everything" / "dist" / "index.js"
    env = {**os.environ, "PORT": str(port)}
    process = await anyio.open_process(
        ["node", str(script), transport], env=env, stderr=-1, stdout=-1, start_new_session=True
    )
    try:
        assert process.stderr is not None
        text = ""
        with anyio.fail_after(60):
            async for chunk in TextReceiveStream(process.stderr):
                text += chunk
                if str(port) in text:
                    break
        yield port
    finally:
        with anyio.CancelScope(shield=True):
            process.terminate()
            with anyio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
