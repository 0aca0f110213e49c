"""The ``oauth`` section: ``sagents serve`` as an OAuth 2.1 resource server (docs/gateway.md,
"Authorization"; docs/configuration.md, "oauth").

Resolved into a plain :class:`OAuthConfig` with every rule that can be checked without the
network: the issuer and every endpoint use ``https`` (``http`` only on a loopback host, as
the MCP authorization specification's "Communication Security" asks), the algorithms are
asymmetric ones (``none`` and the HMAC family never: a JWKS holds public keys), the leeway is
bounded, and the introspection client's secret comes from the environment, never the file.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from sagents.config._models import OAuthParams
from sagents.errors import ConfigError

__all__ = [
    "ALLOWED_ALGORITHMS",
    "DEFAULT_LEEWAY_S",
    "MAX_LEEWAY_S",
    "OAuthConfig",
    "is_loopback_url",
    "oauth_config",
]

ALLOWED_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
"""The JWS algorithms an access token may be signed with (asymmetric only; the default)."""
DEFAULT_LEEWAY_S = 60.0  # seconds of clock difference allowed on exp, nbf and iat
MAX_LEEWAY_S = 300.0  # the most ``leewaySec`` may give: an expired token stays expired


@dataclass(frozen=True, kw_only=True)
class OAuthConfig:
    """The ``oauth`` section, checked.

    Attributes:
        issuer: The authorization server's issuer identifier (RFC 8414 §2), exactly as its
            metadata and tokens spell it.
        audience: The audience an access token must name (RFC 8707); None: the served
            ``/mcp`` URL (from ``public_url``, else the bound address).
        required_scopes: Scopes every access token must hold (else 403 ``insufficient_scope``).
        public_url: The URL clients reach the gateway at (``https://gw.example.com``, without
            a trailing slash), or None.
        introspection_endpoint: RFC 7662 endpoint for opaque tokens; None: the issuer's
            metadata's, when ``client_id`` is set.
        client_id: The gateway's client id at the introspection endpoint; None: opaque tokens
            are refused.
        client_secret: Its secret (from ``clientSecretEnv``).
        algorithms: JWS algorithms accepted.
        leeway_s: Seconds of clock difference allowed on ``exp``/``nbf``/``iat``.
    """

    issuer: str
    audience: str | None = None
    required_scopes: tuple[str, ...] = ()
    public_url: str | None = None
    introspection_endpoint: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    algorithms: tuple[str, ...] = ALLOWED_ALGORITHMS
    leeway_s: float = DEFAULT_LEEWAY_S


def is_loopback_url(url: str) -> bool:
    """Whether ``url``'s host is ``localhost`` or a loopback address."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(value: str, *, key: str, file: str | None = None) -> str:
    """``value`` as an absolute ``https`` URL (``http`` on a loopback host) without a query or
    fragment, unchanged (an issuer is compared exactly, RFC 8414 §3.3).

    Raises:
        ConfigError: anything else, naming ``key``.
    """
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError(f"{value!r} is not an absolute http(s) URL", file=file, key=key)
    if parts.query or parts.fragment:
        raise ConfigError(f"{value!r} must not have a query or fragment", file=file, key=key)
    if parts.scheme == "http" and not is_loopback_url(value):
        raise ConfigError(
            f"{value!r} must use https (plain http only on a loopback host)",
            file=file,
            key=key,
            hint="tokens and keys must not travel in clear text (MCP authorization, "
            "'Communication Security')",
        )
    return value


def oauth_config(
    params: OAuthParams, *, env: Mapping[str, str], file: str | None = None
) -> OAuthConfig:
    """Check and resolve the ``oauth`` section.

    Raises:
        ConfigError: naming the key at fault (see the module docstring).
    """
    issuer = check_url(params.issuer, key="oauth.issuer", file=file)
    public_url = (
        check_url(params.public_url, key="oauth.publicUrl", file=file).rstrip("/")
        if params.public_url
        else None
    )
    endpoint = (
        check_url(params.introspection_endpoint, key="oauth.introspectionEndpoint", file=file)
        if params.introspection_endpoint
        else None
    )
    if endpoint is not None and params.client_id is None:
        raise ConfigError(
            "an introspection endpoint needs the gateway's client credentials",
            file=file,
            key="oauth.introspectionEndpoint",
            hint="set oauth.clientId and oauth.clientSecretEnv (RFC 7662 §2.1)",
        )
    secret = None
    if params.client_id is not None:
        if params.client_secret_env is None:
            raise ConfigError(
                "oauth.clientId needs oauth.clientSecretEnv: the environment variable "
                "holding the client's secret",
                file=file,
                key="oauth.clientSecretEnv",
            )
        secret = env.get(params.client_secret_env) or None
        if secret is None:
            raise ConfigError(
                f"the environment variable {params.client_secret_env!r} is not set",
                file=file,
                key="oauth.clientSecretEnv",
            )
    algorithms = tuple(params.algorithms) if params.algorithms is not None else ALLOWED_ALGORITHMS
    refused = [name for name in algorithms if name not in ALLOWED_ALGORITHMS]
    if refused or not algorithms:
        raise ConfigError(
            f"algorithms {refused!r} are not accepted" if refused else "no algorithm is listed",
            file=file,
            key="oauth.algorithms",
            hint=f"list some of {', '.join(ALLOWED_ALGORITHMS)} ('none' and HMAC never: the "
            "keys come from the issuer's public JWKS)",
        )
    leeway = DEFAULT_LEEWAY_S if params.leeway_seconds is None else params.leeway_seconds
    if leeway > MAX_LEEWAY_S:
        raise ConfigError(
            f"a leeway of {leeway:g} s is more than {MAX_LEEWAY_S:g} s",
            file=file,
            key="oauth.leewaySec",
        )
    scopes = tuple(params.required_scopes)
    if any(not scope or " " in scope for scope in scopes):
        raise ConfigError(
            "a scope is one non-empty word (RFC 6749 §3.3)", file=file, key="oauth.requiredScopes"
        )
    return OAuthConfig(
        issuer=issuer,
        audience=params.audience,
        required_scopes=scopes,
        public_url=public_url,
        introspection_endpoint=endpoint,
        client_id=params.client_id,
        client_secret=secret,
        algorithms=algorithms,
        leeway_s=leeway,
    )
