"""Skills of upstream MCP servers in ``sagents serve`` (``"skills": true`` on a server): listed
from ``skills/list`` without fetching, fetched once on first use, namespaced, filtered by the
profile, refetched after an announcement; hostile and silent upstreams hide only their own.

Upstreams: ``tests/mcp/servers/ext_server.py`` (skills served by the gateway's own Skills
extension) and ``tests/mcp/servers/hostile_skills_server.py``; the gateway runs in-process
and is reached with the SDK's client, as in test_configured.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from sagents.audit._store import default_data_dir
from sagents.errors import ConfigError
from sagents.gateway._factory import build_gateway, open_gateway
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._settings import GatewaySettings, load_profiles
from sagents.mcp._ext_types import (
    GetSkillRequest,
    GetSkillRequestParams,
    GetSkillResult,
    ListSkillsRequest,
    ListSkillsResult,
)
from sagents.skill import SkillManager
from sagents.skill._mcp_source import MCPSkillSource
from sagents.skill.mcp_skills import fetch_mcp_skills

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ROOT / "tests" / "mcp" / "servers"
LOCAL_SKILLS = Path(__file__).parent / "fixtures" / "skills"
PDF_MD = (
    "---\nname: pdf-tools\ndescription: Fill PDF forms\nlicense: MIT\n---\nUse scripts/fill.py\n"
)
FILL = b"print('fill')\n"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def _upstream_skills(root: Path) -> Path:
    skill = root / "pdf-tools"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(PDF_MD, encoding="utf-8")
    (skill / "scripts" / "fill.py").write_bytes(FILL)
    return root


def _server(script: str, *args: str, **extra: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(SERVERS / script), *args],
        "env": {"PYTHONPATH": str(ROOT)},
        "cwd": str(ROOT),
        "skills": True,
        **extra,
    }


def _config(tmp_path: Path, servers: dict[str, Any], **extra: Any) -> Path:
    document = {
        "mcpServers": servers,
        "skills": {"directories": [str(LOCAL_SKILLS)]},
        "profiles": {
            "ops": {"skills": ["triage"]},
            "pdf": {"skills": ["up__pdf-tools"]},
            "local": {"servers": []},
        },
        **extra,
    }
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@asynccontextmanager
async def _gateway(config: Path, profile: str | None = None) -> AsyncIterator[ConfiguredGateway]:
    chosen = load_profiles(config)[profile] if profile else None
    settings = GatewaySettings(config=config, mode="auto", profile=chosen)
    async with open_gateway(settings) as gateway:
        assert gateway.upstream_skills is not None
        with anyio.fail_after(60):
            await gateway.upstream_skills.settled()
        yield gateway


def _source(gateway: ConfiguredGateway) -> MCPSkillSource:
    assert gateway.upstream_skills is not None
    return gateway.upstream_skills


def _text(result: mt.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, mt.TextContent))


def _read_text(result: mt.ReadResourceResult) -> str:
    [content] = result.contents
    assert isinstance(content, mt.TextResourceContents)
    return content.text


async def _methods(gateway: ConfiguredGateway, server: str) -> dict[str, int]:
    """How many requests of each method the upstream served (its ``seen`` tool)."""
    result = await gateway.manager.run_tool(f"{server}__seen", {})
    assert result.structured is not None, result
    return dict(result.structured["methods"])


async def _skills_list(client: Client) -> ListSkillsResult:
    return await client.session.send_request(ListSkillsRequest(), ListSkillsResult)


async def test_an_upstreams_skill_is_namespaced_and_served_through_every_face(
    tmp_path: Path,
) -> None:
    up = _server("ext_server.py", str(_upstream_skills(tmp_path / "up")))
    async with _gateway(_config(tmp_path, {"up": up})) as gateway:
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="auto") as client:
                uris = [str(r.uri) for r in (await client.list_resources()).resources]
                listing = await _skills_list(client)
                loaded = await client.call_tool("load_skill", {"name": "up__pdf-tools"})
                script = await client.call_tool(
                    "read_skill_file", {"name": "up__pdf-tools", "path": "scripts/fill.py"}
                )
                read = await client.read_resource("skill://up/pdf-tools/scripts/fill.py")
                got = await client.session.send_request(
                    GetSkillRequest(
                        params=GetSkillRequestParams(uri="skill://up/pdf-tools/SKILL.md")
                    ),
                    GetSkillResult,
                )
                # a client of the extension (here: sagents itself) takes it as verified
                chained = await fetch_mcp_skills(client.session, "gw", tmp_path / "chained")
    assert "skill://up/pdf-tools/SKILL.md" in uris
    assert "skill://up/pdf-tools/scripts/fill.py" in uris
    assert "skill://triage/SKILL.md" in uris  # the local root is still there
    assert loaded.is_error is False, _text(loaded)
    assert "Use scripts/fill.py" in _text(loaded)
    assert _text(script) == FILL.decode()
    assert _read_text(read) == FILL.decode()
    entry = {e.uri: e for e in listing.skills}["skill://up/pdf-tools/SKILL.md"]
    # the skill's own name stays in its front matter: the last URI segment before SKILL.md
    assert entry.frontmatter["name"] == "pdf-tools"
    assert not isinstance(entry.resources, str)
    files = {f.uri: f for f in entry.resources}
    assert files["skill://up/pdf-tools/scripts/fill.py"].digest == (
        "sha256:" + hashlib.sha256(FILL).hexdigest()
    )
    assert got.skill == entry
    manager = SkillManager()
    manager.add_skill_dir(chained)
    skill = manager.get_skill("pdf-tools")
    assert skill is not None
    assert (skill.path / "scripts" / "fill.py").read_bytes() == FILL


async def test_listing_fetches_no_file_and_the_first_use_fetches_once(tmp_path: Path) -> None:
    up = _server("ext_server.py", str(_upstream_skills(tmp_path / "up")))
    async with _gateway(_config(tmp_path, {"up": up})) as gateway:
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="auto") as client:
                await client.list_resources()
                await _skills_list(client)
                await client.call_tool("load_skill", {"name": "up__missing"})
                for outside in ("..%2F..%2Fsecret", "../../secret", ".hidden"):
                    with pytest.raises(MCPError):
                        await client.read_resource(f"skill://up/pdf-tools/{outside}")
                listed = await _methods(gateway, "up")
                await client.call_tool("load_skill", {"name": "up__pdf-tools"})
                first = await _methods(gateway, "up")
                await client.call_tool("load_skill", {"name": "up__pdf-tools"})
                await client.read_resource("skill://up/pdf-tools/SKILL.md")
                await client.read_resource("skill://up/pdf-tools/scripts/fill.py")
                again = await _methods(gateway, "up")
    assert listed.get("resources/read", 0) == 0
    assert first["resources/read"] == 2  # SKILL.md and scripts/fill.py, once each
    assert again["resources/read"] == 2  # served from the verified copy
    assert again["skills/list"] == listed["skills/list"]


async def test_a_profile_hides_an_upstream_skill_from_every_face(tmp_path: Path) -> None:
    up = _server("ext_server.py", str(_upstream_skills(tmp_path / "up")))
    config = _config(tmp_path, {"up": up})
    async with _gateway(config, profile="ops") as gateway:
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="auto") as client:
                uris = [str(r.uri) for r in (await client.list_resources()).resources]
                listing = await _skills_list(client)
                refused = await client.call_tool("load_skill", {"name": "up__pdf-tools"})
                with pytest.raises(MCPError, match="no skill"):
                    await client.read_resource("skill://up/pdf-tools/SKILL.md")
            methods = await _methods(gateway, "up")
    assert not any(uri.startswith("skill://up/") for uri in uris)
    assert "skill://triage/SKILL.md" in uris
    assert [e.uri for e in listing.skills] == ["skill://triage/SKILL.md"]
    assert refused.is_error is True
    assert methods.get("resources/read", 0) == 0  # nothing was fetched for a hidden skill
    async with _gateway(config, profile="pdf") as gateway:
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="auto") as client:
                uris = [str(r.uri) for r in (await client.list_resources()).resources]
    assert "skill://up/pdf-tools/SKILL.md" in uris
    assert not any(uri.startswith("skill://triage/") for uri in uris)
    async with _gateway(config, profile="local") as gateway:  # servers filter skills too
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="auto") as client:
                uris = [str(r.uri) for r in (await client.list_resources()).resources]
                listing = await _skills_list(client)
                refused = await client.call_tool("load_skill", {"name": "up__pdf-tools"})
    assert not any(uri.startswith("skill://up/") for uri in uris)
    assert {"skill://triage/SKILL.md", "skill://other/SKILL.md"} <= set(uris)
    assert "skill://up/pdf-tools/SKILL.md" not in [e.uri for e in listing.skills]
    assert refused.is_error is True


async def test_a_changed_file_is_fetched_anew_after_the_upstream_announces_it(
    tmp_path: Path,
) -> None:
    skills = _upstream_skills(tmp_path / "up")
    up = _server("ext_server.py", str(skills))
    async with _gateway(_config(tmp_path, {"up": up})) as gateway:
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
                before = await client.call_tool("load_skill", {"name": "up__pdf-tools"})
                (skills / "pdf-tools" / "SKILL.md").write_text(
                    PDF_MD.replace("Use scripts/fill.py", "Now use scripts/fill.py twice"),
                    encoding="utf-8",
                )
                await gateway.manager.run_tool("up__announce", {})
                await relisted.wait()
                after = await client.call_tool("load_skill", {"name": "up__pdf-tools"})
                read = await client.read_resource("skill://up/pdf-tools/SKILL.md")
            methods = await _methods(gateway, "up")
    assert "twice" not in _text(before)
    assert "Now use scripts/fill.py twice" in _text(after)
    assert "twice" in _read_text(read)
    assert methods["resources/read"] == 4  # both files, once per version


async def test_a_hostile_upstream_costs_only_its_bad_skills_and_writes_nothing_outside(
    tmp_path: Path,
) -> None:
    servers = {
        "up": _server("ext_server.py", str(_upstream_skills(tmp_path / "up"))),
        "bad": _server("hostile_skills_server.py", "catalog", callTimeout=3),
    }
    async with _gateway(_config(tmp_path, servers)) as gateway:
        source = _source(gateway)
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="auto") as client:
                uris = [str(r.uri) for r in (await client.list_resources()).resources]
                good = await client.call_tool("load_skill", {"name": "bad__good"})
                notes = await client.read_resource("skill://bad/good/notes.txt")
                mismatch = await client.call_tool("load_skill", {"name": "bad__bad-digest"})
                with pytest.raises(MCPError, match="digest"):
                    await client.read_resource("skill://bad/bad-digest/SKILL.md")
                slow = await client.call_tool("load_skill", {"name": "bad__slow"})
                pdf = await client.call_tool("load_skill", {"name": "up__pdf-tools"})
            methods = await _methods(gateway, "bad")
        problems = " ".join(p.reason for p in source.problems())
        cached = sorted(
            p.relative_to(source.cache).as_posix() for p in source.cache.rglob("*") if p.is_dir()
        )
    names = {uri.split("/")[3] for uri in uris if uri.startswith("skill://bad/")}
    assert names == {"good", "bad-digest", "slow"}
    assert "Good instructions" in _text(good)
    assert _read_text(notes) == "good notes\n"
    assert mismatch.is_error is True
    assert "does not match its digest" in _text(mismatch)
    assert methods["skills/list"] >= 2  # a mismatch relists once before giving up
    assert slow.is_error is True
    assert "within 3" in _text(slow)
    assert pdf.is_error is False  # the other upstream's skills are unaffected
    for left_out in ("oversized", "../evil", "escape", "hidden"):
        assert left_out in problems
    assert "larger than 1048576 bytes" in problems
    assert "hidden file" in problems
    assert "not a plain path" in problems
    assert cached == ["bad", "bad/good", "up", "up/pdf-tools", "up/pdf-tools/scripts"]
    planted = [found for base in (tmp_path, default_data_dir()) for found in base.rglob("evil*")]
    assert planted == []


async def test_an_upstream_that_never_lists_hides_only_its_skills_with_the_reason(
    tmp_path: Path,
) -> None:
    servers = {
        "up": _server("ext_server.py", str(_upstream_skills(tmp_path / "up"))),
        "mute": _server("hostile_skills_server.py", "hang", listTimeout=2),
    }
    async with _gateway(_config(tmp_path, servers)) as gateway:
        statuses = {s.name: s for s in _source(gateway).statuses()}
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="auto") as client:
                uris = [str(r.uri) for r in (await client.list_resources()).resources]
                missing = await client.call_tool("load_skill", {"name": "mute__good"})
                pdf = await client.call_tool("load_skill", {"name": "up__pdf-tools"})
                tool = await client.call_tool("mute__seen", {})
    assert statuses["mute"].state == "failed"
    assert statuses["mute"].reason == "skills/list got no answer within 2.0 s"
    assert statuses["up"].state == "listed"
    assert statuses["up"].skills == ("up__pdf-tools",)
    assert not any(uri.startswith("skill://mute/") for uri in uris)
    assert "skill://up/pdf-tools/SKILL.md" in uris
    assert missing.is_error is True
    assert pdf.is_error is False
    assert tool.is_error is False  # its tools are still served


async def test_skills_on_a_server_must_be_a_boolean_named_in_the_error(tmp_path: Path) -> None:
    up = {**_server("ext_server.py", str(tmp_path)), "skills": "yes"}
    with pytest.raises(ConfigError, match=r"mcpServers\.up\.skills"):
        build_gateway(GatewaySettings(config=_config(tmp_path, {"up": up})))


async def test_sagents_serve_offers_an_upstreams_skill_and_removes_its_copies_on_exit(
    tmp_path: Path,
) -> None:
    up = _server("ext_server.py", str(_upstream_skills(tmp_path / "up")))
    config = _config(tmp_path, {"up": up})
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(data)}
    code = "from sagents.cli.main import main; main()"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", code, "serve", "--config", str(config), "--mode", "auto"],
        env=env,
        cwd=str(ROOT),
    )
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.ResourceListChangedNotification):
            changed.set()

    skill = "skill://up/pdf-tools/SKILL.md"
    with anyio.fail_after(90):
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, message_handler=on_message) as session,
        ):
            await session.initialize()
            # serve does not wait for its upstreams: a skill listed after the client's first
            # resources/list comes with notifications/resources/list_changed, as a client sees
            while skill not in (
                uris := [str(r.uri) for r in (await session.list_resources()).resources]
            ):
                await changed.wait()
                changed = anyio.Event()
            loaded = await session.call_tool("load_skill", {"name": "up__pdf-tools"})
            copies = [p.name for p in (data / "mcp-skills").iterdir()]
    assert skill in uris
    assert "Use scripts/fill.py" in _text(loaded)
    assert len(copies) == 1  # this process's own cache directory
    assert list((data / "mcp-skills").iterdir()) == []  # removed when serve stopped


async def test_an_upstream_that_starts_after_the_gateway_has_its_skills_listed_then(
    tmp_path: Path,
) -> None:
    up = _server("ext_server.py", str(_upstream_skills(tmp_path / "up")))
    settings = GatewaySettings(config=_config(tmp_path, {"up": up}), mode="auto")
    async with open_gateway(settings, wait_for_servers=False) as gateway:  # as serve runs
        source = _source(gateway)
        listed = anyio.Event()
        announced = source.on_changed
        assert announced is not None

        async def spy(server: str) -> None:
            listed.set()
            await announced(server)

        source.on_changed = spy  # no await since opening: a listing done already shows here
        if source.statuses()[0].state == "listed":
            listed.set()
        with anyio.fail_after(60):
            await listed.wait()
            async with Client(gateway.server, mode="auto") as client:
                uris = [str(r.uri) for r in (await client.list_resources()).resources]
        [status] = source.statuses()
    assert "skill://up/pdf-tools/SKILL.md" in uris
    assert status.state == "listed"
