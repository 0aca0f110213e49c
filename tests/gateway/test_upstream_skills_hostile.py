"""Skills of upstream MCP servers in ``sagents serve`` under attack: a session must never see an
upstream's skills its profile leaves out, however late they are listed (the friendly cases
are in tests/gateway/test_upstream_skills.py, whose helpers these tests use)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.gateway.test_upstream_skills import (
    _config,
    _gateway,
    _methods,
    _server,
    _source,
    _text,
    _upstream_skills,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def test_a_skill_listed_after_a_sessions_first_skill_call_stays_hidden_by_its_profile(
    tmp_path: Path,
) -> None:
    root = tmp_path / "up"
    root.mkdir()
    up = _server("ext_server.py", str(root))
    config = _config(tmp_path, {"up": up})
    async with _gateway(config, profile="local") as gateway:  # "local": servers []
        source = _source(gateway)
        relisted = anyio.Event()
        announced = source.on_changed
        assert announced is not None

        async def spy(server: str) -> None:
            relisted.set()
            await announced(server)

        source.on_changed = spy
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="auto") as client:
                first = await client.call_tool("load_skill", {"name": "triage"})
                _upstream_skills(root)  # the upstream gains a skill, then announces it
                await gateway.manager.run_tool("up__announce", {})
                await relisted.wait()
                assert source.list_skill_names() == ["up__pdf-tools"]
                loaded = await client.call_tool("load_skill", {"name": "up__pdf-tools"})
                read = await client.call_tool(
                    "read_skill_file", {"name": "up__pdf-tools", "path": "scripts/fill.py"}
                )
            methods = await _methods(gateway, "up")
    assert first.is_error is not True, _text(first)
    assert loaded.is_error is True, _text(loaded)
    assert read.is_error is True, _text(read)
    assert methods.get("resources/read", 0) == 0  # nothing fetched for a hidden skill


async def test_a_profiles_allowed_server_shows_skills_listed_after_the_first_skill_call(
    tmp_path: Path,
) -> None:
    root = tmp_path / "up"
    root.mkdir()
    up = _server("ext_server.py", str(root))
    other = _server("ext_server.py", str(_upstream_skills(tmp_path / "other")))
    config = _config(tmp_path, {"up": up, "other": other}, profiles={"up": {"servers": ["up"]}})
    async with _gateway(config, profile="up") as gateway:
        source = _source(gateway)
        relisted = anyio.Event()
        announced = source.on_changed
        assert announced is not None

        async def spy(server: str) -> None:
            relisted.set()
            await announced(server)

        source.on_changed = spy
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="auto") as client:
                first = await client.call_tool("load_skill", {"name": "triage"})
                _upstream_skills(root)
                await gateway.manager.run_tool("up__announce", {})
                await relisted.wait()
                loaded = await client.call_tool("load_skill", {"name": "up__pdf-tools"})
    assert first.is_error is not True, _text(first)
    assert loaded.is_error is not True, _text(loaded)
    assert "Use scripts/fill.py" in _text(loaded)
