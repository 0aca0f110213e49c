"""web_fetch and the todo list offered by ``sagents serve`` from ``builtinTools`` in the config."""

from __future__ import annotations

import base64
import io
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import aclosing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client

from sagents.cli._vision import image_model_from_config
from sagents.config import load_config
from sagents.errors import ConfigError
from sagents.gateway import Profile
from sagents.gateway._factory import open_gateway
from sagents.gateway._settings import GatewaySettings
from sagents.testing import ScriptedModel, reply
from tests.gateway.test_configured import FAULT_SERVER, ROOT, http_serve, text_of, write_config
from tests.gateway.test_http import client as http_client

pytestmark = pytest.mark.anyio


@pytest.fixture
def page_url() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = b"<html><head><title>Served</title></head><body><h2>Hi</h2></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() returns at the loop's next poll (0.5 s by default)
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


async def _call(
    tmp_path: Path, section: Mapping[str, object], tool: str, args: dict[str, object]
) -> tuple[bool, str]:
    config = write_config(tmp_path, builtinTools=section)
    settings = GatewaySettings(
        config=config, mode="auto", transport="http", port=0, workspace=tmp_path / "ws"
    )
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="legacy") as client:
                result = await client.call_tool(tool, args)
    return result.is_error, text_of(result)


async def test_web_fetch_reaches_loopback_only_when_the_config_allows_it(
    tmp_path: Path, page_url: str
) -> None:
    allowed = {"enabled": ["web_fetch"], "webFetch": {"allowNetworks": ["127.0.0.0/8"]}}
    is_error, text = await _call(tmp_path, allowed, "web_fetch", {"url": page_url})
    assert is_error is False, text
    assert text.startswith("Title: Served")
    assert "## Hi" in text
    is_error, text = await _call(
        tmp_path, {"enabled": ["web_fetch"]}, "web_fetch", {"url": page_url}
    )
    assert is_error is True
    assert "loopback" in text


async def test_todo_tools_from_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    section = {"enabled": ["todo_write", "todo_read"]}
    is_error, text = await _call(
        tmp_path, section, "todo_write", {"items": [{"id": "a", "content": "from the gateway"}]}
    )
    assert is_error is False, text
    assert "[ ] a: from the gateway" in text
    assert (tmp_path / "data" / "todo.sqlite3").exists()


async def test_memory_through_the_gateway_needs_a_configured_anonymous_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    enabled = ["memory_store", "memory_search"]
    is_error, text = await _call(
        tmp_path, {"enabled": enabled}, "memory_store", {"content": "likes tea"}
    )
    assert is_error is True
    assert "needs a user" in text
    section = {"enabled": enabled, "memory": {"anonymousUser": "operator"}}
    is_error, text = await _call(tmp_path, section, "memory_store", {"content": "likes tea"})
    assert is_error is False, text
    is_error, text = await _call(tmp_path, section, "memory_search", {"query": "tea"})
    assert is_error is False, text
    assert "likes tea" in text


def _png() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), (0, 90, 200)).save(buffer, format="PNG")
    return buffer.getvalue()


async def test_image_understanding_from_the_config_asks_the_configured_vision_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VISION_KEY", "vision-secret")
    encoded = base64.b64encode(_png()).decode()
    async with ScriptedModel([reply("A blue square.")]) as model:
        section = {
            "enabled": ["execute_shell_command", "image_understanding"],
            "imageUnderstanding": {
                "model": "vision-1",
                "baseUrl": model.base_url,
                "apiKeyEnv": "VISION_KEY",
            },
        }
        config = write_config(tmp_path, builtinTools=section)
        settings = GatewaySettings(
            config=config, mode="auto", transport="http", port=0, workspace=tmp_path / "ws"
        )
        vision = image_model_from_config(load_config(config))
        assert vision is not None
        async with aclosing(vision), open_gateway(settings, image_model=vision) as gateway:
            with anyio.fail_after(60):
                async with Client(gateway.server, mode="legacy") as client:
                    made = await client.call_tool(
                        "execute_shell_command",
                        {"command": f"echo {encoded} | base64 -d > shot.png"},
                    )
                    result = await client.call_tool("image_understanding", {"path": "shot.png"})
        requests = list(model.requests)
    assert made.is_error is False, text_of(made)
    assert result.is_error is False, text_of(result)
    assert text_of(result) == "A blue square."
    assert requests[0]["model"] == "vision-1"
    part = requests[0]["messages"][-1]["content"][1]
    assert part["image_url"]["url"].startswith("data:image/png;base64,")


