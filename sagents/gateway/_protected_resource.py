"""The gateway as a protected resource over HTTP: its metadata and its challenges.

- Protected Resource Metadata (RFC 9728, checked by the ``mcp`` SDK's model) is
  served without a token at ``/.well-known/oauth-protected-resource/mcp`` (RFC 9728 §3.1: the
  resource's path after the well-known prefix) and at ``/.well-known/oauth-protected-resource``
  (the root, where MCP clients look next: MCP 2025-11-25 "Authorization", "Protected Resource
  Metadata Discovery Requirements"), with CORS for browser-based clients (the SDK's
  ``cors_middleware``). It names the configured authorization server and the scopes every token
  needs.
- A request without a token gets 401 with ``WWW-Authenticate: Bearer resource_metadata="...",
  scope="..."``; a bad token 401 with ``error="invalid_token"`` and the reason; a token without
  the required scopes 403 with ``error="insufficient_scope"`` (RFC 6750 §3, MCP "Error
  Handling" and "Scope Challenge Handling").
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from sagents.config._oauth import OAuthConfig
from sagents.gateway._oauth import AccessTokenVerifier

__all__ = ["RESOURCE_METADATA_PATH", "ProtectedResource", "protected_resource"]

RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
"""The root RFC 9728 metadata path (the resource's own path is appended for the other one)."""


@dataclass(frozen=True, kw_only=True)
class ProtectedResource:
    """This gateway's resource: what it tells clients and how it checks their tokens.

    Attributes:
        resource: The resource identifier (the served ``/mcp`` URL, RFC 8707).
        verifier: Checks access tokens.
        required_scopes: Scopes every token must hold.
        authorization_servers: Issuers named in the metadata.
    """

    resource: str
    verifier: AccessTokenVerifier
    required_scopes: tuple[str, ...]
    authorization_servers: tuple[str, ...]

    @property
    def metadata_url(self) -> str:
        """The resource's metadata URL (RFC 9728 §3.1), named in every challenge."""
        return str(build_resource_metadata_url(AnyHttpUrl(self.resource)))

    @property
    def metadata_paths(self) -> tuple[str, ...]:
        """The paths the metadata is served at."""
        own = urlsplit(self.metadata_url).path
        return (own, RESOURCE_METADATA_PATH) if own != RESOURCE_METADATA_PATH else (own,)

    def challenge(self, *, error: str | None = None, description: str | None = None) -> bytes:
        """A ``WWW-Authenticate`` value: ``Bearer`` with ``error`` and ``error_description``
        when given, ``resource_metadata``, and ``scope`` when scopes are required."""
        parts = []
        if error is not None:
            parts.append(f'error="{error}"')
            if description:
                parts.append(f'error_description="{_quotable(description)}"')
        parts.append(f'resource_metadata="{self.metadata_url}"')
        if self.required_scopes:
            parts.append(f'scope="{" ".join(self.required_scopes)}"')
        return ("Bearer " + ", ".join(parts)).encode()

    def metadata_app(self) -> ASGIApp:
        """The ASGI app answering the metadata paths (GET, no token)."""
        metadata = ProtectedResourceMetadata(
            resource=AnyHttpUrl(self.resource),
            authorization_servers=[AnyHttpUrl(s) for s in self.authorization_servers],
            scopes_supported=list(self.required_scopes) or None,
            resource_name="sagents",
        )
        document = metadata.model_dump(mode="json", exclude_none=True)
        # The model's URL type writes "https://idp.example.com" as "https://idp.example.com/",
        # and clients compare the issuer exactly (RFC 8414 §3.3): keep the configured spelling.
        document["resource"] = self.resource
        document["authorization_servers"] = list(self.authorization_servers)

        async def answer(request: Request) -> Response:
            return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

        # readable by browser-based clients of any origin, as the SDK serves its own
        endpoint = cors_middleware(answer, ["GET", "OPTIONS"])
        return Starlette(
            routes=[
                Route(path, endpoint, methods=["GET", "OPTIONS"]) for path in self.metadata_paths
            ]
        )


def protected_resource(config: OAuthConfig, resource: str) -> ProtectedResource:
    """The protected resource at ``resource`` under ``config`` (audience: ``config.audience``,
    else ``resource``)."""
    return ProtectedResource(
        resource=resource,
        verifier=AccessTokenVerifier(config, audience=config.audience or resource),
        required_scopes=config.required_scopes,
        authorization_servers=(config.issuer,),
    )


def _quotable(text: str) -> str:
    """``text`` in the characters RFC 6750 §3 allows in ``error_description`` (%x20-21,
    %x23-5B, %x5D-7E): quotes and backslashes become ``'`` and ``/``, the rest ``?``."""
    text = text.replace('"', "'").replace("\\", "/")
    return "".join(c if " " <= c <= "~" else "?" for c in text)
