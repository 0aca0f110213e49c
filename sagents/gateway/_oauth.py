"""``sagents serve`` as an OAuth 2.1 resource server (docs/gateway.md, "Authorization").

Follows the MCP authorization specification (2025-11-25 "Authorization", sections "Token
Handling" and "Access Token Privilege Restriction"; 2026-07-28 "Authorization", "Resource
Parameter Implementation"): an access token is accepted only when its issuer is the configured
authorization server and it was issued for this resource (RFC 8707 §2: ``aud`` names the
resource), checked as

- a JWT (RFC 9068) against the issuer's JWKS, discovered from its metadata (RFC 8414 §3, then
  OpenID Connect Discovery; the metadata's ``issuer`` must be the configured one), by PyJWT:
  the algorithm from an allow-list of asymmetric ones (``none`` and HMAC never), the key chosen
  by ``kid``, ``iss``, ``aud``, ``exp``, ``nbf`` and ``iat`` checked with a bounded leeway, and
  ``exp``, ``iss``, ``aud``, ``sub`` required; the JWKS is cached for :data:`JWKS_MAX_AGE_S` and
  fetched again for an unknown ``kid`` (the issuer rotated its keys) at most every
  :data:`JWKS_MIN_REFRESH_S`;
- or, for an opaque token, by token introspection (RFC 7662) with the gateway's client
  credentials: ``active``, ``iss``, ``aud``, ``exp``, ``nbf``, ``sub`` checked the same way; an
  answer is kept at most :data:`INTROSPECTION_CACHE_S`.

A token longer than :data:`MAX_TOKEN_CHARS` is refused before it is parsed. A bad token is a
:class:`TokenRejected` (401 ``invalid_token`` with the reason); an authorization server that
cannot be reached is a :class:`AuthorizationServerUnavailable` (503, one log line per attempt,
tried again after :data:`UNREACHABLE_RETRY_S`): tokens are refused, never let through.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import jwt

from sagents.config._oauth import OAuthConfig, check_url
from sagents.errors import ConfigError

__all__ = [
    "FETCH_TIMEOUT_S",
    "INTROSPECTION_CACHE_S",
    "JWKS_MAX_AGE_S",
    "JWKS_MIN_REFRESH_S",
    "MAX_TOKEN_CHARS",
    "UNREACHABLE_RETRY_S",
    "AccessTokenVerifier",
    "AuthorizationServerUnavailable",
    "TokenInfo",
    "TokenRejected",
    "metadata_urls",
]

logger = logging.getLogger(__name__)

MAX_TOKEN_CHARS = 8192  # longer bearer tokens are refused unparsed
JWKS_MAX_AGE_S = 300.0  # the issuer's keys are fetched again at least this often
JWKS_MIN_REFRESH_S = 30.0  # an unknown kid fetches the keys again at most this often
UNREACHABLE_RETRY_S = 5.0  # after a failed fetch, tokens are refused this long untried
INTROSPECTION_CACHE_S = 30.0  # an introspection answer is reused at most this long
_INTROSPECTION_CACHE_SIZE = 1024  # answers kept, least recently used dropped
FETCH_TIMEOUT_S = 10.0  # seconds for one whole request to the authorization server
_MAX_DOCUMENT_BYTES = 1 << 20  # metadata, JWKS and introspection answers are smaller


class TokenRejected(Exception):
    """An access token that is not accepted; ``str()`` is the reason told to the client."""


ACCESS_TOKEN_TYPES = ("at+jwt", "jwt")
"""The JWT ``typ`` headers taken for an access token (``application/`` prefix allowed): RFC
9068 §2.1's ``at+jwt``, and ``JWT``, which Keycloak and Entra ID send; any other type (a DPoP
proof, a logout token, an event token...) is refused (RFC 8725 §3.11). A token without ``typ``
is taken (many issuers send none); its ``aud`` keeps ID tokens out."""


class AuthorizationServerUnavailable(Exception):
    """The authorization server (its metadata, keys or introspection) cannot be used now."""


@dataclass(frozen=True, kw_only=True)
class TokenInfo:
    """What an accepted access token says.

    Attributes:
        subject: ``sub``: the resource owner, unique per issuer.
        issuer: ``iss`` (the configured issuer).
        scopes: The token's scopes (``scope``, or a ``scp`` list).
        expires_at: ``exp`` in seconds since the epoch, if any.
    """

    subject: str
    issuer: str
    scopes: frozenset[str]
    expires_at: float | None = None


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata is looked for, in the MCP specification's order (2025-11-25
    "Authorization Server Metadata Discovery"): RFC 8414 with path insertion, OpenID Connect
    Discovery with path insertion, then appended (for an issuer with a path)."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    urls = [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
    ]
    if path:
        urls.append(f"{origin}{path}/.well-known/openid-configuration")
    return urls


class AccessTokenVerifier:
    """Checks access tokens for one resource (see the module docstring).

    Args:
        config: The ``oauth`` section.
        audience: The audience tokens must name (``config.audience``, else this resource's
            URL).
        clock: Seconds since the epoch (``exp``, ``nbf`` of introspection answers).
        monotonic: Monotonic seconds (cache ages); tests pass their own.
        transport: The HTTP transport to the authorization server (tests); None: the network.
    """

    def __init__(
        self,
        config: OAuthConfig,
        *,
        audience: str,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.audience = audience
        self._clock = clock
        self._monotonic = monotonic
        self._transport = transport
        self._lock = anyio.Lock()
        self._metadata: dict[str, Any] | None = None
        self._keys: list[dict[str, Any]] | None = None
        self._fetched_at = 0.0
        self._failed_at: float | None = None
        self._introspected: OrderedDict[str, tuple[TokenInfo, float]] = OrderedDict()

    async def verify(self, token: str) -> TokenInfo:
        """The token's subject, issuer and scopes.

        Raises:
            TokenRejected: the token is not accepted (the message says why).
            AuthorizationServerUnavailable: the issuer's keys or introspection cannot be
                reached now (logged).
        """
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenRejected(f"the token is longer than {MAX_TOKEN_CHARS} characters")
        if token.count(".") == 2:
            return await self._verify_jwt(token)
        return await self._introspect(token)

    # JWT ------------------------------------------------------------------------------------

    async def _verify_jwt(self, token: str) -> TokenInfo:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRejected("the token is not a well-formed JWT") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.config.algorithms:
            raise TokenRejected(f"the signing algorithm {alg!r} is not accepted")
        typ = header.get("typ")
        if typ is not None and (
            not isinstance(typ, str)
            or typ.lower().removeprefix("application/") not in ACCESS_TOKEN_TYPES
        ):
            raise TokenRejected(f"the token is not an access token (typ {typ!r})")
        kid = header.get("kid")
        jwk = await self._key(kid if isinstance(kid, str) else None, alg)
        try:
            key = jwt.PyJWK(jwk, algorithm=alg)
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.config.issuer,
                leeway=self.config.leeway_s,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRejected("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRejected("the token is not valid yet (nbf)") from None
        except jwt.InvalidAudienceError:
            raise TokenRejected("the token was not issued for this resource (aud)") from None
        except jwt.InvalidIssuerError:
            raise TokenRejected("the token was not issued by the configured issuer") from None
        except jwt.InvalidSignatureError:
            raise TokenRejected("the token's signature does not verify") from None
        except jwt.MissingRequiredClaimError as error:
            raise TokenRejected(f"the token has no {error.claim!r} claim") from None
        except (jwt.PyJWTError, jwt.PyJWKError) as error:
            raise TokenRejected(f"the token is not valid ({type(error).__name__})") from None
        return _token_info(claims, self.config.issuer)

    async def _key(self, kid: str | None, alg: str) -> dict[str, Any]:
        """The issuer's JWK for a token's ``kid``, fetching the JWKS when it is old, or when
        the kid is unknown and the last fetch is not recent (a rotation)."""
        if self._keys is None or self._monotonic() - self._fetched_at > JWKS_MAX_AGE_S:
            await self._refresh_keys()
        found = _find_key(self._keys or [], kid, alg)
        if found is None and self._monotonic() - self._fetched_at >= JWKS_MIN_REFRESH_S:
            await self._refresh_keys()
            found = _find_key(self._keys or [], kid, alg)
        if found is None:
            raise TokenRejected(f"no key of the issuer matches the token (kid {kid!r})")
        return found

    async def _refresh_keys(self) -> None:
        fetched_at = self._fetched_at
        async with self._lock:
            if self._keys is not None and self._fetched_at != fetched_at:
                return  # another request fetched them while this one waited
            metadata = await self.issuer_metadata()
            try:
                uri = metadata.get("jwks_uri")
                if not isinstance(uri, str):
                    raise self._unavailable("its metadata has no jwks_uri")
                document = await self._fetch("GET", self._endpoint(uri, "jwks_uri"))
                keys = document.get("keys")
                if not isinstance(keys, list):
                    raise self._unavailable("its JWKS has no 'keys' list")
            except AuthorizationServerUnavailable:
                self._metadata = None  # discovered again next time: it may have moved its keys
                raise
            self._keys = [k for k in keys if isinstance(k, dict)]
            self._fetched_at = self._monotonic()

    # Introspection --------------------------------------------------------------------------

    async def _introspect(self, token: str) -> TokenInfo:
        if self.config.client_id is None:
            raise TokenRejected(
                "the token is not a JWT, and this gateway has no introspection client"
            )
        digest = hashlib.sha256(token.encode()).hexdigest()
        cached = self._introspected.get(digest)
        if cached is not None and self._monotonic() < cached[1]:
            self._introspected.move_to_end(digest)
            return cached[0]
        endpoint = self.config.introspection_endpoint
        if endpoint is None:
            found = (await self.issuer_metadata()).get("introspection_endpoint")
            if not isinstance(found, str):
                raise self._unavailable("its metadata has no introspection_endpoint")
            endpoint = self._endpoint(found, "introspection_endpoint")
        answer = await self._fetch(
            "POST",
            endpoint,
            data={"token": token, "token_type_hint": "access_token"},
            auth=(self.config.client_id, self.config.client_secret or ""),
        )
        info = self._introspected_info(answer)
        keep = INTROSPECTION_CACHE_S
        if info.expires_at is not None:
            keep = min(keep, info.expires_at - self._clock())
        self._introspected[digest] = (info, self._monotonic() + keep)
        while len(self._introspected) > _INTROSPECTION_CACHE_SIZE:
            self._introspected.popitem(last=False)
        return info

    def _introspected_info(self, answer: Mapping[str, Any]) -> TokenInfo:
        """Check an RFC 7662 answer as a JWT's claims are checked."""
        if answer.get("active") is not True:
            raise TokenRejected("the token is not active (introspection)")
        issuer = answer.get("iss", self.config.issuer)
        if issuer != self.config.issuer:
            raise TokenRejected("the token was not issued by the configured issuer")
        audience = answer.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience
        if not isinstance(audiences, list) or self.audience not in audiences:
            raise TokenRejected("the token was not issued for this resource (aud)")
        now, leeway = self._clock(), self.config.leeway_s
        expires = answer.get("exp")
        if isinstance(expires, int | float) and expires + leeway < now:
            raise TokenRejected("the token has expired")
        not_before = answer.get("nbf")
        if isinstance(not_before, int | float) and not_before - leeway > now:
            raise TokenRejected("the token is not valid yet (nbf)")
        return _token_info(dict(answer), self.config.issuer)

    # The authorization server ---------------------------------------------------------------

    async def issuer_metadata(self) -> dict[str, Any]:
        """The issuer's metadata (RFC 8414 or OpenID Connect Discovery), fetched once.

        Raises:
            AuthorizationServerUnavailable: none answers, or one names another issuer.
        """
        if self._metadata is not None:
            return self._metadata
        for url in metadata_urls(self.config.issuer):
            document: dict[str, Any] | None = await self._fetch("GET", url, missing_ok=True)
            if document is None:
                continue
            if document.get("issuer") != self.config.issuer:
                raise self._unavailable(
                    f"the metadata at {url} names the issuer {document.get('issuer')!r}"
                )
            self._metadata = document
            return document
        raise self._unavailable("none of its metadata URLs answers")

    def _endpoint(self, url: str, name: str) -> str:
        try:
            return check_url(url, key=name)
        except ConfigError as error:
            raise self._unavailable(f"its {name} {url!r} is refused: {error.message}") from None

    async def _fetch(
        self,
        method: str,
        url: str,
        *,
        missing_ok: bool = False,
        data: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
    ) -> Any:
        """A JSON object from the authorization server (None for a 4xx when ``missing_ok``).

        Raises:
            AuthorizationServerUnavailable: not reached, not 200, not a JSON object; also at
                once, untried, within :data:`UNREACHABLE_RETRY_S` of the last failure.
        """
        if (
            self._failed_at is not None
            and self._monotonic() - self._failed_at < UNREACHABLE_RETRY_S
        ):
            raise AuthorizationServerUnavailable(
                f"the authorization server {self.config.issuer!r} failed moments ago"
            )
        try:
            # the whole request is bounded, not each read: a server sending a byte at a time
            # would otherwise hold every token check waiting on it
            with anyio.fail_after(FETCH_TIMEOUT_S):
                async with (
                    httpx2.AsyncClient(
                        transport=self._transport, timeout=FETCH_TIMEOUT_S, follow_redirects=False
                    ) as client,
                    client.stream(
                        method, url, data=data, auth=auth, headers={"Accept": "application/json"}
                    ) as response,
                ):
                    if missing_ok and 400 <= response.status_code < 500:
                        return None  # not there: the next metadata URL may be
                    if response.status_code != 200:
                        raise self._unavailable(f"{url} answered HTTP {response.status_code}")
                    body = b""
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > _MAX_DOCUMENT_BYTES:
                            raise self._unavailable(f"{url} answered more than 1 MiB")
        except TimeoutError:
            raise self._unavailable(
                f"{url} did not answer within {FETCH_TIMEOUT_S:g} seconds"
            ) from None
        except httpx2.HTTPError as error:
            raise self._unavailable(f"{url} cannot be reached ({type(error).__name__})") from None
        try:
            document = json.loads(body)
        except ValueError:
            raise self._unavailable(f"{url} did not answer JSON") from None
        if not isinstance(document, dict):
            raise self._unavailable(f"{url} did not answer a JSON object")
        self._failed_at = None
        return document

    def _unavailable(self, why: str) -> AuthorizationServerUnavailable:
        self._failed_at = self._monotonic()
        logger.warning(
            "oauth: the authorization server %r cannot be used: %s; access tokens are refused "
            "until it answers",
            self.config.issuer,
            why,
        )
        return AuthorizationServerUnavailable(
            f"the authorization server {self.config.issuer!r} cannot be used: {why}"
        )


