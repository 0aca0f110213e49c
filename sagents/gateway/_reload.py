"""A configuration that reloads: ``sagents serve --watch`` and ``SIGHUP`` (docs/configuration.md).

:class:`ConfigReloader` reads the config file again and applies it to the running gateway:

- it is checked as at start (:func:`~sagents.config.load_config`,
  :func:`~sagents.gateway._settings.load_profiles`, the bind's token rule); a file that fails
  is refused with the same error, logged, and the running configuration stays;
- servers added start (in the background, announced as they become ready); servers removed
  lose their tools at once and are closed once the calls running on them finish (at most
  :data:`DRAIN_S`); servers whose entry changed are closed that way and started again;
- profiles, their tokens and scopes, and ``backgroundCalls.autoAfterSec`` apply to the next
  request; an open session whose profile is gone (or whose token no longer is configured) is
  refused its next request;
- every connected client gets ``notifications/tools/list_changed``;
- keys that need a restart (``store``, ``oauth``, ``localTools``, ``builtinTools``,
  ``skills``, ``sandbox``, ``scripts``, ``quotas``, ``sessionIdleTimeout``) are named in the
  log and left as they were (so are the command line's transport, host and port).

:func:`watch_config` polls the file's size, mtime and SHA-256 every :data:`WATCH_INTERVAL_S`
(no file-watching library is a dependency; a poll is a bounded ``anyio.sleep``, never a busy
loop) and reloads when its content changed.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from sagents.config._loader import MCPServerConfig, SagentsConfig, load_config
from sagents.errors import ConfigError, SagentsError
from sagents.gateway._http_server import check_bind
from sagents.gateway._policy import Profile
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._settings import (
    GatewaySettings,
    load_profiles,
    scope_profiles,
    token_profiles,
)

__all__ = ["DRAIN_S", "WATCH_INTERVAL_S", "ConfigReloader", "ReloadResult", "watch_config"]

logger = logging.getLogger(__name__)

DRAIN_S = 300.0
"""Seconds the calls running on a removed or changed server get to finish before it closes
(a server's default ``callTimeout``)."""
WATCH_INTERVAL_S = 1.0
"""Seconds between two looks at the config file with ``--watch``."""

# SagentsConfig fields applied on reload, or compared apart; every other one needs a restart.
_LIVE_FIELDS = {"servers", "disabled", "background_calls", "source"}
# The keys of the config file that SagentsConfig's fields come from, for the log.
_FILE_KEYS = {
    "store_url": "store.url",
    "store_lease_s": "store.leaseSec",
    "oauth": "oauth",
    "local_tools": "localTools",
    "builtin_tools": "builtinTools",
    "web_fetch": "builtinTools.webFetch",
    "memory_anonymous_user": "builtinTools.memory",
    "image_understanding": "builtinTools.imageUnderstanding",
    "skills": "skills",
    "sandbox": "sandbox",
    "scripts": "scripts",
    "quotas": "quotas",
    "session_idle_timeout_s": "sessionIdleTimeout",
}


@dataclass(frozen=True, kw_only=True)
class ReloadResult:
    """What one reload did.

    Attributes:
        added: Servers started.
        removed: Servers closed (after their calls finished).
        restarted: Servers whose entry changed, closed and started again.
        needs_restart: Config keys that changed but apply only at the next start.
        error: The configuration error that refused the file (nothing was applied), or None.
    """

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    restarted: tuple[str, ...] = ()
    needs_restart: tuple[str, ...] = ()
    error: ConfigError | None = None

    def summary(self) -> str:
        """One line for the log."""
        if self.error is not None:
            return f"config not reloaded, the running one stays: {self.error}"
        parts = [
            f"{label} {', '.join(names)}"
            for label, names in (
                ("added", self.added),
                ("removed", self.removed),
                ("restarted", self.restarted),
            )
            if names
        ]
        line = "config reloaded" + (f": servers {'; '.join(parts)}" if parts else "")
        if self.needs_restart:
            line += (
                f"; changed but applied only at the next start (left as they were): "
                f"{', '.join(self.needs_restart)}"
            )
        return line


class ConfigReloader:
    """Applies the config file, read again, to a running :class:`ConfiguredGateway`.

    Args:
        gateway: The running gateway (built from ``settings``).
        settings: What ``sagents serve`` started with (``settings.config`` is the file).
        drain_s: Seconds a removed server's running calls get (:data:`DRAIN_S`).
    """

    def __init__(
        self, gateway: ConfiguredGateway, settings: GatewaySettings, *, drain_s: float = DRAIN_S
    ) -> None:
        if settings.config is None:
            raise ValueError("nothing to reload: the gateway was started without --config")
        self._gateway = gateway
        self._settings = settings
        self._path: Path = settings.config
        self._drain_s = drain_s
        self._config = gateway.config
        self._lock = anyio.Lock()  # one reload at a time, in the order asked

    async def reload(self) -> ReloadResult:
        """Read the file and apply it; a refused file changes nothing. Logs a line as it
        begins (``reloading <file>``) and one with the result.

        Returns:
            What was done (its ``error`` when the file was refused). Never raises for a bad
            file: a running gateway survives its configuration's mistakes.
        """
        async with self._lock:
            print(f"sagents serve: reloading {str(self._path)!r}", file=sys.stderr, flush=True)
            try:
                config, profiles = self._read()
            except ConfigError as error:
                result = ReloadResult(error=error)
            else:
                result = await self._apply(config, profiles)
        _log(result)
        outcome = "refused" if result.error is not None else "applied"
        self._gateway.metrics.config_reloads.labels(outcome).inc()
        return result

    def _read(self) -> tuple[SagentsConfig, dict[str, Profile]]:
        """The file's configuration and profiles, checked as at start.

        Raises:
            ConfigError: as ``sagents serve`` at start.
        """
        config = load_config(self._path)
        profiles = load_profiles(self._path)
        if self._settings.transport == "http":
            tokens = token_profiles(profiles)
            check_bind(replace(self._settings, token_profiles=tokens))
        return config, profiles

    async def _apply(self, config: SagentsConfig, profiles: dict[str, Profile]) -> ReloadResult:
        gateway = self._gateway
        old = {server.name: server for server in self._config.servers}
        new = {server.name: server for server in config.servers}
        added = [name for name in new if name not in old]
        removed = [name for name in old if name not in new]
        changed = [name for name in new if name in old and not _same(old[name], new[name])]
        # Profiles first: a removed profile's sessions are refused from now on.
        self._apply_profiles(profiles)
        if self._settings.background_after_s is None:  # the command line's value wins
            gateway.background_after_s = config.background_calls.auto_after_sec
        manager = gateway.manager
        async with anyio.create_task_group() as tg:
            for name in [*removed, *changed]:
                tg.start_soon(self._remove, name)
            if removed or changed:
                # started after the removals, which take the tools away before they wait
                # for the servers' calls: the clients hear of it now, not after the calls
                tg.start_soon(gateway.notify_tools_changed)
        start = {name: (new[name].params, new[name].settings) for name in [*added, *changed]}
        if start:
            # in the background: each is announced (tools/list_changed) as it becomes ready
            await manager.register_mcp_servers(start, wait=False)
        self._config = config
        gateway.config = replace(gateway.config, servers=config.servers, disabled=config.disabled)
        await gateway.notify_tools_changed()
        return ReloadResult(
            added=tuple(added),
            removed=tuple(removed),
            restarted=tuple(changed),
            needs_restart=_needs_restart(gateway.config, config),
        )

    async def _remove(self, name: str) -> None:
        try:
            await self._gateway.manager.unregister_mcp_server(name, drain_s=self._drain_s)
        except SagentsError as error:  # already gone: nothing to close
            logger.info("MCP server %r was not registered: %s", name, error)

    def _apply_profiles(self, profiles: dict[str, Profile]) -> None:
        gateway = self._gateway
        gateway.configured_profiles = frozenset(profiles)
        chosen = self._settings.profile
        if chosen is not None and chosen.name in profiles:
            gateway.profile = profiles[chosen.name]
        if self._settings.transport == "http":
            gateway.token_profiles = token_profiles(profiles)
            gateway.scope_profiles = scope_profiles(profiles)


def _same(old: MCPServerConfig, new: MCPServerConfig) -> bool:
    return old.params == new.params and old.settings == new.settings


def _needs_restart(running: SagentsConfig, read: SagentsConfig) -> tuple[str, ...]:
    """The config file's keys that differ between the running and the read configuration
    and apply only at start."""
    changed: list[str] = []
    for item in fields(SagentsConfig):
        if item.name in _LIVE_FIELDS:
            continue
        before: Any = getattr(running, item.name)
        after: Any = getattr(read, item.name)
        if before != after:
            changed.append(_FILE_KEYS.get(item.name, item.name))
    return tuple(dict.fromkeys(changed))


def _log(result: ReloadResult) -> None:
    line = f"sagents serve: {result.summary()}"
    print(line, file=sys.stderr, flush=True)  # beside the other lines sagents serve prints
    if result.error is not None:
        logger.error("%s", result.summary())
    else:
        logger.info("%s", result.summary())


def _fingerprint(path: Path) -> tuple[int, int, str] | None:
    """The file's size, mtime (ns) and content digest; None while it cannot be read (an
    editor replacing it)."""
    try:
        stat = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns, digest


async def watch_config(
    reloader: ConfigReloader,
    path: Path,
    *,
    interval_s: float = WATCH_INTERVAL_S,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Reload whenever the file's content changes (polled every ``interval_s`` seconds);
    runs until cancelled. Ready (``task_status``) once the file's first state is read.

    A change is loaded once the file is the same at two looks in a row: an editor writing in
    place truncates the file and then fills it, and a look in between must not load the
    half-written file (it would log a spurious "config not reloaded").
    """
    seen = await anyio.to_thread.run_sync(_fingerprint, path)
    task_status.started()
    settling: tuple[int, int, str] | None = None  # a new state, loaded if the next look agrees
    while True:
        await anyio.sleep(interval_s)
        now = await anyio.to_thread.run_sync(_fingerprint, path)
        if now is None or now == seen:
            settling = None
            continue  # unreadable for now, or unchanged
        if now != settling:
            settling = now
            continue
        settling = None
        changed = seen is None or now[2] != seen[2]  # a touch alone is no change
        seen = now
        if changed:
            await reloader.reload()
