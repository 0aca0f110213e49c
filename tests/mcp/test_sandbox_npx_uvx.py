"""The reference servers through ``npx``/``uvx``, sandboxed and offline, exactly as docs/mcp.md
("Through npx and uvx, offline") configures them: the documented JSON with this checkout, a data
directory and a repository put in, each server's home seeded with the package cache that
``scripts/setup.sh --test`` fills under ``.peers/`` (what a first start with the network on
would leave there)."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters

from sagents.config import SagentsConfig, parse_config
from sagents.mcp import MCPSupervisor, ServerSettings
from sagents.mcp._sandboxed import default_home_root
from sagents.sandbox import DEFAULT_SANDBOX_UID
from sagents.sandbox._bwrap import python_runtime
from tests.mcp.helpers import PEERS, ROOT, SERVERS, documented_config

pytestmark = pytest.mark.anyio

DOC = ROOT / "docs" / "mcp.md"
NPM_CACHE = PEERS / "npm-cache"
UV_CACHE = PEERS / "uv-cache"


def _documented_config(data: Path, repo: Path) -> SagentsConfig:
    document = documented_config("#### Through npx and uvx, offline", data, repo)
    return parse_config(document, file=str(DOC))


def _seed(cache: Path, home: Path, inside: str) -> None:
    """Copy a filled package cache to ``<home>/<inside>``, owned by the server's uid."""
    if not (cache / ".filled").is_file():
        pytest.fail(f"the package cache {str(cache)!r} is missing: run scripts/setup.sh --test")
    target = home / inside
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(cache, target, symlinks=True)
    if os.geteuid() == 0:  # as root the server runs as the owner of its home
        for directory, dirs, files in os.walk(home):
            for name in (*dirs, *files):
                os.lchown(os.path.join(directory, name), DEFAULT_SANDBOX_UID, DEFAULT_SANDBOX_UID)
        os.chown(home, DEFAULT_SANDBOX_UID, DEFAULT_SANDBOX_UID)


@pytest.fixture
async def documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[SagentsConfig, Path, Path, MCPSupervisor]]:
    """The documented config and a supervisor with a log dir of its own (:func:`_entry` seeds
    a server's default home, under ``$SAGENTS_DATA_DIR``, when a test takes its entry)."""
    if not (ROOT / ".venv" / "bin" / "uvx").is_file():
        pytest.fail("uvx is missing from .venv: run scripts/setup.sh --test")
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "state"))  # the homes' root
    data = tmp_path / "data"
    data.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    config = _documented_config(data, repo)
    async with MCPSupervisor(log_dir=tmp_path / "logs") as sup:
        yield config, data, repo, sup


def _entry(config: SagentsConfig, name: str) -> tuple[StdioServerParameters, ServerSettings]:
    """The server's documented params and settings, its default home seeded with its cache."""
    home = default_home_root() / name
    if name == "filesystem":
        _seed(NPM_CACHE, home, ".npm")
    else:
        _seed(UV_CACHE, home, ".cache/uv")
    server = next(s for s in config.servers if s.name == name)
    assert isinstance(server.params, StdioServerParameters)
    assert server.settings.sandbox is not None
    return server.params, server.settings


async def test_npx_filesystem_offline_sees_only_its_root(
    documented: tuple[SagentsConfig, Path, Path, MCPSupervisor], tmp_path: Path
) -> None:
    config, data, _, sup = documented
    (data / "a.txt").write_text("alpha")
    secret = tmp_path / "secret.txt"
    secret.write_text("sk-host-secret")
    (data / "link.txt").symlink_to(secret)  # a way out the server's own check must see
    params, settings = _entry(config, "filesystem")
    assert params.command == "npx"
    assert "--offline" in params.args
    await sup.add_server("filesystem", params, settings)
    listed = await sup.call_tool("filesystem", "list_directory", {"path": str(data)})
    read = await sup.call_tool("filesystem", "read_text_file", {"path": str(data / "a.txt")})
    outside = await sup.call_tool("filesystem", "read_text_file", {"path": str(secret)})
    linked = await sup.call_tool("filesystem", "read_text_file", {"path": str(data / "link.txt")})
    passwd = await sup.call_tool("filesystem", "read_text_file", {"path": "/etc/passwd"})
    wrote = await sup.call_tool(
        "filesystem", "write_file", {"path": str(data / "b.txt"), "content": "b"}
    )
    assert "a.txt" in listed.text
    assert "alpha" in read.text
    for refused in (outside, linked, passwd):
        assert refused.is_error, refused
        assert "sk-host-secret" not in refused.text
    assert not wrote.is_error, wrote
    assert (data / "b.txt").read_text() == "b"
    assert sup.status("filesystem").sandboxed


async def test_uvx_git_offline_reads_its_repository_and_no_other(
    documented: tuple[SagentsConfig, Path, Path, MCPSupervisor], tmp_path: Path
) -> None:
    config, _, repo, sup = documented
    other = tmp_path / "other"
    author = ["-c", "user.name=t", "-c", "user.email=t@example.org"]
    for path, message in ((repo, "first commit of the repository"), (other, "another one")):
        path.mkdir(exist_ok=True)
        await anyio.run_process(["git", "init", "-q", str(path)], check=True)
        (path / "file.txt").write_text(message)
        await anyio.run_process(["git", "-C", str(path), "add", "file.txt"], check=True)
        commit = ["git", "-C", str(path), *author, "commit", "-q", "-m", message]
        await anyio.run_process(commit, check=True)
    params, settings = _entry(config, "git")
    assert "--offline" in params.args
    await sup.add_server("git", params, settings)
    log = await sup.call_tool("git", "git_log", {"repo_path": str(repo)})
    elsewhere = await sup.call_tool("git", "git_log", {"repo_path": str(other)})
    assert "first commit of the repository" in log.text
    assert elsewhere.is_error, elsewhere
    assert "another one" not in elsewhere.text


async def test_uvx_time_offline_answers_without_a_network(
    documented: tuple[SagentsConfig, Path, Path, MCPSupervisor],
) -> None:
    config, _, _, sup = documented
    params, settings = _entry(config, "time")
    assert settings.sandbox is not None
    assert not settings.sandbox.network
    await sup.add_server("time", params, settings)
    now = await sup.call_tool("time", "get_current_time", {"timezone": "Europe/Paris"})
    assert "Europe/Paris" in now.text
    # The same sandbox block, with a server of ours that tries to connect out.
    escape = StdioServerParameters(
        command=python_runtime()[1], args=[str(SERVERS / "escape_server.py")]
    )
    box = replace(settings.sandbox, readable=(*settings.sandbox.readable, str(SERVERS)))
    shown = ServerSettings(connect_timeout=60.0, sandbox=box)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        await sup.add_server("escape", escape, shown)
        answer = await sup.call_tool("escape", "connect", {"host": "127.0.0.1", "port": port})
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert answer.text.startswith("ERROR"), answer
