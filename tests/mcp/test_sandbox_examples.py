"""The sandboxed reference servers of docs/mcp.md ("Profiles of typical servers") work as
written: the documented JSON, with this checkout, a data directory and a repository put in."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from sagents.config import parse_config
from sagents.mcp import MCPSupervisor
from tests.mcp.helpers import ROOT, documented_config

pytestmark = pytest.mark.anyio

DOC = ROOT / "docs" / "mcp.md"


async def test_the_documented_sandboxed_reference_servers_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("alpha")
    repo = tmp_path / "repo"
    repo.mkdir()
    await anyio.run_process(["git", "init", "-q", str(repo)], check=True)
    (repo / "new.txt").write_text("x")
    config = parse_config(documented_config("The reference servers", data, repo), file=str(DOC))
    assert {s.name for s in config.servers} == {"filesystem", "git", "time"}
    assert all(s.settings.sandbox is not None for s in config.servers)
    async with MCPSupervisor(log_dir=tmp_path / "logs") as sup:
        statuses = await sup.add_servers(config.as_supervisor_input())
        assert {name: s.state for name, s in statuses.items()} == dict.fromkeys(statuses, "ready")
        read = await sup.call_tool("filesystem", "read_text_file", {"path": str(data / "a.txt")})
        outside = await sup.call_tool(
            "filesystem", "read_text_file", {"path": str(ROOT / "README.md")}
        )
        status = await sup.call_tool("git", "git_status", {"repo_path": str(repo)})
        now = await sup.call_tool("time", "get_current_time", {"timezone": "Europe/Paris"})
    assert "alpha" in read.text
    assert outside.is_error
    assert "new.txt" in status.text
    assert "Europe/Paris" in now.text
