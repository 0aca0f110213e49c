"""Per-server settings of an MCP upstream: timeouts, concurrency, permission overrides.

Plain frozen values; :mod:`sagents.config` builds them from the ``mcpServers`` file, and library
users may build them directly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

from sagents.core._permissions import PermissionClass
from sagents.core._secrets import Redactor
from sagents.sandbox import NetworkPolicy

if TYPE_CHECKING:
    from sagents.store._protocols import PinStore

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_PING_INTERVAL",
    "DEFAULT_PING_TIMEOUT",
    "DEFAULT_SERVER_MEMORY_MB",
    "DEFAULT_SERVER_PROCESSES",
    "ServerSandbox",
    "ServerSettings",
]

DEFAULT_MAX_CONCURRENCY = 8  # calls in flight per server
DEFAULT_PING_INTERVAL = 30.0  # seconds between liveness pings of an idle server
DEFAULT_PING_TIMEOUT = 10.0  # seconds a ping may take before the server counts as frozen
DEFAULT_SERVER_MEMORY_MB = 1024  # memory of a sandboxed server's whole process tree
DEFAULT_SERVER_PROCESSES = 64  # processes of a sandboxed server's tree (npx/uvx wrappers included)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it (both absolute, normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True, kw_only=True)
class ServerSandbox:
    """How a stdio server runs in its own bubblewrap sandbox (docs/mcp.md, "Sandboxed servers").

    The server gets run_script's hardening (docs/sandbox.md): an unprivileged uid when sagents
    is root, a cleared environment, a read-only system, a private ``/tmp``, no network unless
    asked for, memory, CPU and process limits on its whole tree, and the whole tree killed on
    close. Host paths appear inside at their own paths.

    Attributes:
        network: False (the default): no network. True: any public host, through the
            gateway's egress proxy (never loopback, link-local, private or cloud metadata
            addresses); a :class:`~sagents.sandbox.NetworkPolicy`: what its ``allow`` lists
            (docs/mcp.md, "Sandboxed servers"). The server always has a network namespace of
            its own: the host's loopback and the gateway's ports are not in it.
        readable: Host paths shown read-only (a path through a symlink is shown at its own
            path and at its target's).
        writable: Host paths shown read-write.
        env: Names of host environment variables passed on when set (beside the entry's own
            ``env`` values and the locale variables); nothing else of the host's environment,
            and never sagents' own ``SAGENTS_*`` variables (the gateway's token among them).
        home: The server's own writable home directory (``HOME``, at ``/workspace`` inside:
            package caches of ``npx``/``uvx`` live there); None: ``<state dir>/mcp-home/<server>``.
        memory_mb: Memory of the whole tree in MiB (memory cgroup; RLIMIT_AS only where no
            cgroup is writable); None: no limit.
        cpu_seconds: CPU seconds per process (RLIMIT_CPU); None (the default): no limit, as a
            server lives long.
        cpu_cores: CPU share of the tree in cores (cgroup quota, else ``SCHED_IDLE``).
        max_processes: Processes of the tree (pids cgroup); None: no limit.
        uid: When sagents runs as root, the host uid the server runs as (for example the owner
            of the data it serves); None: as run_script's sandboxes decide (the home's owner,
            else an unprivileged uid of its own).
        config_file: The gateway's configuration file the entry comes from (the config loader
            sets it; a Python caller names its own): no ``writable`` path or ``home`` may
            contain it, so that the server cannot choose what the host runs next.
        home_bytes: The home's quota in bytes: the server is not started while its home holds
            it, and its tree is ended once the home passes it (the sandbox's workspace quota,
            ``SandboxLimits.workspace_bytes``); the config loader sets ``quotas.workspaceBytes``.
            None: no quota.
        config_has_secrets: Whether ``config_file`` holds secrets (values written into it, not
            ``${NAME}`` references; the loader decides): then no ``readable`` path may contain
            it either. True when unknown.
    """

    network: bool | NetworkPolicy = False
    readable: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    home: str | None = None
    memory_mb: int | None = DEFAULT_SERVER_MEMORY_MB
    cpu_seconds: int | None = None
    cpu_cores: float | None = 1.0
    max_processes: int | None = DEFAULT_SERVER_PROCESSES
    uid: int | None = None
    config_file: str | None = None
    config_has_secrets: bool = True
    home_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.config_file is not None and not self.config_file.startswith("/"):
            raise ValueError(f"sandbox config_file {self.config_file!r} must be absolute")
        for kind in ("readable", "writable"):
            for path in getattr(self, kind):
                if not path.startswith("/"):
                    raise ValueError(f"sandbox {kind} path {path!r} must be absolute")
                if str(PurePosixPath(path)) == "/":
                    raise ValueError(
                        f"sandbox {kind} path {path!r} would show the whole host: name the "
                        "directories the server needs"
                    )
        if self.home is not None and not self.home.startswith("/"):
            raise ValueError(f"sandbox home {self.home!r} must be absolute")
        for name in self.env:
            if not _ENV_NAME.match(name):
                raise ValueError(f"sandbox env entry {name!r} is not a variable name")
            if name.startswith("SAGENTS_"):
                raise ValueError(
                    f"sandbox env entry {name!r} is one of sagents' own variables (the gateway's "
                    "token among them): a sandboxed server never gets them; give the server its "
                    "own variable in the entry's env"
                )
        for name in ("memory_mb", "cpu_seconds", "cpu_cores", "max_processes", "home_bytes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"sandbox {name} must be positive or None, got {value!r}")
        if self.uid is not None and not 0 <= self.uid < 2**31:
            raise ValueError(f"sandbox uid must be a uid (0 to 2**31-1), got {self.uid!r}")
        # What the server may write it may also replace by a symlink before its next start:
        # no other bind may come from inside a writable path, or that symlink would choose it.
        writable = [str(PurePosixPath(p)) for p in self.writable]
        for kind in ("readable", "writable"):
            for path in getattr(self, kind):
                norm = str(PurePosixPath(path))
                for root in writable:
                    if norm != root and _inside(norm, root):
                        raise ValueError(
                            f"sandbox {kind} path {path!r} lies inside the writable path "
                            f"{root!r}: the server could replace it; list only {root!r}"
                        )


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
        sandbox: Run this stdio server in its own bubblewrap sandbox (see
            :class:`ServerSandbox`); None runs it on the host. Only for stdio servers.
        definition_pins: Where the definitions of the server's tools are pinned
            (:mod:`sagents.mcp._pins`; ``sagents serve`` gives its store's); None: not pinned.
        on_definition_change: What a changed definition does to its tool until accepted:
            ``ask`` (every call asked about), ``disable``, or ``accept`` (at once, unless the
            tool would gain ``readOnlyHint``).
        redactor: The secrets redacted from the server's results, progress messages and
            stderr log (docs/gateway.md, "Secrets"); None: nothing is.
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
    sandbox: ServerSandbox | None = None
    definition_pins: PinStore | None = field(default=None, compare=False, repr=False)
    on_definition_change: Literal["ask", "disable", "accept"] = "ask"
    redactor: Redactor | None = field(default=None, compare=False, repr=False)

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
