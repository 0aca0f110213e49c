"""The config's command hooks (docs/gateway.md, "Hooks"), run as real subprocesses.

``hooks.preToolUse`` / ``hooks.postToolUse`` become one middleware of the registry that
``build_tool_manager`` opens (the one every caller's call ends in: direct, script, agent loop,
gateway). Each hook gets the call as JSON on stdin and answers by exit status and stdout, with
Claude Code's conventions: 0 = read stdout, 2 = deny with stderr as the reason, anything else,
a timeout or garbage = failed (``onError``: deny by default).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.config import load_config
from sagents.config.tools import build_tool_manager
from sagents.errors import ConfigError
from sagents.tool import SessionContext, ToolManager, tool

pytestmark = pytest.mark.anyio

HOOK = r"""
import json, sys, time
mode = sys.argv[1]
call = json.load(sys.stdin)
if len(sys.argv) > 2:
    with open(sys.argv[2], "a") as log:
        log.write(json.dumps(call) + "\n")
if mode == "deny":
    print("no configuring on Sundays", file=sys.stderr)
    sys.exit(2)
if mode == "rewrite":
    print(json.dumps({"decision": "allow", "arguments": {**call["arguments"], "level": 2}}))
if mode == "rewrite-invalid":
    print(json.dumps({"decision": "allow", "arguments": {"sn": "A1", "level": "high"}}))
if mode == "redact":
    text = call["result"]["content"][0]["text"].replace("s3cr3t", "[redacted]")
    print(json.dumps({"content": [{"type": "text", "text": text}]}))
if mode == "hang":
    time.sleep(600)
if mode == "garbage":
    print("certainly, here is my answer")
if mode == "crash":
    sys.exit(1)
"""

RAN: list[dict[str, Any]] = []


@tool(name="fleet__configure", permission="write")
async def configure(sn: str, level: int = 1) -> str:
    """Configure a device."""
    RAN.append({"sn": sn, "level": level})
    return f"configured {sn} at level {level}, token=s3cr3t"


@tool(name="notes__read", permission="read_only")
async def read_notes() -> str:
    """Read the notes."""
    RAN.append({})
    return "notes"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def _hook(tmp_path: Path, mode: str, match: str = "fleet__*", **extra: Any) -> dict[str, Any]:
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    return {"match": match, "command": [sys.executable, str(script), mode], **extra}


async def _manager(tmp_path: Path, hooks: dict[str, Any]) -> ToolManager:
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps({"mcpServers": {}, "hooks": hooks}))
    manager = await build_tool_manager(load_config(path))
    manager.register_tool(configure)
    manager.register_tool(read_notes)
    return manager


async def _call(manager: ToolManager, name: str, args: dict[str, Any]) -> Any:
    context = SessionContext(session_id="s1", trusted={"principal": "alice"})
    with anyio.fail_after(60):
        return await manager.run_tool(name, args, context, tool_call_id="call_1")


async def test_a_hook_that_exits_2_denies_with_its_stderr_and_matches_only_its_tools(
    tmp_path: Path,
) -> None:
    async with await _manager(tmp_path, {"preToolUse": [_hook(tmp_path, "deny")]}) as manager:
        denied = await _call(manager, "fleet__configure", {"sn": "A1"})
        assert denied.error is not None
        assert denied.error.code == "not_allowed"
        assert denied.error.message == "no configuring on Sundays"
        assert RAN == []
        assert (await _call(manager, "notes__read", {})).text == "notes"  # not matched


async def test_the_hook_gets_the_call_as_json_on_stdin(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    hook = _hook(tmp_path, "allow")
    hook["command"].append(str(log))
    hooks = {"preToolUse": [hook], "postToolUse": [dict(hook)]}
    async with await _manager(tmp_path, hooks) as manager:
        result = await _call(manager, "fleet__configure", {"sn": "A1"})
    assert not result.is_error, result
    pre, post = (json.loads(line) for line in log.read_text().splitlines())
    assert pre["event"] == "preToolUse"
    assert pre["hook_event_name"] == "PreToolUse"
    assert pre["tool"] == pre["tool_name"] == "fleet__configure"
    assert pre["arguments"] == pre["tool_input"] == {"sn": "A1"}
    assert pre["session"] == pre["session_id"] == "s1"
    assert pre["principal"] == "alice"
    assert pre["permission"] == "write"
    assert pre["tool_call_id"] == pre["tool_use_id"] == "call_1"
    assert post["event"] == "postToolUse"
    assert post["result"]["content"][0]["text"] == "configured A1 at level 1, token=s3cr3t"
    assert post["result"]["isError"] is False


async def test_rewritten_arguments_run_and_an_invalid_rewrite_is_refused(tmp_path: Path) -> None:
    async with await _manager(tmp_path, {"preToolUse": [_hook(tmp_path, "rewrite")]}) as manager:
        result = await _call(manager, "fleet__configure", {"sn": "A1", "level": 5})
        assert not result.is_error, result
        assert RAN == [{"sn": "A1", "level": 2}]
    RAN.clear()
    hooks = {"preToolUse": [_hook(tmp_path, "rewrite-invalid")]}
    async with await _manager(tmp_path, hooks) as manager:
        refused = await _call(manager, "fleet__configure", {"sn": "A1"})
        assert refused.error is not None
        assert refused.error.code == "invalid_arguments"
        assert RAN == []


async def test_a_post_hook_redacts_the_result(tmp_path: Path) -> None:
    async with await _manager(tmp_path, {"postToolUse": [_hook(tmp_path, "redact")]}) as manager:
        result = await _call(manager, "fleet__configure", {"sn": "A1"})
    assert result.text == "configured A1 at level 1, token=[redacted]"


async def test_a_hook_that_hangs_times_out_and_denies(tmp_path: Path) -> None:
    hooks = {"preToolUse": [_hook(tmp_path, "hang", timeoutSec=1)]}
    async with await _manager(tmp_path, hooks) as manager:
        result = await _call(manager, "fleet__configure", {"sn": "A1"})
    assert result.error is not None
    assert result.error.code == "not_allowed"
    assert "did not answer within 1 s" in result.error.message
    assert RAN == []


@pytest.mark.parametrize(
    ("mode", "why"), [("garbage", "its answer is not JSON"), ("crash", "exited with status 1")]
)
async def test_a_failing_hook_denies_unless_on_error_allows(
    tmp_path: Path, mode: str, why: str
) -> None:
    async with await _manager(tmp_path, {"preToolUse": [_hook(tmp_path, mode)]}) as manager:
        result = await _call(manager, "fleet__configure", {"sn": "A1"})
        assert result.error is not None
        assert why in result.error.message
        assert RAN == []
    hooks = {"preToolUse": [_hook(tmp_path, mode, onError="allow")]}
    async with await _manager(tmp_path, hooks) as manager:
        assert not (await _call(manager, "fleet__configure", {"sn": "A1"})).is_error
        assert RAN == [{"sn": "A1", "level": 1}]


@pytest.mark.parametrize(
    "hooks",
    [
        {"preToolUse": [{"match": "*"}]},
        {"preToolUse": [{"command": []}]},
        {"preToolUse": [{"command": ["x"], "timeoutSec": 0}]},
        {"preToolUse": [{"command": ["x"], "onError": "ignore"}]},
        {"beforeToolUse": []},
    ],
)
def test_a_bad_hooks_section_is_a_clear_config_error(tmp_path: Path, hooks: dict[str, Any]) -> None:
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps({"mcpServers": {}, "hooks": hooks}))
    with pytest.raises(ConfigError, match="hooks"):
        load_config(path)
