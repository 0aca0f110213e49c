"""MCP servers declared in a module, collected like ``@tool`` functions (docs/tools.md).

A module declares the MCP servers its tools come from, by name and parameters, the way it
declares local tools with ``@tool``::

    from mcp import StdioServerParameters
    from sagents.tool.mcp_tool_base import mcp_server

    FLEET = mcp_server("fleet", StdioServerParameters(command="python", args=["fleet.py"]))

Declaring connects nothing: the declaration is appended to a process-wide list
(:func:`discovered_mcp_servers`), and a manager connects the servers when told to, with
``await manager.collect_discovered_mcp_servers()``; the process default
(``get_tool_manager()``) is the one meant for it. A ``ToolManager()`` built anywhere else holds
only what it is given. Importing this module does not import the ``mcp`` SDK.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sagents.mcp._params import ServerParams
    from sagents.mcp._settings import ServerSettings

__all__ = ["MCPServerDeclaration", "discovered_mcp_servers", "mcp_server"]

logger = logging.getLogger(__name__)

_DISCOVERED_MCP_TOOLS: list[MCPServerDeclaration] = []  # the seed's name; the default reads it
_DISCOVERED_LOCK = threading.Lock()


@dataclass(frozen=True, kw_only=True)
class MCPServerDeclaration:
    """One MCP server a module declared.

    Attributes:
        name: The server's name (its tools are ``<name>__<tool>``).
        params: How to reach it (``mcp.StdioServerParameters``, ``SseServerParameters``,
            ``StreamableHttpServerParameters``).
        settings: Timeouts, concurrency, permission classes; None for the defaults.
        module: The declaring module's name, for messages.
    """

    name: str
    params: ServerParams
    settings: ServerSettings | None = None
    module: str = ""


def mcp_server(
    name: str,
    params: ServerParams,
    settings: ServerSettings | None = None,
    *,
    module: str = "",
) -> MCPServerDeclaration:
    """Declare an MCP server for the process-default manager to collect.

    Args:
        name: The server's name: letters, digits, ``-`` and single ``_`` (no ``__``).
        params: How to reach it.
        settings: Timeouts (seconds), concurrency, permission classes; None for the defaults.
        module: The declaring module (``__name__``), shown in messages.

    Returns:
        The declaration (also appended to :func:`discovered_mcp_servers`).

    Raises:
        ValueError: the name would make tool names ambiguous.
    """
    from sagents.mcp._convert import check_server_name  # the declaring module uses mcp anyway

    check_server_name(name)
    declared = MCPServerDeclaration(name=name, params=params, settings=settings, module=module)
    with _DISCOVERED_LOCK:
        _DISCOVERED_MCP_TOOLS.append(declared)
    return declared


def discovered_mcp_servers() -> list[MCPServerDeclaration]:
    """The MCP servers declared in this process so far (a copy, in order)."""
    with _DISCOVERED_LOCK:
        return list(_DISCOVERED_MCP_TOOLS)


def _not_collected(collected: set[int]) -> dict[str, tuple[ServerParams, ServerSettings]]:
    """The servers declared so far that are not in ``collected`` (``id()`` of declarations),
    now added to it: ``{name: (params, settings)}``. A name declared again is left out, logged:
    the first declaration keeps the name (``ToolManager.collect_discovered_mcp_servers``)."""
    from sagents.mcp._settings import ServerSettings

    pending: dict[str, tuple[ServerParams, ServerSettings]] = {}
    for declared in discovered_mcp_servers():
        if id(declared) in collected:
            continue
        collected.add(id(declared))
        if declared.name in pending:  # no declaration silently replaces another
            logger.error(
                "MCP server %r declared again (in %s) was not collected: the first keeps the name",
                declared.name,
                declared.module or "?",
            )
            continue
        pending[declared.name] = (declared.params, declared.settings or ServerSettings())
    return pending
