"""build_tool_manager: every enabled server of a config, started side by side."""

import sys
from pathlib import Path

import anyio
import pytest

from sagents.config import parse_config
from sagents.config.tools import build_tool_manager
from sagents.progress import ProgressHub
from tests.mcp.helpers import SERVERS

pytestmark = pytest.mark.anyio

FAULT = str(SERVERS / "fault_server.py")


@pytest.fixture(autouse=True)
def _logs_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


async def test_every_enabled_server_is_registered_and_a_failing_one_shows_its_error(
    tmp_path: Path,
) -> None:
    config = parse_config(
        {
            "mcpServers": {
                "fault": {"command": sys.executable, "args": [FAULT]},
                "broken": {"command": str(tmp_path / "no-such-server")},
                "off": {"command": sys.executable, "args": [FAULT], "disabled": True},
            }
        }
    )
    hub = ProgressHub()
    with anyio.fail_after(60):
        async with await build_tool_manager(config, progress_hub=hub) as manager:
            assert manager.progress_hub is hub
            names = manager.list_all_tools_name()
            assert "fault__add" in names
            assert not [n for n in names if n.startswith(("broken__", "off__"))]
            broken = manager.mcp_server_status("broken")
            assert broken.state == "failed"
            assert broken.last_error
            assert manager.mcp_server_status("fault").state == "ready"
            assert [s.name for s in manager.mcp_server_statuses()] == ["fault", "broken"]
            result = await manager.run_tool("fault__add", {"a": 2, "b": 3})
            assert result.structured == {"sum": 5}
        assert manager.closed


async def test_a_slow_server_delays_only_itself(tmp_path: Path) -> None:
    config = parse_config(
        {
            "mcpServers": {
                "slow": {
                    "command": sys.executable,
                    "args": [FAULT, "slow_start"],
                    "connectTimeout": 1,
                },
                "fast": {"command": sys.executable, "args": [FAULT]},
            }
        }
    )
    with anyio.fail_after(30):
        async with await build_tool_manager(config) as manager:
            slow = manager.mcp_server_status("slow")
            # Failed its first start; a background retry may already be under way.
            assert slow.state in ("failed", "restarting")
            assert slow.last_error is not None
            assert "handshake" in slow.last_error
            assert manager.mcp_server_status("fast").state == "ready"
            assert "fast__echo" in manager.list_all_tools_name()


async def test_an_empty_config_gives_an_empty_open_manager() -> None:
    async with await build_tool_manager(parse_config({"mcpServers": {}})) as manager:
        assert manager.list_all_tools_name() == []
        assert manager.mcp_server_statuses() == []
