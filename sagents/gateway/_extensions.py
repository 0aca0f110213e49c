"""Installing ``mcp`` SDK extensions on the gateway's low-level server.

The SDK's :class:`~mcp.server.extension.Extension` is consumed by its high-level ``MCPServer``;
the gateway is built on the low-level ``Server``, so :func:`install_extension` does the same
for it: registers each extension method with the server's dispatch (restricted to the
binding's protocol versions, like ``MCPServer``), advertises the extension's settings under
``capabilities.extensions`` (``initialize`` and ``server/discover``), and folds its
``tools/call`` interceptor around the server's handler. Extensions contributing tools or
resources are not supported here (the gateway's tools and resources come from its provider).
"""

from __future__ import annotations

from typing import Any

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, compose_tool_call_handler
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

__all__ = ["install_extension", "request_extensions"]

_METHOD_NOT_FOUND = -32601  # JSON-RPC 2.0


def install_extension(server: Server[Any], extension: Extension) -> None:
    """Register ``extension``'s methods and interceptor on ``server`` and advertise it.

    Raises:
        ValueError: the extension contributes tools or resources, or binds a method the
            server already serves.
    """
    if extension.tools() or extension.resources():
        raise ValueError(
            f"extension {extension.identifier!r} contributes tools or resources; the gateway "
            "serves only its provider's"
        )
    for binding in extension.methods():
        if server.get_request_handler(binding.method) is not None:
            raise ValueError(
                f"extension {extension.identifier!r} binds {binding.method!r}, which is "
                "already served"
            )
        server.add_request_handler(binding.method, binding.params_type, _gated(binding))
    if type(extension).intercept_tool_call is not Extension.intercept_tool_call:
        entry = server.get_request_handler("tools/call")
        if entry is None:
            raise ValueError("the server has no tools/call handler to intercept")
        server.add_request_handler(
            "tools/call",
            mt.CallToolRequestParams,
            compose_tool_call_handler([extension], entry.handler),
        )
    server.extensions[extension.identifier] = extension.settings()


def _gated(binding: MethodBinding) -> Any:
    versions = binding.protocol_versions
    if versions is None:
        return binding.handler

    async def gated(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        if ctx.protocol_version not in versions:
            raise MCPError(_METHOD_NOT_FOUND, "Method not found", data=binding.method)
        return await binding.handler(ctx, params)

    return gated


def request_extensions(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The extensions the client declared: in this request's ``_meta`` capabilities
    (2026-07-28) or at ``initialize`` (earlier versions)."""
    capabilities = ctx.session.client_capabilities
    declared = capabilities.extensions if capabilities is not None else None
    return dict(declared or {})
