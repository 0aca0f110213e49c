"""The fleet example end to end: its server over the SDK's in-process client, its report script
through run_script (plain launcher)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from sagents.demo.fleet_server import fleet_status
from sagents.script import ScriptRequest, ScriptRunner
from sagents.script._runtime import ScriptRuntime

FLEET = Path(__file__).resolve().parents[2] / "examples" / "fleet"
sys.path.insert(0, str(FLEET))  # the examples import each other by plain module name
bridge = importlib.import_module("bridge")
fleet_server = importlib.import_module("fleet_server")
make_call_tool, spec_from_mcp = bridge.make_call_tool, bridge.spec_from_mcp
build_server = fleet_server.build_server

pytestmark = pytest.mark.anyio


def test_the_fleet_is_deterministic_with_some_devices_offline() -> None:
    first, second = fleet_status(), fleet_status()
    assert first == second
    assert len(first) == 500
    offline = sum(1 for status in first.values() if not status.online)
    assert 0 < offline < 100


async def test_the_fleet_report_runs_through_run_script(
    runtime: ScriptRuntime, workspace: Path
) -> None:
    async with Client(build_server()) as client:
        specs = [spec_from_mcp(tool, "fleet") for tool in (await client.list_tools()).tools]
        permissions = {spec.name: spec.permission for spec in specs}
        assert permissions == {
            "fleet__list_devices": "read_only",
            "fleet__get_device_status": "read_only",
            "fleet__set_device_config": "write",
            "fleet__reboot_device": "destructive",
        }
        runner = ScriptRunner(
            specs=specs,
            call_tool=make_call_tool(client, "fleet"),
            workspace=workspace,
            runtime=runtime,
            mode="auto",
        )
        with anyio.fail_after(120):
            result = await runner.run(
                ScriptRequest(code=(FLEET / "fleet_report.py").read_text(), description="fleet")
            )
    offline = sum(1 for status in fleet_status().values() if not status.online)
    assert result.status == "ok", result.output
    assert result.calls == 501
    assert f"500 devices: {500 - offline} online, {offline} offline" in result.output
    assert "critical" in result.output
    assert len(result.output) < 2000
