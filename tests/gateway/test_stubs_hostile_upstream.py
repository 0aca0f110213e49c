"""A real stdio MCP upstream with hostile tool definitions (tests/script/fixtures/
hostile_server.py) behind the gateway: listing goes on, the examples it cannot vouch for are left
out, and a script's typed stubs of it run only the script's own code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from sagents.gateway._factory import open_gateway
from sagents.gateway._settings import GatewaySettings
from tests.gateway.test_configured import ROOT, text_of

pytestmark = pytest.mark.anyio

SERVER = ROOT / "tests" / "script" / "fixtures" / "hostile_server.py"

SCRIPT = """
import importlib
evil = importlib.import_module("agent_tools.stubs." + "evil")
print("pwned" if "PWNED" in vars(evil) else "clean", sorted(evil.__all__))
print(evil.get_status(a_b=1))
print(evil.get_status_2(a_b_2="x"))
print(evil.nul.__doc__.splitlines()[0] == "null \\x00 byte")
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_hostile_upstreams_tools_list_and_stub_as_data(tmp_path: Path) -> None:
    config = tmp_path / "sagents.json"
    upstream = {"command": sys.executable, "args": [str(SERVER)], "env": {"PYTHONPATH": str(ROOT)}}
    config.write_text(json.dumps({"mcpServers": {"evil": upstream}}), encoding="utf-8")
    settings = GatewaySettings(config=config, mode="auto", workspace=tmp_path / "ws")
    async with open_gateway(settings) as gateway:
        with anyio.fail_after(120):
            async with Client(gateway.server, mode="legacy") as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                result = await client.call_tool(
                    "run_script", {"code": SCRIPT, "tools": [], "description": "hostile stubs"}
                )
    assert {"evil__fanout", "evil__quote", "evil__nul", "evil__get_status"} <= set(tools)
    assert len(tools["run_script"].description or "") < 20_000
    output = text_of(result)
    assert result.is_error is False, output
    assert output.splitlines()[1:] == [
        "clean ['fanout', 'get_status', 'get_status_2', 'nul', 'quote']",  # 'broken': refused
        "['get_status', {'a_b': 1}]",  # the upstream's names and properties, as it defined them
        "['get-status', {'a-b': 'x'}]",
        "True",
    ]
