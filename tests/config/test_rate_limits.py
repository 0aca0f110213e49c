"""``rateLimits``: at most N calls of a tool per window, per principal (docs/gateway.md,
"Rate limits"). The window is read from a clock the test moves: no sleeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sagents.config import load_config
from sagents.config._rate_limits import RateLimit, RateLimits
from sagents.config.tools import build_tool_manager
from sagents.errors import ConfigError
from sagents.tool import ToolManager, tool
from tests.config.middleware_helpers import Clock, as_principal

pytestmark = pytest.mark.anyio


@tool(name="fleet__reboot", permission="write")
async def reboot(sn: str) -> str:
    """Reboot a device."""
    return f"rebooted {sn}"


@tool(name="notes__read", permission="read_only")
async def read_notes() -> str:
    """Read the notes."""
    return "notes"


async def test_a_tool_is_limited_per_principal_in_a_sliding_window() -> None:
    clock = Clock()
    limits = RateLimits([RateLimit(match="fleet__*", calls=2, per_s=60)], clock=clock)
    manager = ToolManager(middleware=[limits])
    manager.register_tool(reboot)
    manager.register_tool(read_notes)
    assert not (
        await manager.run_tool("fleet__reboot", {"sn": "A1"}, as_principal("alice"))
    ).is_error
    clock.now += 10
    assert not (
        await manager.run_tool("fleet__reboot", {"sn": "A1"}, as_principal("alice"))
    ).is_error
    refused = await manager.run_tool("fleet__reboot", {"sn": "A1"}, as_principal("alice"))
    assert refused.error is not None
    assert refused.error.code == "not_allowed"
    assert refused.error.message == (
        "rate limit: at most 2 calls of 'fleet__reboot' per 60 s for alice; "
        "the next one may run in 50 s"
    )
    assert not (await manager.run_tool("fleet__reboot", {"sn": "B2"}, as_principal("bob"))).is_error
    for _ in range(5):  # a tool no limit names
        assert not (await manager.run_tool("notes__read", {}, as_principal("alice"))).is_error
    clock.now += 49.5
    assert (await manager.run_tool("fleet__reboot", {"sn": "A1"}, as_principal("alice"))).is_error
    clock.now += 0.5  # the first call leaves the window; the refused ones never counted
    assert not (
        await manager.run_tool("fleet__reboot", {"sn": "A1"}, as_principal("alice"))
    ).is_error
    assert (await manager.run_tool("fleet__reboot", {"sn": "A1"}, as_principal("alice"))).is_error


async def test_rate_limits_from_the_config_apply_to_the_registry(tmp_path: Path) -> None:
    path = tmp_path / "sagents.json"
    limits = [{"match": "fleet__*", "calls": 1, "perSec": 3600}]
    path.write_text(json.dumps({"mcpServers": {}, "rateLimits": limits}))
    async with await build_tool_manager(load_config(path)) as manager:
        manager.register_tool(reboot)
        assert not (
            await manager.run_tool("fleet__reboot", {"sn": "A1"}, as_principal("alice"))
        ).is_error
        refused = await manager.run_tool("fleet__reboot", {"sn": "A1"}, as_principal("alice"))
    assert refused.error is not None
    assert "rate limit: at most 1 calls of 'fleet__reboot' per 3600 s" in refused.error.message


@pytest.mark.parametrize(
    "limits",
    [
        [{"match": "*", "perSec": 1}],
        [{"calls": 0, "perSec": 1}],
        [{"calls": 1, "perSec": 0}],
        [{"calls": "1", "perSec": 1}],
        [{"calls": 1, "per": 1}],
    ],
)
def test_a_bad_rate_limit_is_a_clear_config_error(tmp_path: Path, limits: Any) -> None:
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps({"mcpServers": {}, "rateLimits": limits}))
    with pytest.raises(ConfigError, match="rateLimits"):
        load_config(path)
