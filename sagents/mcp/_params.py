"""Connection parameters of MCP servers (docs/mcp.md).

stdio servers use the SDK's own :class:`mcp.StdioServerParameters`; remote servers use
:class:`SseServerParameters` (the HTTP+SSE transport of protocol 2024-11-05) or
:class:`StreamableHttpServerParameters` (Streamable HTTP, protocol 2025-03-26 and later); an
in-process server is the ``mcp`` server object itself (:class:`mcp.server.mcpserver.MCPServer` or
the low-level :class:`mcp.server.Server`), connected without a subprocess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import httpx2
from mcp import StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

__all__ = [
    "InProcessServer",
    "ServerParams",
    "SseServerParameters",
    "StdioServerParameters",
    "StreamableHttpServerParameters",
    "UpstreamOAuth",
    "describe_params",
]


def _headers_with_key(headers: Mapping[str, str] | None, api_key: str | None) -> dict[str, str]:
    merged = dict(headers or {})
    if api_key is not None and not any(k.lower() == "authorization" for k in merged):
        merged["Authorization"] = f"Bearer {api_key}"
    return merged


@dataclass(frozen=True, kw_only=True)
class SseServerParameters:
    """A remote server on the legacy HTTP+SSE transport (MCP spec 2024-11-05, "HTTP with SSE").

    Attributes:
        url: The SSE endpoint (for example ``https://mcp.example.com/sse``).
        headers: HTTP headers sent with every request.
        api_key: Sent as ``Authorization: Bearer <api_key>`` unless ``headers`` already has an
            ``Authorization`` header.
        timeout: Seconds for each HTTP operation other than reading the event stream.
        sse_read_timeout: Seconds to wait for the next event before the stream counts as lost.
    """

    url: str
    headers: Mapping[str, str] | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 10.0
    sse_read_timeout: float = 300.0

    @property
    def effective_headers(self) -> dict[str, str]:
        """``headers`` plus the ``Authorization`` header made from ``api_key``."""
        return _headers_with_key(self.headers, self.api_key)


@dataclass(frozen=True, kw_only=True)
class UpstreamOAuth:
    """A remote server that needs an OAuth login per principal (``"auth": "oauth"``,
    docs/oauth.md): the gateway is an OAuth client of it through the MCP SDK's client support.

    Attributes:
        client_id: ``clientId``: a client registered beforehand with the server's authorization
            server (a public client); None registers one dynamically (RFC 7591) when offered.
        scopes: ``scopes`` asked for; empty: what the server's metadata says.
    """

    client_id: str | None = None
    scopes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class StreamableHttpServerParameters:
    """A remote server on the Streamable HTTP transport (MCP spec 2025-03-26 and later).

    Attributes:
        url: The MCP endpoint (for example ``https://mcp.example.com/mcp``).
        headers: HTTP headers sent with every request.
        api_key: Sent as ``Authorization: Bearer <api_key>`` unless ``headers`` already has an
            ``Authorization`` header.
        timeout: Seconds for connecting and for each HTTP write; reads are bounded by the
            supervisor's call timeouts instead.
        oauth: The server needs an OAuth login per principal (docs/oauth.md); the gateway
            connects each principal with its own ``auth``.
        auth: The ``httpx2.Auth`` of the connection (for instance the MCP SDK's
            ``OAuthClientProvider``), or a callable making a new one for each connection;
            None sends only ``headers``.
    """

    url: str
    headers: Mapping[str, str] | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 30.0
    oauth: UpstreamOAuth | None = None
    auth: httpx2.Auth | Callable[[], httpx2.Auth] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def effective_headers(self) -> dict[str, str]:
        """``headers`` plus the ``Authorization`` header made from ``api_key``."""
        return _headers_with_key(self.headers, self.api_key)


InProcessServer: TypeAlias = "MCPServer[Any] | Server[Any]"
"""An ``mcp`` server object served in this process, without a subprocess or a socket."""

ServerParams: TypeAlias = (
    "StdioServerParameters | SseServerParameters | StreamableHttpServerParameters | "
    "MCPServer[Any] | Server[Any]"
)
"""Everything :meth:`sagents.mcp.MCPSupervisor.add_server` accepts as ``params``."""


def describe_params(params: ServerParams) -> str:
    """A one-line, secret-free description of ``params`` for statuses and logs.

    Returns:
        ``stdio: <command> <args...>``, ``sse: <url>``, ``http: <url>`` or ``in-process: <name>``
        (headers, environment and API keys are never included).
    """
    if isinstance(params, StdioServerParameters):
        return "stdio: " + " ".join([params.command, *params.args])
    if isinstance(params, SseServerParameters):
        return f"sse: {params.url}"
    if isinstance(params, StreamableHttpServerParameters):
        return f"http: {params.url}"
    return f"in-process: {params.name}"
