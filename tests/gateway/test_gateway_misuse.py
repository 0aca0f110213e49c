"""A gateway used otherwise than ``async with open_gateway(settings) as gateway:`` once: each
misuse is an error that says what was wrong and what to do, and the open gateway still closes."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagents.errors import ConfigError
from sagents.gateway import Gateway, GatewaySettings, build_gateway, build_http_app, open_gateway
from sagents.tool import ToolManager

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GatewaySettings:
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    return GatewaySettings(config=None, workspace=tmp_path / "ws", transport="http", port=0)


async def test_entering_one_open_gateway_call_twice_says_to_call_it_again(
    settings: GatewaySettings,
) -> None:
    opener = open_gateway(settings)
    async with opener:
        with pytest.raises(RuntimeError, match=r"open_gateway\(\.\.\.\) was already entered"):
            async with opener:
                pass
    with pytest.raises(RuntimeError, match=r"call open_gateway\(\.\.\.\) again"):
        async with opener:
            pass


async def test_entering_one_build_gateway_result_twice_says_to_call_it_again(
    settings: GatewaySettings,
) -> None:
    opener = build_gateway(settings)
    async with opener:
        pass
    with pytest.raises(RuntimeError, match=r"build_gateway\(\.\.\.\) was already entered"):
        async with opener:
            pass


async def test_entering_an_open_gateway_again_is_refused_and_it_still_closes(
    settings: GatewaySettings,
) -> None:
    async with open_gateway(settings) as gateway:
        with pytest.raises(RuntimeError, match="already open: a gateway is entered once"):
            async with gateway:
                pass
    with pytest.raises(RuntimeError, match="closed: a gateway is entered once"):
        async with gateway:
            pass


async def test_a_closed_gateway_refuses_to_serve(settings: GatewaySettings) -> None:
    async with open_gateway(settings) as gateway:
        pass
    with pytest.raises(RuntimeError, match=r"run_stdio\(\) on a closed gateway"):
        await gateway.run_stdio()
    with pytest.raises(RuntimeError, match=r"build_http_app\(\) on a closed gateway"):
        build_http_app(gateway, settings)


async def test_a_plain_gateway_is_entered_once() -> None:
    gateway = Gateway(ToolManager())
    async with gateway:
        with pytest.raises(RuntimeError, match="already open"):
            async with gateway:
                pass


def test_build_gateway_with_a_missing_config_names_the_file(
    settings: GatewaySettings, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere.json"
    with pytest.raises(ConfigError, match="cannot read the configuration") as caught:
        build_gateway(GatewaySettings(config=missing, workspace=tmp_path))
    assert str(missing) in str(caught.value)


def test_build_gateway_with_a_snake_case_key_names_the_documented_one(tmp_path: Path) -> None:
    config = tmp_path / "servers.json"
    config.write_text('{"mcpServers": {"a": {"command": "x", "call_timeout": 5}}}')
    with pytest.raises(ConfigError, match="spells it 'callTimeout'") as caught:
        build_gateway(GatewaySettings(config=config, workspace=tmp_path))
    assert "mcpServers.a.call_timeout" in str(caught.value)
    assert "))" not in str(caught.value)  # one sentence, no parentheses inside parentheses
