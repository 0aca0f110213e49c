"""An upstream MCP server that requires OAuth access tokens, for the outbound OAuth tests: the
MCP SDK's own server (``MCPServer`` with its ``AuthSettings`` and a token verifier) on
streamable HTTP on loopback, accepting the JWT access tokens of a real authorization server
(tests/gateway/oauth_peer.py) issued for its URL, checked with PyJWT against the issuer's
JWKS. Its tool ``whoami`` answers the subject of the token that called it.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import jwt
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp

from sagents.gateway._http_server import serve_asgi
from sagents.gateway._settings import GatewaySettings


@dataclass
class Upstream:
    """The running server: its MCP URL, the (subject, token digest) of each call, and the
    digests of the tokens it no longer accepts (a resource server's own revocation list)."""

    url: str
    calls: list[tuple[str, str]] = field(default_factory=list)
    revoked: set[str] = field(default_factory=set)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


class _JwtVerifier:
    def __init__(self, issuer: str, upstream: Upstream, keys: jwt.PyJWKSet) -> None:
        self.issuer = issuer
        self.upstream = upstream
        self.keys = keys

    async def verify_token(self, token: str) -> AccessToken | None:
        if digest(token) in self.upstream.revoked:
            return None
        try:
            kid = str(jwt.get_unverified_header(token).get("kid"))
            claims: dict[str, Any] = jwt.decode(
                token,
                self.keys[kid].key,
                algorithms=["ES256"],
                audience=self.upstream.url,
                issuer=self.issuer,
            )
        except (jwt.PyJWTError, KeyError):
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims["exp"]),
            resource=self.upstream.url,
            subject=str(claims["sub"]),
        )


@asynccontextmanager
async def protected_server(issuer: str) -> AsyncIterator[Upstream]:
    """Serve the protected server until the block ends; yields it."""
    async with httpx2.AsyncClient() as http:
        metadata = (await http.get(f"{issuer}/.well-known/openid-configuration")).json()
        keys = jwt.PyJWKSet.from_dict((await http.get(metadata["jwks_uri"])).json())
    upstream = Upstream(url="")

    def build(port: int) -> ASGIApp:
        upstream.url = f"http://127.0.0.1:{port}/mcp"
        server = MCPServer(
            "protected",
            token_verifier=_JwtVerifier(issuer, upstream, keys),
            auth=AuthSettings(
                issuer_url=issuer,
                resource_server_url=upstream.url,
                required_scopes=["mcp"],
                validate_token_resource=False,  # the verifier checks the audience itself
            ),
        )

        @server.tool()
        def whoami() -> str:
            """The subject of the token of this call."""
            token = get_access_token()
            assert token is not None
            assert token.subject is not None
            upstream.calls.append((token.subject, digest(token.token)))
            return token.subject

        return server.streamable_http_app()

    settings = GatewaySettings(transport="http", host="127.0.0.1", port=0)
    async with anyio.create_task_group() as tg:
        await tg.start(serve_asgi, build, settings)
        yield upstream
        tg.cancel_scope.cancel()
