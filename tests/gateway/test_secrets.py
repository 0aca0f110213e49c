"""Secrets never leak (docs/gateway.md, "Secrets"): a server that echoes its environment and
its HTTP request headers, behind the gateway: nothing of a secret reaches the client (the
model), run_script's output, the records, the audit, the console's data or the logs; the
arguments a client sends are never redacted."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
import subprocess
import sys
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from anyio.streams.text import TextReceiveStream
from mcp import Client
from mcp.client.session import ClientRequestContext
from typer.testing import CliRunner

from sagents.audit._store import default_data_dir
from sagents.cli.main import app
from sagents.config import load_config
from sagents.config.tools import build_tool_manager
from sagents.core._secrets import Redactor
from sagents.gateway._factory import open_gateway
from sagents.gateway._server import Gateway
from sagents.gateway._settings import GatewaySettings
from tests.gateway.fakes import FakeProvider
from tests.mcp.helpers import free_port

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).parent / "fixtures" / "mutable_server.py"
NAMES = ("TEST_ECHO_SECRET", "TEST_HEADER_SECRET", "TEST_API_KEY", "TEST_LISTED", "EXTRA")
SCRIPT = """
from agent_tools import call
env = call("mut__environment", {})
print(env["environment"])
print(call("web__headers", {}))
"""


def leaks(value: str) -> list[str]:
    """The forms of ``value`` a leak takes (as it is, base64, URL-encoded)."""
    return [
        value,
        base64.b64encode(value.encode()).decode().rstrip("="),
        urllib.parse.quote(value, safe=""),
    ]


@pytest.fixture
def values(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    chosen = {name: f"{name.lower()}-{secrets.token_urlsafe(12)}+/=" for name in NAMES}
    for name in NAMES[:4]:
        monkeypatch.setenv(name, chosen[name])
    return chosen


@asynccontextmanager
async def header_server() -> AsyncIterator[int]:
    """The fixture server over streamable HTTP; yields its port once it listens."""
    port = free_port()
    async with await anyio.open_process(
        [sys.executable, str(SERVER), "http", str(port)], stderr=subprocess.PIPE
    ) as process:
        assert process.stderr is not None
        with anyio.fail_after(60):
            async for text in TextReceiveStream(process.stderr):
                if "ready" in text:
                    break
        try:
            yield port
        finally:
            process.terminate()


def write_config(path: Path, port: int, extra: str) -> Path:
    document: dict[str, Any] = {
        "mcpServers": {
            "mut": {
                "command": sys.executable,
                "args": [str(SERVER)],
                "env": {"ECHO_SECRET": "${TEST_ECHO_SECRET}", "PLAIN": "not-a-secret-value"},
            },
            "web": {
                "url": f"http://127.0.0.1:{port}/mcp",
                "headers": {"X-Upstream-Key": "${TEST_HEADER_SECRET}"},
                "apiKey": "${env:TEST_API_KEY}",
            },
        },
        "secrets": {"values": {"EXTRA": extra}, "env": ["TEST_LISTED"]},
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


async def allow_once(context: ClientRequestContext, params: mt.ElicitRequestParams) -> Any:
    return mt.ElicitResult(action="accept", content={"decision": "allow_once"})


def text_of(result: mt.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, mt.TextContent))


async def test_secrets_a_server_echoes_reach_neither_client_records_audit_nor_logs(
    values: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    workspace = tmp_path / "ws"
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    with anyio.fail_after(120):
        async with header_server() as port:
            config = write_config(tmp_path / "sagents.json", port, values["EXTRA"])
            settings = GatewaySettings(config=config, mode="auto", workspace=workspace)
            async with (
                open_gateway(settings) as gateway,
                Client(gateway.server, mode="legacy", elicitation_callback=allow_once) as client,
            ):
                logger = logging.getLogger("tests.secrets")
                logger.warning("extra %s, listed %s", values["EXTRA"], values["TEST_LISTED"])
                environment = await client.call_tool("mut__environment", {})
                headers = await client.call_tool("web__headers", {})
                reported = await client.call_tool(
                    "mut__progress_env", {}, progress_callback=on_progress
                )
                typed = await client.call_tool("mut__lookup", {"q": values["TEST_ECHO_SECRET"]})
                script = await client.call_tool(
                    "run_script", {"code": SCRIPT, "tools": [], "description": "env"}
                )
    shown = json.dumps(
        [r.model_dump(mode="json") for r in (environment, headers, reported, typed, script)]
    )
    shown += json.dumps(messages)
    files = "".join(
        path.read_bytes().decode("utf-8", "replace")
        for root in (default_data_dir(), workspace)
        for path in root.rglob("*")
        if path.is_file()
    )
    for name, value in values.items():
        for form in leaks(value):
            assert form not in shown, (name, form)
            assert form not in files, (name, form)
            assert form not in caplog.text, (name, form)
    assert "[redacted:TEST_ECHO_SECRET]" in text_of(environment)
    assert environment.structured_content is not None
    assert environment.structured_content["environment"]["ECHO_SECRET"] == (
        "[redacted:TEST_ECHO_SECRET]"
    )
    assert "PLAIN=not-a-secret-value" in text_of(environment)
    header_text = text_of(headers)
    assert "[redacted:TEST_HEADER_SECRET]" in header_text
    assert "[redacted:TEST_API_KEY]" in header_text
    assert any("[redacted:TEST_ECHO_SECRET]" in message for message in messages)
    # what the client typed reached the server unredacted (its digest came back)
    digest = hashlib.sha256(values["TEST_ECHO_SECRET"].encode()).hexdigest()
    assert text_of(typed) == f"found {digest}"
    script_text = text_of(script)
    assert script.is_error is False, script_text
    assert "[redacted:TEST_ECHO_SECRET]" in script_text
    assert "[redacted:TEST_HEADER_SECRET]" in script_text
    assert "extra [redacted:EXTRA], listed [redacted:TEST_LISTED]" in caplog.text
    assert "starting with ECHO_SECRET=[redacted:TEST_ECHO_SECRET]" in files


def test_sagents_call_redacts_the_secrets_of_its_configuration(
    values: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "servers.json"
    entry = {
        "command": sys.executable,
        "args": [str(SERVER)],
        "env": {"ECHO_SECRET": "${TEST_ECHO_SECRET}"},
    }
    config.write_text(json.dumps({"mcpServers": {"mut": entry}}), encoding="utf-8")
    result = CliRunner().invoke(
        app, ["call", "mut__environment", "--config", str(config), "--json"]
    )
    assert result.exit_code == 0, result.output
    for form in leaks(values["TEST_ECHO_SECRET"]):
        assert form not in result.output
    assert "ECHO_SECRET=[redacted:TEST_ECHO_SECRET]" in result.output


async def test_a_json_rpc_error_echoing_a_secret_is_redacted_in_the_library_too(
    values: dict[str, str], tmp_path: Path
) -> None:
    entry = {
        "command": sys.executable,
        "args": [str(SERVER)],
        "env": {"ECHO_SECRET": "${TEST_ECHO_SECRET}"},
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"mut": entry}}), encoding="utf-8")
    with anyio.fail_after(60):
        async with await build_tool_manager(load_config(path)) as manager:
            result = await manager.run_tool("mut__error_env", {})
    assert result.is_error
    assert result.error is not None
    shown = json.dumps([result.error.message, dict(result.error.details)])
    for form in leaks(values["TEST_ECHO_SECRET"]):
        assert form not in shown
    assert "failed with [redacted:TEST_ECHO_SECRET]" in result.error.message


LOCAL_TOOLS = '''
import os

from sagents.tool.tool_base import tool


@tool(permission="read_only")
def reveal() -> str:
    """Return the listed secret (a local tool that reads the gateway's environment)."""
    return "value: " + os.environ["TEST_LISTED"]


TOOLS = [reveal]
'''


async def test_a_local_tools_secret_reaches_neither_the_script_nor_its_records(
    values: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "secret_local_tools.py").write_text(LOCAL_TOOLS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(modules))
    document = {
        "mcpServers": {"mut": {"command": sys.executable, "args": [str(SERVER)]}},
        "localTools": {"modules": ["secret_local_tools"]},
        "secrets": {"env": ["TEST_LISTED"]},
    }
    config = tmp_path / "sagents.json"
    config.write_text(json.dumps(document), encoding="utf-8")
    workspace = tmp_path / "ws"
    code = 'from agent_tools import call\nprint("got", call("reveal", {}))\n'
    with anyio.fail_after(120):
        settings = GatewaySettings(config=config, mode="auto", workspace=workspace)
        async with (
            open_gateway(settings) as gateway,
            Client(gateway.server, mode="legacy") as client,
        ):
            direct = await client.call_tool("reveal", {})
            script = await client.call_tool(
                "run_script", {"code": code, "tools": [], "description": "reveal"}
            )
    records = "".join(
        path.read_text(encoding="utf-8", errors="replace")
        for path in workspace.rglob("*")
        if path.is_file()
    )
    assert text_of(direct) == "value: [redacted:TEST_LISTED]"
    assert "got value: [redacted:TEST_LISTED]" in text_of(script), text_of(script)
    assert "[redacted:TEST_LISTED]" in records  # calls.jsonl and output.txt
    for form in leaks(values["TEST_LISTED"]):
        assert form not in text_of(script)
        assert form not in records


async def test_a_background_calls_result_is_kept_and_shown_redacted() -> None:
    provider = FakeProvider()  # fleet__slow answers "slow done" once released
    noticed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.LoggingMessageNotification):
            noticed.set()

    redactor = Redactor({"SLOW": "slow done"})
    async with (
        Gateway(provider, background_after_s=0.05, redactor=redactor) as gateway,
        Client(gateway.server, mode="legacy", message_handler=on_message) as client,
    ):
        with anyio.fail_after(30):
            handed = await client.call_tool("fleet__slow", {})
            assert handed.structured_content is not None
            task_id = handed.structured_content["task_id"]
            provider.release.set()
            await noticed.wait()
            status = await client.call_tool("script_status", {"id": task_id})
            shown = [info.result for info in gateway.tasks.operator_view()]  # the console's
    assert [result.text if result else None for result in shown] == ["[redacted:SLOW]"]
    assert "slow done" not in json.dumps(status.model_dump(mode="json"))


async def test_secrets_an_upstream_returns_from_prompts_and_resource_reads_are_redacted(
    tmp_path: Path,
) -> None:
    # What an upstream answers to prompts/get and resources/read (a skill file it offers is
    # read the same way) reaches the model as a tool result does.
    label = f"catalog-{secrets.token_hex(8)}"
    catalog = Path(__file__).parents[1] / "mcp" / "servers" / "catalog_server.py"
    config = tmp_path / "sagents.json"
    document = {
        "mcpServers": {
            "notes": {
                "command": sys.executable,
                "args": [str(catalog), label],
                "env": {"PYTHONPATH": str(Path(__file__).parents[2])},
            }
        },
        "secrets": {"values": {"LABEL": label}},
    }
    config.write_text(json.dumps(document), encoding="utf-8")
    settings = GatewaySettings(config=config, mode="auto")
    with anyio.fail_after(60):
        async with open_gateway(settings) as gateway, Client(gateway.server) as client:
            prompt = await client.get_prompt("notes__greet", {"name": "ada"})
            read = await client.read_resource("sagents://upstream/notes/note://hello")
    shown = json.dumps([prompt.model_dump(mode="json"), read.model_dump(mode="json")])
    assert label not in shown
    assert "[redacted:LABEL]: hello ada" in shown
    assert "[redacted:LABEL]: note://hello" in shown
