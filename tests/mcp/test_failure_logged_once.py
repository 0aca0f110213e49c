"""A server that keeps failing is logged once, not at every restart (its status keeps the
count); a different failure, or a failure after it was ready again, is logged anew."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters

from sagents.mcp import MCPSupervisor, ServerSettings

pytestmark = pytest.mark.anyio


async def test_a_server_failing_at_every_restart_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    params = StdioServerParameters(command=str(tmp_path / "no-such-server"))
    settings = ServerSettings(restart_backoff=0.01)
    with caplog.at_level("DEBUG", logger="sagents.mcp"):
        async with MCPSupervisor(log_dir=tmp_path) as sup:
            with anyio.fail_after(60):
                await sup.add_servers({"broken": (params, settings)})
                for _ in range(3):  # each call waits for a new start, which fails again
                    result = await sup.call_tool("broken", "anything", {})
                    assert result.error is not None
                    assert result.error.code == "upstream_unavailable"
            restarts = sup.status("broken").restarts
    failed = [
        r for r in caplog.records if r.levelname == "WARNING" and "'broken' failed" in r.message
    ]
    again = [r for r in caplog.records if r.levelname == "DEBUG" and "failed again" in r.message]
    assert restarts >= 3
    assert len(failed) == 1, [r.message for r in failed]
    assert "no-such-server" in failed[0].message
    assert len(again) >= 3