async def test_compress_history_cannot_be_enabled_in_the_gateway(tmp_path: Path) -> None:
    config = write_config(tmp_path, builtinTools={"enabled": ["compress_history"]})
    settings = GatewaySettings(config=config, transport="http", port=0, workspace=tmp_path / "w")
    with pytest.raises(ConfigError, match="MCP client keeps the conversation"):
        async with open_gateway(settings):
            pass


async def test_a_catastrophic_grep_in_one_session_does_not_stop_another_sessions_call(
    tmp_path: Path,
) -> None:
    """docs/security.md, "Patterns others wrote": RE2 in the gateway's process."""
    section = {"enabled": ["file_write", "file_read", "grep", "glob"]}
    config = write_config(tmp_path, builtinTools=section)
    settings = GatewaySettings(
        config=config, mode="auto", transport="http", port=0, workspace=tmp_path / "ws"
    )
    texts: dict[str, str] = {}
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(60):  # generous: both sessions' calls take milliseconds
            async with (
                Client(gateway.server, mode="legacy") as attacker,
                Client(gateway.server, mode="legacy") as bystander,
            ):
                await attacker.call_tool(
                    "file_write", {"path": "evil.txt", "content": "a" * 30 + "!\n"}
                )
                await attacker.call_tool("file_write", {"path": "a" * 60, "content": "x"})
                await bystander.call_tool("file_write", {"path": "mine.txt", "content": "hi"})

                async def evil() -> None:
                    grep = await attacker.call_tool("grep", {"pattern": "(a+)+$"})
                    glob = await attacker.call_tool("glob", {"pattern": "*a*a*a*a*a*a*a*a*b"})
                    texts["grep"], texts["glob"] = text_of(grep), text_of(glob)

                async def other() -> None:
                    read = await bystander.call_tool("file_read", {"path": "mine.txt"})
                    texts["other"] = text_of(read)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(evil)
                    tg.start_soon(other)
    assert texts["grep"].startswith("no match for '(a+)+$'")
    assert texts["glob"].startswith("no path matches")
    assert "hi" in texts["other"]


async def test_a_sessions_background_tasks_and_workspace_are_held_to_the_quotas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    config = write_config(
        tmp_path,
        builtinTools={"enabled": ["execute_shell_command", "kill_shell"]},
        quotas={"workspaceBytes": 20 * 1024**2, "backgroundTasksPerSession": 2},
    )
    settings = GatewaySettings(
        config=config, mode="auto", transport="http", port=0, workspace=tmp_path / "ws"
    )
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(120):
            async with Client(gateway.server, mode="legacy") as client:
                shell = "execute_shell_command"
                sleeping = {"command": "echo started; sleep 60", "wait_seconds": 0}
                first = await client.call_tool(shell, sleeping)
                assert first.is_error is False, text_of(first)
                log_path = str((first.structured_content or {})["log_path"])
                assert log_path.startswith(str(tmp_path / "data" / "task-logs"))
                assert (await client.call_tool(shell, sleeping)).is_error is False
                third = await client.call_tool(shell, sleeping)
                assert third.is_error is True
                assert "too_many_tasks" in text_of(third)
                assert "quotas.backgroundTasksPerSession" in text_of(third)
                task_id = (first.structured_content or {})["task_id"]
                await client.call_tool("kill_shell", {"task_id": task_id})
                writes = []
                for n in range(3):  # 12 MiB each: the third finds the 20 MiB quota used
                    command = {"command": f"head -c 12582912 /dev/zero > f{n}"}
                    writes.append(await client.call_tool(shell, command))
                assert [w.is_error for w in writes[:2]] == [False, False]
                assert writes[2].is_error is True
                assert "quota_exceeded" in text_of(writes[2])
                assert "quotas.workspaceBytes" in text_of(writes[2])


