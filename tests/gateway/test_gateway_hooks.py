"""The config's command hooks on a real ``sagents serve`` (docs/gateway.md, "Hooks").

Real peers: ``sagents serve`` over stdio, the upstream ``tests/mcp/servers/fault_server.py``
(``fault__echo``), the ``mcp`` SDK's client, the hooks as subprocesses. A direct call and a
run_script's call of the same tool both go through the hooks.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.gateway.test_configured import ROOT, text_of, write_config

pytestmark = pytest.mark.anyio

HOOK = r"""
import json, sys
mode = sys.argv[1]
call = json.load(sys.stdin)
with open(sys.argv[2], "a") as log:
    log.write(json.dumps({"event": call["event"], "tool": call["tool"]}) + "\n")
if mode == "pre" and "forbidden" in call["arguments"].get("text", ""):
    print("forbidden words are not echoed", file=sys.stderr)
    sys.exit(2)
if mode == "post":
    blocks = call["result"]["content"]
    for block in blocks:
        if block.get("type") == "text":
            block["text"] = block["text"].replace("s3cr3t", "[redacted]")
    print(json.dumps({"content": blocks}))
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def serve(tmp_path: Path) -> tuple[StdioServerParameters, Path]:
    script, log = tmp_path / "hook.py", tmp_path / "hooks.jsonl"
    script.write_text(HOOK)

    def hook(mode: str) -> dict[str, object]:
        return {"match": "fault__*", "command": [sys.executable, str(script), mode, str(log)]}

    config = write_config(
        tmp_path, hooks={"preToolUse": [hook("pre")], "postToolUse": [hook("post")]}
    )
    code = "from sagents.cli.main import main; main()"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(tmp_path / "data")}
    args = ["-c", code, "serve", "--config", str(config), "--mode", "auto"]
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT)), log


async def test_direct_and_script_calls_go_through_the_configured_hooks(tmp_path: Path) -> None:
    params, log = serve(tmp_path)
    code = "from agent_tools import call\nprint(call('fault__echo', {'text': 'script s3cr3t'}))"
    script = {"code": code, "tools": ["fault__echo"], "description": "echo a secret"}
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            denied = await client.call_tool("fault__echo", {"text": "a forbidden word"})
            redacted = await client.call_tool("fault__echo", {"text": "token s3cr3t"})
            ran = await client.call_tool("run_script", script)
    assert denied.is_error
    assert "forbidden words are not echoed" in text_of(denied)
    assert text_of(redacted) == "token [redacted]"
    assert ran.is_error is False, text_of(ran)
    assert "script [redacted]" in text_of(ran)
    assert "s3cr3t" not in text_of(ran)
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert seen.count({"event": "preToolUse", "tool": "fault__echo"}) == 3
    assert (
        seen.count({"event": "postToolUse", "tool": "fault__echo"}) == 2
    )  # the denied one did not run