def _find_key(keys: list[dict[str, Any]], kid: str | None, alg: str) -> dict[str, Any] | None:
    """The signing key for ``kid`` (the only signing key when the token names none)."""
    usable = [
        k
        for k in keys
        if k.get("use", "sig") == "sig" and k.get("alg", alg) == alg and "d" not in k
    ]
    if kid is not None:
        return next((k for k in usable if k.get("kid") == kid), None)
    return usable[0] if len(usable) == 1 else None


def _token_info(claims: Mapping[str, Any], issuer: str) -> TokenInfo:
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise TokenRejected("the token names no subject (sub)")
    scope = claims.get("scope")
    if isinstance(scope, str):
        scopes = frozenset(scope.split())
    else:
        listed = claims.get("scp")  # a list, as some issuers write it
        scopes = (
            frozenset(s for s in listed if isinstance(s, str))
            if isinstance(listed, list)
            else frozenset()
        )
    expires = claims.get("exp")
    try:
        expires_at = float(expires) if isinstance(expires, int | float) else None
    except OverflowError:  # an integer beyond any float: JSON numbers have no bound
        raise TokenRejected("the token's expiry (exp) is out of range") from None
    return TokenInfo(subject=subject, issuer=issuer, scopes=scopes, expires_at=expires_at)
