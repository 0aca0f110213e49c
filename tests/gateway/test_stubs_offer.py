"""A session's typed stubs (docs/run_script.md, "Typed stubs") hold only the tools its offer
lets its scripts call: a profile's ``tools`` filter holds for ``agent_tools.stubs`` as it does
for ``call``."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from sagents.gateway._factory import open_gateway
from sagents.gateway._settings import GatewaySettings, load_profiles
from tests.gateway.test_configured import text_of
from tests.gateway.test_offer import _config

pytestmark = pytest.mark.anyio

LIST_STUBS = {
    "code": (  # a module the pre-flight cannot read: what the run serves is under test
        "import importlib\n"
        "fault = importlib.import_module('agent_tools.stubs.' + 'fault')\n"
        "print('stubs', sorted(fault.__all__), 'echo' if hasattr(fault, 'echo') else 'no echo')\n"
    ),
    "tools": [],
    "description": "list the stubs",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_sessions_stubs_are_those_of_its_profile(tmp_path: Path) -> None:
    config = _config(tmp_path)
    adder = load_profiles(config)["adder"]
    outputs = []
    for profile in (adder, None):
        settings = GatewaySettings(
            config=config, profile=profile, mode="auto", workspace=tmp_path / "ws"
        )
        async with open_gateway(settings) as gateway:
            with anyio.fail_after(90):
                async with Client(gateway.server, mode="legacy") as client:
                    outputs.append(text_of(await client.call_tool("run_script", LIST_STUBS)))
    limited, full = outputs
    assert "stubs ['add'] no echo" in limited
    assert "'echo'" in full
    assert "no echo" not in full
