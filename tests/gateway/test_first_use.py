"""What a new user meets first with ``sagents serve``: run_script without ``tools``, a relative
data directory, and a refusal that names every way to allow a call."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from mcp import Client
from typer.testing import CliRunner

from sagents.audit._store import resolve_data_dir
from sagents.cli.main import app
from sagents.gateway import GatewayCallApprover
from sagents.gateway._factory import open_gateway
from sagents.gateway._settings import GatewaySettings
from sagents.tool import SessionContext, ToolManager, ToolProxy
from tests.gateway.test_configured import text_of, write_config
from tests.gateway.test_one_approval import save, wipe

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", ["save", "wipe"])
async def test_a_refusal_for_a_client_that_cannot_be_asked_names_the_console_and_auto(
    name: str,
) -> None:
    async with ToolManager() as manager:
        manager.register_tool(save)
        manager.register_tool(wipe)
        proxy = ToolProxy(manager, approver=GatewayCallApprover())
        context = SessionContext(session_id="s", permission_mode="ask")
        arguments = {"note": "a"} if name == "save" else {}
        result = await proxy.run_tool(name, arguments, context)
    assert result.error is not None
    assert result.error.code == "not_allowed"
    message = result.error.message
    assert "--approvals console" in message
    assert "--approvals both" in message
    assert "--transport http" in message
    assert "--mode auto" in message


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_run_script_without_tools_runs_a_read_only_script(tmp_path: Path) -> None:
    settings = GatewaySettings(config=write_config(tmp_path), mode="auto", workspace=tmp_path)
    async with open_gateway(settings) as gateway, Client(gateway.server, mode="legacy") as client:
        with anyio.fail_after(120):
            result = await client.call_tool(
                "run_script", {"code": "print('read only')", "description": "no tools"}
            )
    assert result.is_error is False, text_of(result)
    assert "read only" in text_of(result)


async def test_a_relative_data_dir_is_resolved_once_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SAGENTS_DATA_DIR=data`` means ``data`` in the directory the gateway started in, for
    every run, whatever directory a later step works in."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SAGENTS_DATA_DIR", "data")
    resolve_data_dir()
    assert os.environ["SAGENTS_DATA_DIR"] == str(tmp_path / "data")
    settings = GatewaySettings(config=write_config(tmp_path), mode="auto")
    async with open_gateway(settings) as gateway, Client(gateway.server, mode="legacy") as client:
        with anyio.fail_after(120):
            result = await client.call_tool(
                "run_script", {"code": "print('ran')", "tools": [], "description": "probe"}
            )
    assert result.is_error is False, text_of(result)
    assert "ran" in text_of(result)
    assert (tmp_path / "data" / "audit.sqlite3").is_file()


def test_the_command_line_resolves_a_relative_data_dir_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SAGENTS_DATA_DIR", "data")
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0, result.output
    assert os.environ["SAGENTS_DATA_DIR"] == str(tmp_path / "data")


async def test_a_run_that_fails_before_its_script_starts_is_a_clear_error_not_an_assertion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox refuses a relative bind (a data directory set after start, unresolved):
    the client learns what went wrong, never from an ``AssertionError``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sagents.gateway._scripts.default_data_dir", lambda: Path("rel"))
    settings = GatewaySettings(config=write_config(tmp_path), mode="auto", workspace=tmp_path)
    async with open_gateway(settings) as gateway, Client(gateway.server, mode="legacy") as client:
        with anyio.fail_after(120):
            result = await client.call_tool("run_script", {"code": "print(1)", "description": "x"})
    text = text_of(result)
    assert result.is_error is True
    assert "AssertionError" not in text
    assert "must be absolute" in text
