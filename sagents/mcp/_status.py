"""Status values of upstream servers, as :meth:`sagents.mcp.MCPSupervisor.status` reports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ServerState", "ServerStatus", "WithheldTool"]

ServerState = Literal["connecting", "ready", "failed", "restarting", "closed"]
"""``connecting``: first start and handshake. ``ready``: tools listed, calls go through.
``failed``: the last start failed, the server died or it did not answer a liveness ping; it is
restarted in the background after a backoff (calls meanwhile wait for that restart).
``restarting``: a restart is under way. ``closed``: removed or the supervisor closed."""


@dataclass(frozen=True, kw_only=True)
class WithheldTool:
    """An upstream tool that is not offered, and why (for example an unresolvable ``$ref``)."""

    name: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class ServerStatus:
    """One upstream server's state.

    Attributes:
        name: The registered server name.
        state: See :data:`ServerState`.
        transport: A secret-free description (``stdio: cmd args``, ``http: url``, ...).
        protocol_version: The negotiated MCP protocol version, once connected.
        server_name: The server's self-reported name (``serverInfo.name``), if any.
        server_version: The server's self-reported version, if any.
        last_error: The last connect or connection failure, or None.
        tools: Registered names (``<server>__<tool>``) of the offered tools.
        withheld: Tools not offered, with reasons.
        restarts: How many times the server was (re)started after the first start.
        pid: The stdio server's process id while it runs.
        exit_code: How the stdio server's last run ended, once it ended by itself: its exit
            status, or minus the signal that ended it (as :attr:`subprocess.Popen.returncode`).
        log_path: The stdio server's stderr log, or None for other transports.
        liveness_restarts: How many times the server was restarted because it did not answer
            a liveness ``ping`` (frozen, deadlocked).
        last_restart_reason: Why the connection was last lost (kept after the restart).
        sandboxed: True for a stdio server that runs in its own bubblewrap sandbox.
        needs_login: The server (``"auth": "oauth"``) refused the connection for want of a
            login (docs/oauth.md); ``last_error`` says how to give it.
    """

    name: str
    state: ServerState
    transport: str
    protocol_version: str | None = None
    server_name: str | None = None
    server_version: str | None = None
    last_error: str | None = None
    tools: tuple[str, ...] = ()
    withheld: tuple[WithheldTool, ...] = ()
    restarts: int = 0
    pid: int | None = None
    exit_code: int | None = None
    log_path: str | None = None
    liveness_restarts: int = 0
    last_restart_reason: str | None = None
    sandboxed: bool = False
    needs_login: bool = False
