"""Upstream prompts, resources, templates and completion through ``sagents serve``.

Upstreams: two instances of tests/mcp/servers/catalog_server.py (``notes`` and ``other``), a
server that cannot start (``broken``) and, where .peers has it, the reference ``everything``
server; clients are the ``mcp`` SDK's, in-process, on both protocol generations.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from sagents.gateway._factory import open_gateway
from sagents.gateway._forwarding import split_upstream_uri, upstream_uri
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._settings import GatewaySettings, load_profiles
from tests.mcp.helpers import NODE_MODULES

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
CATALOG_SERVER = ROOT / "tests" / "mcp" / "servers" / "catalog_server.py"
EVERYTHING = NODE_MODULES / "server-everything" / "dist" / "index.js"
MODES = ["legacy", "auto"]  # handshake era, and 2026-07-28 where both ends speak it
NOTE = "sagents://upstream/notes/note://hello"


def _catalog(label: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(CATALOG_SERVER), label],
        "env": {"PYTHONPATH": str(ROOT)},
        "permission": "read_only",
    }


def write_config(tmp_path: Path, **servers: dict[str, Any]) -> Path:
    document = {
        "mcpServers": {
            "notes": _catalog("notes"),
            "other": _catalog("other"),
            "broken": {"command": str(tmp_path / "missing"), "connectTimeout": 2},
            **servers,
        },
        "profiles": {
            "narrow": {
                "prompts": ["notes__greet"],
                "resources": [NOTE, "sagents://upstream/notes/note://items/*"],
            },
            "others": {"servers": ["other"]},
        },
    }
    path = tmp_path / "sagents.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def settings_for(config: Path, profile: str | None = None) -> GatewaySettings:
    chosen = load_profiles(config)[profile] if profile else None
    return GatewaySettings(config=config, mode="auto", profile=chosen)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ConfiguredGateway]:
    config = write_config(tmp_path_factory.mktemp("forwarding"))
    async with open_gateway(settings_for(config)) as shared:
        yield shared


def test_upstream_uris_keep_the_servers_apart_and_round_trip() -> None:
    for server, uri in [
        ("notes", "note://hello"),
        ("files", "file:///srv/a b.txt?x=1#frag"),
        ("files", "file:///{path}"),
        ("a-b_c", "https://example.com/x/y"),
    ]:
        mapped = upstream_uri(server, uri)
        assert mapped.startswith(f"sagents://upstream/{server}/")
        assert split_upstream_uri(mapped) == (server, uri)
    assert split_upstream_uri("skill://triage/SKILL.md") is None
    assert split_upstream_uri("sagents://upstream/notes") is None
    assert split_upstream_uri("sagents://tasks/abc") is None


@pytest.mark.parametrize("mode", MODES)
async def test_prompts_are_listed_namespaced_and_got_with_their_resources_renamed(
    gateway: ConfiguredGateway, mode: str
) -> None:
    with anyio.fail_after(30):
        async with Client(gateway.server, mode=mode) as client:
            names = [p.name for p in (await client.list_prompts()).prompts]
            got = await client.get_prompt("notes__greet", {"name": "ada"})
            plain = await client.get_prompt("other__plain")
    assert {"notes__greet", "notes__plain", "other__greet", "other__plain"} <= set(names)
    assert not any(name.startswith("broken__") for name in names)
    first, second = got.messages
    assert isinstance(first.content, mt.TextContent)
    assert first.content.text == "notes: hello ada"
    assert isinstance(second.content, mt.EmbeddedResource)
    assert second.content.resource.uri == NOTE
    assert isinstance(plain.messages[0].content, mt.TextContent)
    assert plain.messages[0].content.text == "other: plain"


@pytest.mark.parametrize("mode", MODES)
async def test_resources_and_templates_are_listed_under_gateway_uris_and_read(
    gateway: ConfiguredGateway, mode: str
) -> None:
    with anyio.fail_after(30):
        async with Client(gateway.server, mode=mode) as client:
            uris = [r.uri for r in (await client.list_resources()).resources]
            templates = [
                t.uri_template for t in (await client.list_resource_templates()).resource_templates
            ]
            text = await client.read_resource(NOTE)
            other = await client.read_resource("sagents://upstream/other/note://hello")
            blob = await client.read_resource("sagents://upstream/notes/note://logo")
            item = await client.read_resource("sagents://upstream/notes/note://items/42")
            with pytest.raises(MCPError) as missing:
                await client.read_resource("sagents://upstream/notes/note://nothing")
            with pytest.raises(MCPError) as down:
                await client.read_resource("sagents://upstream/broken/note://hello")
    assert {NOTE, "sagents://upstream/other/note://hello"} <= set(uris)
    assert "sagents://upstream/notes/note://items/{id}" in templates
    assert "sagents://upstream/other/note://items/{id}" in templates
    assert isinstance(text.contents[0], mt.TextResourceContents)
    assert (text.contents[0].uri, text.contents[0].text) == (NOTE, "notes: note://hello")
    assert isinstance(other.contents[0], mt.TextResourceContents)
    assert other.contents[0].text == "other: note://hello"
    assert isinstance(blob.contents[0], mt.BlobResourceContents)
    assert blob.contents[0].uri == "sagents://upstream/notes/note://logo"
    assert isinstance(item.contents[0], mt.TextResourceContents)
    assert item.contents[0].text == "notes: note://items/42"
    assert missing.value.code == -32002  # the upstream's own answer, passed on
    assert down.value.code == -32002  # a server that is down offers nothing
    assert "broken" in down.value.message


@pytest.mark.parametrize("mode", MODES)
async def test_completion_is_forwarded_for_prompts_and_templates(
    gateway: ConfiguredGateway, mode: str
) -> None:
    with anyio.fail_after(30):
        async with Client(gateway.server, mode=mode) as client:
            names = await client.complete(
                mt.PromptReference(name="notes__greet"), {"name": "name", "value": "al"}
            )
            ids = await client.complete(
                mt.ResourceTemplateReference(uri="sagents://upstream/other/note://items/{id}"),
                {"name": "id", "value": "1"},
            )
            skill = await client.complete(
                mt.ResourceTemplateReference(uri="skill://x/{path}"), {"name": "path", "value": ""}
            )
            with pytest.raises(MCPError) as unknown:
                await client.complete(
                    mt.PromptReference(name="notes__nothing"), {"name": "x", "value": ""}
                )
    assert names.completion.values == ["alice", "albert"]
    assert ids.completion.values == ["1", "10"]
    assert skill.completion.values == []
    assert unknown.value.code == -32602


async def test_a_profile_filters_prompts_and_resources_by_name_and_pattern(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    async with open_gateway(settings_for(config, "narrow")) as gateway:
        with anyio.fail_after(30):
            async with Client(gateway.server, mode="legacy") as client:
                names = [p.name for p in (await client.list_prompts()).prompts]
                uris = [r.uri for r in (await client.list_resources()).resources]
                templates = [
                    t.uri_template
                    for t in (await client.list_resource_templates()).resource_templates
                ]
                allowed = await client.read_resource("sagents://upstream/notes/note://items/7")
                with pytest.raises(MCPError) as prompt_refused:
                    await client.get_prompt("notes__plain")
                with pytest.raises(MCPError) as resource_refused:
                    await client.read_resource("sagents://upstream/other/note://hello")
                with pytest.raises(MCPError) as completion_refused:
                    await client.complete(
                        mt.ResourceTemplateReference(
                            uri="sagents://upstream/other/note://items/{id}"
                        ),
                        {"name": "id", "value": ""},
                    )
    assert names == ["notes__greet"]
    assert uris == [NOTE]
    assert templates == ["sagents://upstream/notes/note://items/{id}"]
    assert isinstance(allowed.contents[0], mt.TextResourceContents)
    assert prompt_refused.value.code == -32602
    assert resource_refused.value.code == -32002
    assert completion_refused.value.code == -32602


async def test_a_profile_of_servers_offers_only_their_prompts_and_resources(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path)
    async with open_gateway(settings_for(config, "others")) as gateway:
        with anyio.fail_after(30):
            async with Client(gateway.server, mode="legacy") as client:
                names = {p.name for p in (await client.list_prompts()).prompts}
                uris = {r.uri for r in (await client.list_resources()).resources}
                with pytest.raises(MCPError):
                    await client.read_resource(NOTE)
    assert names == {"other__greet", "other__plain"}
    assert uris == {"sagents://upstream/other/note://hello", "sagents://upstream/other/note://logo"}


async def test_an_upstream_list_change_is_passed_on_and_listed(tmp_path: Path) -> None:
    prompts_changed, resources_changed = anyio.Event(), anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.PromptListChangedNotification):
            prompts_changed.set()
        if isinstance(message, mt.ResourceListChangedNotification):
            resources_changed.set()

    config = write_config(tmp_path)
    async with open_gateway(settings_for(config)) as gateway:
        with anyio.fail_after(30):
            async with Client(gateway.server, mode="legacy", message_handler=on_message) as c:
                before = {p.name for p in (await c.list_prompts()).prompts}
                await c.call_tool("notes__add_prompt", {})
                await prompts_changed.wait()
                after = {p.name for p in (await c.list_prompts()).prompts}
                await c.call_tool("other__add_resource", {})
                await resources_changed.wait()
                uris = {r.uri for r in (await c.list_resources()).resources}
    assert "notes__extra2" not in before
    assert "notes__extra2" in after
    assert "sagents://upstream/other/note://extra2" in uris


async def test_a_server_that_goes_down_hides_only_its_own_items(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    async with open_gateway(settings_for(config)) as gateway:
        supervisor = gateway.manager.mcp_supervisor
        assert supervisor is not None
        hidden = anyio.Event()

        async def on_change(server: str, kind: str) -> None:
            if server == "notes" and supervisor.status("notes").state != "ready":
                hidden.set()

        with anyio.fail_after(30):
            async with Client(gateway.server, mode="legacy") as client:
                await client.list_prompts()
                supervisor.on_catalog_changed(on_change)
                await client.call_tool("notes__fail_reads", {})
                with pytest.raises(MCPError) as failing:
                    await client.read_resource(NOTE)
                pid = supervisor.status("notes").pid
                assert pid is not None
                await anyio.run_process(["kill", "-9", str(pid)])
                await hidden.wait()
                names = {p.name for p in (await client.list_prompts()).prompts}
                uris = {r.uri for r in (await client.list_resources()).resources}
    assert failing.value.code == -32603  # the upstream's JSON-RPC error, passed on
    assert "reads are failing" in failing.value.message
    assert not any(name.startswith("notes__") for name in names)
    assert {"other__greet", "other__plain"} <= names
    assert not any(uri.startswith("sagents://upstream/notes/") for uri in uris)
    assert "sagents://upstream/other/note://hello" in uris


@pytest.mark.skipif(not EVERYTHING.exists(), reason="the reference servers are not installed")
async def test_the_reference_everything_servers_prompts_resources_and_completion(
    tmp_path: Path,
) -> None:
    everything = {"command": "node", "args": [str(EVERYTHING), "stdio"], "connectTimeout": 60}
    config = write_config(tmp_path, everything=everything)
    async with open_gateway(settings_for(config)) as gateway:
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="legacy") as client:
                names = {p.name for p in (await client.list_prompts()).prompts}
                simple = await client.get_prompt("everything__simple-prompt")
                resources = [
                    r.uri
                    for r in (await client.list_resources()).resources
                    if r.uri.startswith("sagents://upstream/everything/")
                ]
                read = await client.read_resource(resources[0])
                templates = [
                    t.uri_template
                    for t in (await client.list_resource_templates()).resource_templates
                    if t.uri_template.startswith("sagents://upstream/everything/")
                ]
                departments = await client.complete(
                    mt.PromptReference(name="everything__completable-prompt"),
                    {"name": "department", "value": ""},
                )
    assert {"everything__simple-prompt", "everything__args-prompt"} <= names
    assert isinstance(simple.messages[0].content, mt.TextContent)
    assert read.contents[0].uri == resources[0]
    assert any("{resourceId}" in template for template in templates)
    assert "Engineering" in departments.completion.values


async def test_a_sandboxed_upstream_is_served_like_any_other(tmp_path: Path) -> None:
    venv = Path(sys.prefix)  # the SDK the test server imports
    sandboxed = {
        **_catalog("boxed"),
        "sandbox": {"readable": [str(venv), str(ROOT / "tests")], "home": str(tmp_path / "home")},
        "connectTimeout": 60,
    }
    config = write_config(tmp_path, boxed=sandboxed)
    async with open_gateway(settings_for(config)) as gateway:
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="legacy") as client:
                got = await client.get_prompt("boxed__greet", {"name": "ada"})
                read = await client.read_resource("sagents://upstream/boxed/note://hello")
        status = gateway.manager.mcp_server_status("boxed")
    assert status.sandboxed is True
    assert isinstance(got.messages[0].content, mt.TextContent)
    assert got.messages[0].content.text == "boxed: hello ada"
    assert isinstance(read.contents[0], mt.TextResourceContents)


async def test_sagents_serve_forwards_prompts_resources_and_completion_over_stdio(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path)
    code = "from sagents.cli.main import main; main()"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(tmp_path / "data")}
    args = ["-c", code, "serve", "--config", str(config), "--profile", "narrow"]
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            names = [p.name for p in (await client.list_prompts()).prompts]
            got = await client.get_prompt("notes__greet", {"name": "ada"})
            read = await client.read_resource(NOTE)
            done = await client.complete(
                mt.PromptReference(name="notes__greet"), {"name": "name", "value": "b"}
            )
    assert names == ["notes__greet"]
    assert isinstance(got.messages[0].content, mt.TextContent)
    assert got.messages[0].content.text == "notes: hello ada"
    assert isinstance(read.contents[0], mt.TextResourceContents)
    assert read.contents[0].text == "notes: note://hello"
    assert done.completion.values == ["bob"]
