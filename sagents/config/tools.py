"""Build a :class:`~sagents.tool.ToolManager` from a loaded configuration.

The one place where the CLI (``sagents tools``, ``sagents call``), run_script's CLI and the
gateway turn a :class:`~sagents.config.SagentsConfig` into a registry with every enabled MCP
server connected (docs/configuration.md, docs/mcp.md).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

from sagents.config._cache import ResultCache
from sagents.config._hooks import CommandHooks
from sagents.config._loader import SagentsConfig
from sagents.config._rate_limits import RateLimits
from sagents.core._secrets import Redactor
from sagents.mcp import ServerParams, ServerSettings, StreamableHttpServerParameters
from sagents.progress import ProgressHub
from sagents.store._protocols import PinStore
from sagents.tool._middleware import ToolMiddleware
from sagents.tool.tool_manager import ToolManager

if TYPE_CHECKING:
    from sagents.mcp._oauth import LoginVault

__all__ = ["build_tool_manager"]


async def build_tool_manager(
    config: SagentsConfig,
    *,
    progress_hub: ProgressHub | None = None,
    wait: bool = True,
    definition_pins: PinStore | None = None,
    redactor: Redactor | None = None,
    logins: LoginVault | None = None,
) -> ToolManager:
    """Open a ToolManager with every enabled server of ``config`` registered.

    The servers start side by side (:meth:`ToolManager.register_mcp_servers`): each waits only
    for its own first start, bounded by its ``connectTimeout`` and ``listTimeout``. A server
    that fails or times out never blocks the others and does not raise: it stays registered
    with state ``failed``, its ``last_error`` and no tools
    (``manager.mcp_server_status(name)``). Disabled servers are not started.

    The caller owns the result: ``async with await build_tool_manager(cfg) as tm:`` or
    ``await tm.aclose()``, which ends every server's process.

    Args:
        config: From :func:`sagents.config.load_config`.
        progress_hub: The hub of the tools' progress events; the process default when None.
        wait: False returns without waiting for any server: each one's tools are registered
            when it is ready (``manager.on_mcp_tools_changed`` listeners hear of it), as
            ``sagents serve`` does so that it can answer ``initialize`` at once.
        definition_pins: Where every server's tool definitions are pinned (docs/gateway.md,
            "Pinned definitions"); None: not pinned.
        redactor: The secrets redacted from every server's results, progress messages and
            stderr log (docs/gateway.md, "Secrets"); None: the secrets of ``config``
            (:attr:`~sagents.config.SagentsConfig.secrets`), so that ``sagents call``,
            ``chat`` and ``run-script`` redact them too.
        logins: The upstream logins of the ``"auth": "oauth"`` servers (docs/oauth.md): each
            call of such a server goes to the calling principal's own connection, and the
            server's tools are listed with the local operator's login (principal ``""``).
            None: the local operator's logins of the embedded store (the data directory's
            ``logins.sqlite3``, key from ``SAGENTS_SECRET_KEY`` or ``secret.key``) when the
            config has such a server and no ``store.url``, as ``sagents auth login`` keeps
            them.

    Returns:
        The open manager.

    Raises:
        ToolDefinitionError, ToolNameConflictError: a server name the registry refuses (the
            loader already checks names, so only for hand-built configs); nothing stays open.
    """
    manager: ToolManager

    def permission_of(name: str) -> str:  # a hook's input: the tool's class, at call time
        return manager.get_tool_spec(name).permission

    # rate limits first: a call over its limit reaches no hook; the cache last: the pre hooks
    # decide a call the cache answers too, and the post hooks see what it answers
    middleware: list[ToolMiddleware] = []
    if config.rate_limits:
        middleware.append(RateLimits(config.rate_limits))
    if config.hooks:
        middleware.append(CommandHooks(config.hooks, permission_of=permission_of))
    if config.cache is not None:
        middleware.append(ResultCache(config.cache, permission_of=permission_of))
    manager = ToolManager(progress_hub=progress_hub, middleware=middleware)
    try:
        if config.servers:
            secrets = Redactor(config.secrets)  # unless given, or set in a server's settings
            servers = {
                name: (params, _settings(settings, definition_pins, redactor, secrets))
                for name, (params, settings) in config.as_supervisor_input().items()
            }
            logins = logins or _local_logins(config)
            if logins is not None:
                servers = _routed(manager, servers, logins)
            await manager.register_mcp_servers(servers, wait=wait)
    except BaseException:
        await manager.aclose()
        raise
    return manager


def _local_logins(config: SagentsConfig) -> LoginVault | None:
    """The embedded store's logins, for a config with an ``"auth": "oauth"`` server and no
    shared store (the CLI's ``tools``, ``call``, ``chat``, ``run-script``)."""
    wanted = any(
        isinstance(params, StreamableHttpServerParameters) and params.oauth is not None
        for params, _ in config.as_supervisor_input().values()
    )
    if not wanted or config.store_url:
        return None
    from sagents.audit._store import default_data_dir
    from sagents.mcp._oauth import LoginVault, load_secret_key
    from sagents.store._logins import LOGINS_FILE, SqliteLogins

    data_dir = default_data_dir()
    return LoginVault(SqliteLogins(data_dir / LOGINS_FILE), load_secret_key(data_dir))


def _routed(
    manager: ToolManager,
    servers: dict[str, tuple[ServerParams, ServerSettings]],
    logins: LoginVault,
) -> dict[str, tuple[ServerParams, ServerSettings]]:
    """``servers`` with each ``"auth": "oauth"`` one routed per principal, its shared
    connection (the tool listing) holding the local operator's login."""
    from sagents.mcp._oauth import PrincipalConnections

    routed = dict(servers)
    for name, (params, settings) in servers.items():
        if isinstance(params, StreamableHttpServerParameters) and params.oauth is not None:
            route = PrincipalConnections(name, params, settings, logins)
            manager.route_mcp_server(name, route)
            catalog = functools.partial(route.auth, "")  # a new client per connection
            routed[name] = (dataclasses.replace(params, auth=catalog), settings)
    return routed


def _settings(
    settings: ServerSettings,
    pins: PinStore | None,
    redactor: Redactor | None,
    secrets: Redactor,
) -> ServerSettings:
    """``settings`` with the pin store and redactor given (those it names when not given; the
    config's secrets when it names no redactor)."""
    return dataclasses.replace(
        settings,
        definition_pins=pins if pins is not None else settings.definition_pins,
        redactor=redactor if redactor is not None else settings.redactor or secrets,
    )
