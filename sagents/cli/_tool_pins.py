"""``sagents tools --changes`` and ``sagents tools --accept SERVER[__TOOL]``: the pinned
definitions of upstream tools (docs/gateway.md, "Pinned definitions"; docs/cli-tools.md).

Both use the store ``sagents serve`` uses (``--store``, else the configuration's ``store.url``,
else the SQLite files of the data directory). ``--changes`` starts the configured servers, so
that what they offer now is compared with their pins too (a tool seen for the first time is
pinned), and prints each changed tool with a diff; ``--accept`` starts nothing: it accepts the
changes the store holds (seen by a gateway or by ``--changes``). A running gateway releases a
tool accepted here at its next listing of the server (a restart, a ``list_changed``), or at
once when the change is accepted in its console.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from sagents.audit._store import default_data_dir
from sagents.config import SagentsConfig
from sagents.config.tools import build_tool_manager
from sagents.mcp._convert import TOOL_NAME_SEPARATOR, check_server_name, split_tool_name
from sagents.mcp._pins import definition_diff
from sagents.store import GatewayStore, ToolPin, open_store, parse_store_url

__all__ = ["accept_changes", "changed_tools", "pin_json"]

T = TypeVar("T")


def _with_store(
    config: SagentsConfig, store_url: str | None, work: Callable[[GatewayStore], Awaitable[T]]
) -> T:
    file = str(config.source) if config.source else None
    if store_url:
        location = parse_store_url(store_url, lease_s=config.store_lease_s)
    else:
        location = parse_store_url(
            config.store_url, key="store.url", file=file, lease_s=config.store_lease_s
        )

    async def main() -> T:
        async with open_store(location, data_dir=default_data_dir()) as store:
            return await work(store)

    return anyio.run(main)


def pin_json(pin: ToolPin) -> dict[str, Any]:
    """One changed tool as ``sagents tools --changes --json`` prints it: ``{"name", "server",
    "tool", "digest", "offered_digest", "diff"}``."""
    return {
        "name": f"{pin.server}{TOOL_NAME_SEPARATOR}{pin.tool}",
        "server": pin.server,
        "tool": pin.tool,
        "digest": pin.digest,
        "offered_digest": pin.offered_digest,
        "diff": definition_diff(pin),
    }


def changed_tools(config: SagentsConfig, store_url: str | None) -> list[ToolPin]:
    """Start the configured servers with their definitions pinned in the store; the changed
    tools of those servers, by server and tool.

    Raises:
        StoreError: the store cannot be used.
        ConfigError: a malformed store address.
    """
    servers = {server.name for server in config.servers}

    async def work(store: GatewayStore) -> list[ToolPin]:
        async with await build_tool_manager(config, definition_pins=store.pins):
            pass  # each server's first listing is checked against its pins as it starts
        return [pin for pin in await store.pins.changes() if pin.server in servers]

    return _with_store(config, store_url, work)


def accept_changes(config: SagentsConfig, store_url: str | None, name: str) -> list[ToolPin]:
    """Accept the held changes of ``name`` (``SERVER`` or ``SERVER__TOOL``); the accepted pins.

    Raises:
        StoreError: the store cannot be used.
        ConfigError: a malformed store address.
        ValueError: ``name`` is not ``SERVER`` or ``SERVER__TOOL``.
    """
    server, tool = split_tool_name(name) if TOOL_NAME_SEPARATOR in name else (name, None)
    check_server_name(server)

    async def work(store: GatewayStore) -> list[ToolPin]:
        return await store.pins.accept(server, tool)

    return _with_store(config, store_url, work)
