"""Skills of upstream MCP servers in ``sagents serve`` under attack: a session must never see an
upstream's skills its profile leaves out, however late they are listed (the friendly cases
are in tests/gateway/test_upstream_skills.py, whose helpers these tests use)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from sagents.config import load_config
from sagents.gateway._upstream_skills import (
    UPSTREAM_SKILLS_DIR,
    SupervisorSkillRequests,
    upstream_skill_source,
)
from sagents.mcp._ext_types import GetSkillRequest, GetSkillRequestParams, GetSkillResult
from sagents.skill._mcp_source import MCPSkillSource
from tests.gateway.test_upstream_skills import (
    ROOT,
    _config,
    _gateway,
    _methods,
    _server,
    _skills_list,
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
                with pytest.raises(MCPError):
                    await client.read_resource("skill://up/pdf-tools/SKILL.md")
                with pytest.raises(MCPError):
                    await client.session.send_request(
                        GetSkillRequest(
                            params=GetSkillRequestParams(uri="skill://up/pdf-tools/SKILL.md")
                        ),
                        GetSkillResult,
                    )
                listing = await _skills_list(client)
                uris = [str(r.uri) for r in (await client.list_resources()).resources]
            methods = await _methods(gateway, "up")
    assert first.is_error is not True, _text(first)
    assert loaded.is_error is True, _text(loaded)
    assert read.is_error is True, _text(read)
    assert methods.get("resources/read", 0) == 0  # nothing fetched for a hidden skill
    assert not any(entry.uri.startswith("skill://up/") for entry in listing.skills)
    assert not any(uri.startswith("skill://up/") for uri in uris)


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


async def test_the_copies_of_a_killed_gateway_are_removed_by_the_next_one_and_no_live_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(data))
    parent = data / UPSTREAM_SKILLS_DIR
    killed = parent / "killed"
    code = (
        "import sys, anyio\n"
        "from pathlib import Path\n"
        "from sagents.skill._mcp_source import MCPSkillSource\n"
        "async def main():\n"
        "    async with MCPSkillSource([], None, Path(sys.argv[1])) as source:\n"
        "        (source.cache / 'docs').mkdir()\n"
        "        (source.cache / 'docs' / 'SKILL.md').write_text('x')\n"
        "        print('ready', flush=True)\n"
        "        await anyio.sleep_forever()\n"
        "anyio.run(main)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with anyio.fail_after(60):
        async with await anyio.open_process(
            [sys.executable, "-c", code, str(killed)], env=env
        ) as process:
            assert process.stdout is not None
            assert b"ready" in await process.stdout.receive()
            process.kill()  # SIGKILL: no cleanup runs
            await process.wait()
    assert (killed / "docs" / "SKILL.md").exists()
    config = load_config(_config(tmp_path, {"up": _server("ext_server.py", str(tmp_path))}))
    async with MCPSkillSource([], SupervisorSkillRequests(), parent / "live") as live:

        async def changed(server: str) -> None: ...

        source = upstream_skill_source(config, SupervisorSkillRequests(), on_changed=changed)
        assert source is not None
        assert not killed.exists()
        assert live.cache.exists()  # a running gateway's copies are left alone
