"""Each client session of ``sagents serve`` has its own workspace and records
(sagents.gateway._workspaces); one shared folder only with ``shared_workspace``."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from sagents.errors import ConfigError
from sagents.gateway._factory import open_gateway
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._settings import GatewaySettings
from sagents.gateway._workspaces import Workspaces
from tests.gateway.test_configured import text_of, write_config

pytestmark = pytest.mark.anyio

PLANT = """
import os
open("statistics.py", "w").write("print('PLANTED')\\n")
open("secret.txt", "w").write("mine")
print("listing", sorted(os.listdir(".")))
"""
PROBE = """
import glob, os, statistics
print("mean", statistics.mean([1, 2, 3]))
print("secret", os.path.exists("secret.txt"))
print("records", sorted(glob.glob(".agent/scripts/*/output.txt")))
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _run(gateway: ConfiguredGateway, code: str) -> str:
    async with Client(gateway.server, mode="legacy") as client:
        result = await client.call_tool(
            "run_script", {"code": code, "tools": [], "description": "probe"}
        )
    text = text_of(result)
    assert result.is_error is False, text
    return text


async def test_a_session_sees_neither_the_files_nor_the_records_of_another(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    settings = GatewaySettings(config=write_config(tmp_path), mode="auto", workspace=root)
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(120):
            planted = await _run(gateway, PLANT)
            probed = await _run(gateway, PROBE)
    assert "statistics.py" in planted
    assert "PLANTED" not in probed  # the other session's module is not on this one's path
    assert "mean 2" in probed
    assert "secret False" in probed
    (records,) = [line for line in probed.splitlines() if line.startswith("records")]
    assert records.count("output.txt") == 1  # its own run's only
    sessions = sorted((root / "sessions").iterdir())
    assert len(sessions) == 2
    assert all((s / ".agent" / "scripts").is_dir() for s in sessions)
    assert not (root / ".agent").exists()


async def test_a_shared_workspace_is_one_folder_for_every_session(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    settings = GatewaySettings(
        config=write_config(tmp_path), mode="auto", workspace=root, shared_workspace=True
    )
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(120):
            await _run(gateway, PLANT.replace("statistics.py", "planted.py"))
            probed = await _run(gateway, PROBE.replace("statistics.mean([1, 2, 3])", "0"))
    assert "secret True" in probed
    assert (root / "secret.txt").is_file()
    assert not (root / "sessions").exists()


async def test_a_plain_upstream_call_creates_no_workspace_folder(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    settings = GatewaySettings(config=write_config(tmp_path), mode="auto", workspace=root)
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(120):
            async with Client(gateway.server, mode="legacy") as client:
                added = await client.call_tool("fault__add", {"a": 2, "b": 3})
    assert added.is_error is False, text_of(added)
    assert "5" in text_of(added)
    assert gateway.workspaces.existing() == []
    assert not (root / "sessions").exists()


def test_workspace_paths_come_only_from_gateway_session_ids(tmp_path: Path) -> None:
    workspaces = Workspaces(tmp_path)
    session = "0123456789abcdef0123456789abcdef"
    assert workspaces.for_session(session) == tmp_path / "sessions" / session
    assert (tmp_path / "sessions" / session).stat().st_mode & 0o777 == 0o700
    assert workspaces.existing() == [tmp_path / "sessions" / session]
    for bad in ("../x", "", "0123456789abcdef0123456789abcdeF", "a" * 31):
        with pytest.raises(ValueError, match="not a gateway session id"):
            workspaces.path_for(bad)
    assert Workspaces(tmp_path, shared=True).path_for("anything") == tmp_path


@pytest.mark.parametrize("shared", [True, False])
async def test_serve_refuses_a_workspace_whose_sandboxes_would_bind_the_gateways_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: bool
) -> None:
    # The data dir holds the audit store, the background-task store and the script runtime:
    # a script able to write them could forge the audit trail or another session's results.
    root = tmp_path / "home"
    bound = root if shared else root / "sessions" / ("a" * 32)
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(bound / ".local" / "share" / "sagents"))
    settings = GatewaySettings(
        config=write_config(tmp_path), mode="auto", workspace=root, shared_workspace=shared
    )
    with pytest.raises(ConfigError) as raised:
        async with open_gateway(settings):
            pass
    assert "data dir" in raised.value.message
    assert raised.value.details["key"] == "--workspace"


async def test_serve_refuses_a_shared_workspace_that_holds_its_config_file(tmp_path: Path) -> None:
    # A script could rewrite the config's mcpServers commands, which the next start runs on
    # the host, outside any sandbox.
    config = write_config(tmp_path)
    settings = GatewaySettings(
        config=config, mode="auto", workspace=config.parent, shared_workspace=True
    )
    with pytest.raises(ConfigError) as raised:
        async with open_gateway(settings):
            pass
    assert "config file" in raised.value.message
    assert raised.value.details["key"] == "--workspace"
