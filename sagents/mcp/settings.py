"""Per-server settings of an MCP upstream: timeouts, concurrency, permission overrides.

Plain frozen values; :mod:`sagents.config` builds them from the ``mcpServers`` file, and library
users may build them directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sagents.core.permissions import PermissionClass

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_PING_INTERVAL",
    "DEFAULT_PING_TIMEOUT",
    "ServerSettings",
]

DEFAULT_MAX_CONCURRENCY = 8  # calls in flight per server
DEFAULT_PING_INTERVAL = 30.0  # seconds between liveness pings of an idle server
DEFAULT_PING_TIMEOUT = 10.0  # seconds a ping may take before the server counts as frozen


@dataclass(frozen=True, kw_only=True)
class ServerSettings:
    """How sagents treats one upstream server.

    Attributes:
        enabled: False keeps the server out of the registry (the config loader skips it).
        connect_timeout: Seconds for starting the server and the protocol handshake.
        discover_timeout: Seconds to wait for an answer to ``server/discover`` (protocol
            2026-07-28) before falling back to the legacy ``initialize`` handshake, so that a
            legacy server that ignores the request cannot stall the connect.
        list_timeout: Seconds for the whole ``tools/list`` walk (every page).
        call_timeout: Default seconds for one ``tools/call``; None means no limit.
        max_concurrency: Calls in flight at once on this server; later calls wait their turn.
        permission: Permission class for every tool of the server, overriding annotations.
        tool_permissions: Permission class per original tool name; wins over ``permission``.
        restart_backoff: Seconds before the first restart after a failure; doubles per failure.
        max_restart_backoff: Upper bound of the restart delay, in seconds.
        log_dir: Directory of the per-server stderr log (``<log_dir>/<server>.log``) of stdio
            servers; None means the supervisor's default.
        ping_interval: Seconds between liveness ``ping`` requests while no call is in flight
            (MCP spec, "Ping"); None: only after a call timed out or was cancelled.
        ping_timeout: Seconds a server gets to answer a liveness ``ping``; one that does not is
            restarted.
    """

    enabled: bool = True
    connect_timeout: float = 30.0
    discover_timeout: float = 2.0
    list_timeout: float = 30.0
    call_timeout: float | None = 300.0
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    permission: PermissionClass | None = None
    tool_permissions: Mapping[str, PermissionClass] = field(default_factory=dict)
    restart_backoff: float = 0.5
    max_restart_backoff: float = 30.0
    log_dir: Path | None = None
    ping_interval: float | None = DEFAULT_PING_INTERVAL
    ping_timeout: float = DEFAULT_PING_TIMEOUT

    def __post_init__(self) -> None:
        if self.ping_interval is not None and self.ping_interval <= 0:
            raise ValueError(f"ping_interval must be positive or None, got {self.ping_interval!r}")
        for name in ("connect_timeout", "discover_timeout", "list_timeout", "ping_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        if self.call_timeout is not None and self.call_timeout <= 0:
            raise ValueError(f"call_timeout must be positive or None, got {self.call_timeout!r}")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {self.max_concurrency!r}")
        if self.restart_backoff < 0 or self.max_restart_backoff < self.restart_backoff:
            raise ValueError("restart_backoff must be >= 0 and <= max_restart_backoff")