async def test_a_principals_sessions_are_held_to_the_principal_quota_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``quotas.principalBytes``: what every session of one principal (here the one client
    without a token) makes the host store counts together, also across the gateway's restart;
    each workspace alone stays under ``workspaceBytes``."""
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    config = write_config(
        tmp_path,
        builtinTools={"enabled": ["execute_shell_command"]},
        quotas={"workspaceBytes": 100 * 1024**2, "principalBytes": 20 * 1024**2},
    )
    settings = GatewaySettings(
        config=config, mode="auto", transport="http", port=0, workspace=tmp_path / "ws"
    )
    shell = "execute_shell_command"
    twelve = {"command": "head -c 12582912 /dev/zero > big"}
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(120):
            async with Client(gateway.server, mode="legacy") as first:
                assert (await first.call_tool(shell, twelve)).is_error is False
            async with Client(gateway.server, mode="legacy") as second:
                await second.call_tool(shell, twelve)  # ends or is ended past the quota
                refused = await second.call_tool(shell, {"command": "true"})
    assert refused.is_error is True
    assert "quota_exceeded" in text_of(refused)
    assert "quotas.principalBytes" in text_of(refused)
    async with open_gateway(settings) as gateway:  # the sessions on disk still count
        with anyio.fail_after(120):
            async with Client(gateway.server, mode="legacy") as third:
                again = await third.call_tool(shell, {"command": "true"})
    assert again.is_error is True
    assert "quotas.principalBytes" in text_of(again)


async def test_the_principal_quota_of_one_token_never_holds_another_tokens_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over HTTP with tokens the principal is the token: once one token's sessions hold
    ``quotas.principalBytes``, its next session is refused while another token's is not."""
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    config = write_config(
        tmp_path,
        builtinTools={"enabled": ["execute_shell_command"]},
        quotas={"principalBytes": 8 * 1024**2},
    )
    ops = Profile(name="ops")
    settings = GatewaySettings(
        config=config,
        mode="auto",
        transport="http",
        port=0,
        workspace=tmp_path / "ws",
        bearer_token="main-token",
        token_profiles={"ops-token": ops},
    )
    shell = "execute_shell_command"
    twelve = {"command": "head -c 12582912 /dev/zero > big"}
    with anyio.fail_after(120):
        async with http_serve(settings) as url:
            async with http_client(url, "main-token", mode="legacy") as first:
                await first.call_tool(shell, twelve)  # ends or is ended past the quota
            async with (
                http_client(url, "main-token", mode="legacy") as again,
                http_client(url, "ops-token", mode="legacy") as other,
            ):
                refused = await again.call_tool(shell, {"command": "true"})
                allowed = await other.call_tool(shell, {"command": "echo fine"})
    assert refused.is_error is True
    assert "quotas.principalBytes" in text_of(refused)
    assert allowed.is_error is False, text_of(allowed)
    assert "fine" in text_of(allowed)


