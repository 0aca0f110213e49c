"""examples/git_history through ``sagents serve``, driven by the MCP Inspector CLI:
the Inspector calls ``run_script`` with the example's script, the gateway runs it in the sandbox
against the reference ``mcp-server-git`` on a repository the test creates, and the report is
known exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.cli_helpers import PEER_GIT
from tests.cli.test_git_history_example import EXAMPLE, EXPECTED, _make_repo
from tests.gateway.test_peer_clients import SERVE, inspector_args, output_json, run_node

pytestmark = pytest.mark.anyio


async def test_the_inspector_runs_the_git_report_through_sagents_serve(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _make_repo(repo)
    config = json.loads((EXAMPLE / "mcp_servers.json").read_text())
    server = config["mcpServers"]["git"]
    server["command"] = str(PEER_GIT)
    server["cwd"] = str(repo)
    config_path = tmp_path / "git.json"
    config_path.write_text(json.dumps(config))
    target = [
        *SERVE,
        "--config", str(config_path),
        "--mode", "read-only",
        "--workspace", str(tmp_path / "ws"),
    ]  # fmt: skip

    listed = output_json(await run_node(*inspector_args(target, "--method", "tools/list")))
    names = {tool["name"] for tool in listed["tools"]}
    assert {"run_script", "git__git_log", "git__git_show"} <= names

    script = (EXAMPLE / "git_report.py").read_text()
    call = [
        "--method", "tools/call",
        "--tool-name", "run_script",
        "--tool-arg", f"code={script}",
        "--tool-arg", "tools=[]",
        "--tool-arg", "description=git history report",
    ]  # fmt: skip
    called = output_json(await run_node(*inspector_args(target, *call)))
    text = "".join(block["text"] for block in called["content"] if block["type"] == "text")
    assert called.get("isError") is not True, text
    summary, report = text.split("\n", 1)
    assert summary.startswith("run_script ok: 7 calls, 0 failed, ")
    assert report == EXPECTED.rstrip("\n")
