"""Against reference servers nobody here wrote (installed by scripts/setup-peers.sh).

The stdio ones run twice: on the host, and each in its own bubblewrap sandbox with the profile
docs/mcp.md gives for it ("Sandboxed servers").
"""

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters

from sagents.mcp import (
    MCPSupervisor,
    ServerSandbox,
    ServerSettings,
    SseServerParameters,
    StreamableHttpServerParameters,
)
from tests.mcp.helpers import PEER_BIN, PEERS, free_port, http_peer, node_server

pytestmark = pytest.mark.anyio

SETTINGS = ServerSettings(connect_timeout=60.0)
EVERYTHING_TOOLS = {"echo", "get-sum", "get-tiny-image", "get-structured-content"}


@pytest.fixture(params=["host", "sandbox"])
def isolation(request: pytest.FixtureRequest) -> str:
    """Where a stdio peer runs: on the host, or in its own sandbox."""
    return str(request.param)


def _settings(isolation: str, tmp_path: Path, **sandbox: Any) -> ServerSettings:
    if isolation == "host":
        return SETTINGS
    box = ServerSandbox(home=str(tmp_path / "home"), **sandbox)
    return ServerSettings(connect_timeout=60.0, sandbox=box)


async def _check_everything(sup: MCPSupervisor, name: str) -> None:
    originals = {s.source.original_name for s in sup.tools(name)}
    assert originals >= EVERYTHING_TOOLS
    echo = await sup.call_tool(name, "echo", {"message": "hi"})
    assert echo.text == "Echo: hi"
    total = await sup.call_tool(name, "get-sum", {"a": 2, "b": 3})
    assert "5" in total.text
    image = await sup.call_tool(name, "get-tiny-image")
    assert any(block.type == "image" for block in image.content)


async def test_server_everything_over_stdio(tmp_path: Path, isolation: str) -> None:
    settings = _settings(isolation, tmp_path, readable=(str(PEERS / "node"),))
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        await sup.add_server("everything", node_server("server-everything", "stdio"), settings)
        assert sup.status("everything").sandboxed == (isolation == "sandbox")
        await _check_everything(sup, "everything")
        structured = await sup.call_tool(
            "everything", "get-structured-content", {"location": "New York"}
        )
        assert isinstance(structured.structured, dict)


async def test_server_everything_over_sse(tmp_path: Path) -> None:
    async with http_peer("sse") as port, MCPSupervisor(log_dir=tmp_path) as sup:
        params = SseServerParameters(url=f"http://127.0.0.1:{port}/sse")
        await sup.add_server("everything", params, SETTINGS)
        await _check_everything(sup, "everything")
        await sup.remove_server("everything")


async def test_server_everything_over_streamable_http(tmp_path: Path) -> None:
    async with http_peer("streamableHttp") as port, MCPSupervisor(log_dir=tmp_path) as sup:
        params = StreamableHttpServerParameters(url=f"http://127.0.0.1:{port}/mcp", api_key="k")
        await sup.add_server("everything", params, SETTINGS)
        await _check_everything(sup, "everything")
        await sup.remove_server("everything")


async def test_an_expired_http_session_is_reinitialised(tmp_path: Path) -> None:
    port = free_port()
    params = StreamableHttpServerParameters(url=f"http://127.0.0.1:{port}/mcp")
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        async with http_peer("streamableHttp", port):
            await sup.add_server("everything", params, SETTINGS)
            assert (await sup.call_tool("everything", "echo", {"message": "1"})).text == "Echo: 1"
        async with http_peer("streamableHttp", port):
            again = await sup.call_tool("everything", "echo", {"message": "2"})
            assert again.text == "Echo: 2"
            assert sup.status("everything").restarts == 1
            await sup.remove_server("everything")


async def test_server_filesystem_reads_inside_its_root(tmp_path: Path, isolation: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("alpha")
    settings = _settings(
        isolation, tmp_path, readable=(str(PEERS / "node"),), writable=(str(root),)
    )
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        params = node_server("server-filesystem", str(root))
        await sup.add_server("fs", params, settings)
        result = await sup.call_tool("fs", "read_text_file", {"path": str(root / "a.txt")})
        denied = await sup.call_tool("fs", "read_text_file", {"path": "/etc/passwd"})
        wrote = await sup.call_tool(
            "fs", "write_file", {"path": str(root / "b.txt"), "content": "b"}
        )
        permissions = {s.source.original_name: s.permission for s in sup.tools("fs")}
    assert "alpha" in result.text
    assert denied.is_error
    assert not wrote.is_error, wrote
    assert (root / "b.txt").read_text() == "b"
    assert permissions["read_text_file"] == "read_only"


async def test_server_memory_keeps_state_across_calls(tmp_path: Path, isolation: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    env = {"MEMORY_FILE_PATH": str(state / "memory.jsonl")}
    settings = _settings(
        isolation, tmp_path, readable=(str(PEERS / "node"),), writable=(str(state),)
    )
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        await sup.add_server("memory", node_server("server-memory", env=env), settings)
        entity = {"name": "sagents", "entityType": "project", "observations": ["gateway"]}
        created = await sup.call_tool("memory", "create_entities", {"entities": [entity]})
        graph = await sup.call_tool("memory", "read_graph")
    assert not created.is_error
    assert "sagents" in graph.text


async def test_mcp_server_time_from_pypi(tmp_path: Path, isolation: str) -> None:
    params = StdioServerParameters(
        command=str(PEER_BIN / "mcp-server-time"), args=["--local-timezone", "UTC"]
    )
    settings = _settings(isolation, tmp_path, readable=(str(PEERS / "venv"),), network=False)
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        await sup.add_server("time", params, settings)
        result = await sup.call_tool("time", "get_current_time", {"timezone": "Europe/Paris"})
        bad = await sup.call_tool("time", "get_current_time", {"timezone": "Not/AZone"})
    assert "Europe/Paris" in result.text
    assert bad.is_error


async def test_mcp_server_git_on_a_temporary_repository(tmp_path: Path, isolation: str) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    await anyio.run_process(["git", "init", "-q", str(repo)], check=True)
    (repo / "new.txt").write_text("x")
    # As root the sandboxed server is another uid than the repository's owner: git would call
    # the repository's ownership dubious unless told it is safe (docs/mcp.md).
    safe = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory"}
    params = StdioServerParameters(
        command=str(PEER_BIN / "mcp-server-git"),
        args=["--repository", str(repo)],
        env={**safe, "GIT_CONFIG_VALUE_0": str(repo)},
    )
    settings = _settings(
        isolation, tmp_path, readable=(str(PEERS / "venv"),), writable=(str(repo),)
    )
    async with MCPSupervisor(log_dir=tmp_path) as sup:
        await sup.add_server("git", params, settings)
        status = await sup.call_tool("git", "git_status", {"repo_path": str(repo)})
    assert "new.txt" in status.text
