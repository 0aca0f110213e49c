"""Forwarded resource subscriptions through ``sagents serve``: handshake-era
``resources/subscribe`` and 2026-07-28 ``subscriptions/listen``, scoped to the sessions that
subscribed, ended with them, restored after an upstream restart, bounded against floods.

Upstreams: tests/mcp/servers/catalog_server.py as ``notes`` and ``other`` (both offer
subscriptions) and ``plain`` (none).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from anyio.streams.memory import MemoryObjectSendStream
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import ResourceUpdated

from sagents.gateway._factory import open_gateway
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._settings import GatewaySettings, load_profiles

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
CATALOG_SERVER = ROOT / "tests" / "mcp" / "servers" / "catalog_server.py"
NOTE = "sagents://upstream/notes/note://hello"
ITEM = "sagents://upstream/notes/note://items/1"
OTHER = "sagents://upstream/other/note://hello"


def _catalog(label: str, *extra: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(CATALOG_SERVER), label, *extra],
        "env": {"PYTHONPATH": str(ROOT)},
        "permission": "read_only",
        **({"discoverTimeout": 0.5} if "legacy" in extra else {}),
    }


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    document = {
        "mcpServers": {
            "notes": _catalog("notes"),
            "other": _catalog("other"),
            "plain": _catalog("plain", "nosub"),
            "old": _catalog("old", "legacy"),
            "oldplain": _catalog("oldplain", "legacy", "nosub"),
        },
        "profiles": {"others": {"servers": ["other"]}, "hello": {"resources": [NOTE]}},
    }
    path = tmp_path_factory.mktemp("subscriptions") / "sagents.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
async def gateway(config: Path) -> AsyncIterator[ConfiguredGateway]:
    async with open_gateway(GatewaySettings(config=config, mode="auto")) as shared:
        yield shared


class Updates:
    """A client's ``notifications/resources/updated``, as they arrive."""

    def __init__(self) -> None:
        self.send: MemoryObjectSendStream[str]
        self.send, self.receive = anyio.create_memory_object_stream[str](10_000)

    async def handler(self, message: IncomingMessage) -> None:
        if isinstance(message, mt.ResourceUpdatedNotification):
            await self.send.send(message.params.uri)


async def history(client: Client, server: str) -> list[str]:
    result = await client.call_tool(f"{server}__subscriptions", {})
    assert result.structured_content is not None
    return list(result.structured_content["history"])