@pytest.mark.parametrize(
    ("key", "store"),
    [("workspaceBytes", "embedded"), ("principalBytes", "embedded"), ("workspaceBytes", "pg")],
)
async def test_background_calls_stored_results_are_held_to_the_quotas(
    key: str,
    store: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """The results the task store (embedded or PostgreSQL) keeps for handed-off calls count
    against ``quotas.workspaceBytes`` (and the principal's ``quotas.principalBytes``)
    together: one that would pass it is stored as a ``quota_exceeded`` error naming the
    setting instead (the call still ends), and a result that still fits is kept."""
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    fault = {
        "command": sys.executable,
        "args": [str(FAULT_SERVER)],
        "env": {"PYTHONPATH": str(ROOT)},
        "toolPermissions": {"big": "read_only", "echo": "read_only"},
    }
    config = write_config(
        tmp_path,
        mcpServers={"fault": fault},
        backgroundCalls={"autoAfterSec": 1e-6},  # every upstream call is handed off
        quotas={key: 256 * 1024},
    )
    settings = GatewaySettings(
        config=config,
        mode="auto",
        transport="http",
        port=0,
        workspace=tmp_path / "ws",
        store=str(request.getfixturevalue("postgres_url")) if store == "pg" else None,
    )
    calls = [
        ("fault__big", {}),  # 5 MB: never fits
        ("fault__echo", {"text": "a" * 150_000}),  # fits
        ("fault__echo", {"text": "b" * 150_000}),  # fits alone, not beside the first
        ("fault__echo", {"text": "small"}),  # fits beside the first
    ]
    done = [anyio.Event() for _ in calls]

    async def on_message(message: object) -> None:
        if isinstance(message, mt.LoggingMessageNotification):
            data = message.params.data
            if isinstance(data, dict) and data.get("event") == "background.done":
                next(event for event in done if not event.is_set()).set()

    views = []
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="legacy", message_handler=on_message) as c:
                for (name, arguments), ended in zip(calls, done, strict=True):
                    handed = await c.call_tool(name, arguments)
                    task_id = (handed.structured_content or {})["task_id"]
                    await ended.wait()
                    status = await c.call_tool("script_status", {"id": task_id})
                    views.append(status.structured_content or {})
    assert [(v["status"], v["is_error"]) for v in views] == [
        ("error", True),
        ("ok", False),
        ("error", True),
        ("ok", False),
    ]
    for refused in (views[0], views[2]):
        assert "quota_exceeded" in refused["result"]
        assert f"quotas.{key}" in refused["result"]
        assert "xxxx" not in refused["result"]
        assert "bbbb" not in refused["result"]
    assert views[1]["result"].startswith("a" * 10_000)  # the view shows a part of it
    assert views[3]["result"] == "small"


@pytest.mark.parametrize("key", ["workspaceBytes", "principalBytes"])
async def test_stored_results_and_the_sessions_files_share_one_quota(
    key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox's own checks count the results the task store keeps for the session (its
    principal): once a kept result and a file hold the quota together, a script and
    ``file_write`` are refused by the sandbox (nothing written), not given a second quota.
    (Their refusals do not fit beside the full quota either: the store keeps a
    ``quota_exceeded`` naming the setting in their place.)"""
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    fault = {
        "command": sys.executable,
        "args": [str(FAULT_SERVER)],
        "env": {"PYTHONPATH": str(ROOT)},
        "toolPermissions": {"echo": "read_only"},
    }
    config = write_config(
        tmp_path,
        mcpServers={"fault": fault},
        builtinTools={"enabled": ["execute_shell_command", "file_write"]},
        backgroundCalls={"autoAfterSec": 1e-6},  # every call is handed off
        quotas={key: 256 * 1024},
    )
    settings = GatewaySettings(
        config=config, mode="auto", transport="http", port=0, workspace=tmp_path / "ws"
    )
    done = [anyio.Event()]

    async def on_message(message: object) -> None:
        if isinstance(message, mt.LoggingMessageNotification):
            data = message.params.data
            if isinstance(data, dict) and data.get("event") == "background.done":
                done[-1].set()

    async def call(client: Client, name: str, arguments: dict[str, object]) -> dict[str, Any]:
        done.append(anyio.Event())
        handed = await client.call_tool(name, arguments)
        await done[-1].wait()
        task_id = (handed.structured_content or {})["task_id"]
        status = await client.call_tool("script_status", {"id": task_id})
        return dict(status.structured_content or {})

    shell = "execute_shell_command"
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(90):
            async with Client(gateway.server, mode="legacy", message_handler=on_message) as c:
                kept = await call(c, "fault__echo", {"text": "a" * 150_000})
                # 150 kB of files fit beside the result, then nothing more does:
                await call(c, shell, {"command": "head -c 150000 /dev/zero > g"})
                refused = await call(c, shell, {"command": "echo x > h"})
                written = await call(c, "file_write", {"path": "f.txt", "content": "x"})
    assert kept["status"] == "ok"
    for view in (refused, written):
        assert view["is_error"] is True
        assert "quota_exceeded" in view["result"]
        assert f"quotas.{key}" in view["result"]
    # The sandbox refused both: neither wrote (the task store alone would only drop the
    # results, not keep the files from being written).
    for name in ("h", "f.txt"):
        assert [path async for path in anyio.Path(tmp_path).rglob(name)] == []