def subscribe(client: Client, uri: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return client.subscribe_resource(uri)


async def test_an_update_reaches_exactly_the_sessions_that_subscribed(
    gateway: ConfiguredGateway,
) -> None:
    a, b = Updates(), Updates()
    with anyio.fail_after(60):
        async with (
            Client(gateway.server, mode="legacy", message_handler=a.handler) as first,
            Client(gateway.server, mode="legacy", message_handler=b.handler) as second,
        ):
            await subscribe(first, NOTE)
            await subscribe(second, ITEM)
            await first.call_tool("notes__touch", {"uri": "note://hello"})
            await first.call_tool("notes__touch", {"uri": "note://items/1"})
            assert await a.receive.receive() == NOTE
            assert await b.receive.receive() == ITEM
            await first.call_tool("notes__touch", {"uri": "note://items/1"})
            await first.call_tool("notes__touch", {"uri": "note://hello"})
            assert await a.receive.receive() == NOTE  # never the other session's ITEM
            assert await b.receive.receive() == ITEM
            seen = await history(first, "notes")
    assert seen.count("+note://hello") == 1
    assert seen.count("+note://items/1") == 1


async def test_the_capability_is_declared_and_unsubscribing_ends_the_upstream_subscription(
    gateway: ConfiguredGateway,
) -> None:
    updates = Updates()
    with anyio.fail_after(60):
        async with Client(gateway.server, mode="legacy", message_handler=updates.handler) as c:
            caps = c.session.server_capabilities
            assert caps is not None
            assert caps.resources is not None
            assert caps.resources.subscribe
            await subscribe(c, OTHER)
            assert "+note://hello" in await history(c, "other")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await c.unsubscribe_resource(OTHER)
            assert (await history(c, "other"))[-1] == "-note://hello"


async def test_a_sessions_subscriptions_end_with_it(gateway: ConfiguredGateway) -> None:
    with anyio.fail_after(60):
        async with Client(gateway.server, mode="legacy") as gone:
            await subscribe(gone, ITEM.replace("items/1", "items/7"))
        async with Client(gateway.server, mode="legacy") as c:
            while "-note://items/7" not in await history(c, "notes"):
                gc.collect()  # the session's end is its connection's collection
                await anyio.lowlevel.checkpoint()


async def test_resources_outside_the_offer_or_without_subscriptions_are_refused(
    config: Path,
) -> None:
    profile = load_profiles(config)["others"]
    settings = GatewaySettings(config=config, mode="auto", profile=profile)
    with anyio.fail_after(60):
        async with (
            open_gateway(settings) as narrowed,
            Client(narrowed.server, mode="legacy") as c,
        ):
            with pytest.raises(MCPError) as foreign:
                await subscribe(c, NOTE)
            with pytest.raises(MCPError) as skill:
                await subscribe(c, "skill://x/SKILL.md")
            with pytest.raises(MCPError) as plain:
                await subscribe(c, "sagents://upstream/plain/note://hello")
    assert foreign.value.error.code == -32002
    assert skill.value.error.code == -32002
    assert plain.value.error.code == -32002  # not offered by this profile either
    async with (
        open_gateway(GatewaySettings(config=config, mode="auto")) as full,
        Client(full.server, mode="legacy") as c,
    ):
        with anyio.fail_after(60), pytest.raises(MCPError) as none:
            await subscribe(c, "sagents://upstream/plain/note://hello")
        with anyio.fail_after(60), pytest.raises(MCPError) as old:
            await subscribe(c, "sagents://upstream/oldplain/note://hello")
    assert "acknowledge" in none.value.error.message  # 2026-07-28: the ack leaves it out
    assert "does not offer resource subscriptions" in old.value.error.message


async def test_a_listen_stream_honors_only_offered_uris_and_delivers_their_updates(
    config: Path,
) -> None:
    profile = load_profiles(config)["hello"]
    settings = GatewaySettings(config=config, mode="auto", profile=profile)
    with anyio.fail_after(60):
        async with open_gateway(settings) as gateway, Client(gateway.server) as c:
            async with c.listen(resource_subscriptions=[NOTE, ITEM, OTHER]) as stream:
                assert stream.honored.resource_subscriptions == [NOTE]
                await c.call_tool("notes__touch", {"uri": "note://items/1"})
                await c.call_tool("notes__touch", {"uri": "note://hello"})
                event = await stream.__anext__()
            assert event == ResourceUpdated(uri=NOTE)
            while (await history(c, "notes"))[-1] != "-note://hello":
                await anyio.lowlevel.checkpoint()  # the stream's end unsubscribed


async def test_a_flood_of_hostile_updates_is_coalesced_and_unknown_uris_are_dropped(
    gateway: ConfiguredGateway,
) -> None:
    updates = Updates()
    with anyio.fail_after(120):
        async with Client(gateway.server, mode="legacy", message_handler=updates.handler) as c:
            await subscribe(c, NOTE)
            await c.call_tool("notes__flood", {"uri": "note://hello", "n": 3000})
            await c.call_tool("notes__touch", {"uri": "note://items/2"})  # not subscribed
            await c.call_tool("other__touch", {"uri": "note://hello"})  # not subscribed
            read = await c.read_resource(NOTE)  # the gateway still answers
            await subscribe(c, "sagents://upstream/notes/note://items/3")
            await c.call_tool("notes__touch", {"uri": "note://items/3"})
            got: list[str] = []
            while "sagents://upstream/notes/note://items/3" not in got:
                got.append(await updates.receive.receive())
    assert read.contents
    assert set(got) == {NOTE, "sagents://upstream/notes/note://items/3"}
    assert got.count(NOTE) < 3000  # coalesced, never one per upstream notification


async def test_an_upstream_restart_subscribes_again(config: Path) -> None:
    updates = Updates()
    with anyio.fail_after(120):
        async with open_gateway(GatewaySettings(config=config, mode="auto")) as gateway:
            supervisor = gateway.manager.mcp_supervisor
            assert supervisor is not None
            async with Client(gateway.server, mode="legacy", message_handler=updates.handler) as c:
                await subscribe(c, OTHER)
                pid = supervisor.status("other").pid
                assert pid is not None
                os.kill(pid, signal.SIGKILL)
                while supervisor.status("other").pid in (None, pid):
                    await supervisor.wait_started(1)
                    await anyio.lowlevel.checkpoint()
                while "+note://hello" not in await history(c, "other"):
                    await anyio.lowlevel.checkpoint()
                await c.call_tool("other__touch", {"uri": "note://hello"})
                assert await updates.receive.receive() == OTHER


async def test_a_handshake_era_upstream_is_subscribed_with_resources_subscribe(
    gateway: ConfiguredGateway,
) -> None:
    base = "sagents://upstream/old/note://items"
    with anyio.fail_after(60):
        async with Client(gateway.server, mode="auto") as c:
            status = gateway.manager.mcp_supervisor.status("old")  # type: ignore[union-attr]
            assert status.protocol_version == "2025-11-25"
            async with c.listen(resource_subscriptions=[base]) as stream:
                assert stream.honored.resource_subscriptions == [base]
                await c.call_tool("old__touch", {"uri": "note://items/5"})  # a sub-resource
                await c.call_tool("old__touch", {"uri": "note://itemsX"})  # not one
                await c.call_tool("old__touch", {"uri": "note://items"})
                first = await stream.__anext__()
                second = await stream.__anext__()
                assert (await history(c, "old"))[-1] == "+note://items"
            while (await history(c, "old"))[-1] != "-note://items":
                await anyio.lowlevel.checkpoint()  # the stream's end unsubscribed upstream
    assert (first, second) == (ResourceUpdated(uri=f"{base}/5"), ResourceUpdated(uri=base))
