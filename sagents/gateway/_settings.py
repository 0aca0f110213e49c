"""Settings of ``sagents serve`` and the factory that builds the gateway from them.

``GatewaySettings`` holds what the command line and the config file choose (docs/gateway.md).
:func:`load_profiles` reads the ``profiles`` section of the config file; :func:`build_gateway`
turns settings into a :class:`~sagents.gateway._server.Gateway` (the integration connects the real
tool provider here: upstream servers, run_script, skills).
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sagents.config._models import documented_key
from sagents.config._oauth import OAuthConfig
from sagents.core._permissions import PermissionMode, parse_permission_mode
from sagents.errors import ConfigError
from sagents.gateway._policy import Profile
from sagents.gateway._resource_policy import check_resource_patterns

__all__ = [
    "APPROVAL_ROUTES",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "TOKEN_ENV",
    "ApprovalRoute",
    "GatewaySettings",
    "TransportName",
    "is_loopback",
    "load_profiles",
    "scope_profiles",
    "token_profiles",
]

TransportName = Literal["stdio", "http"]
ApprovalRoute = Literal["console", "elicitation", "both"]
"""Who is asked for approvals (``--approvals``): the MCP client through elicitation, the web
console (docs/console.md), or both at once."""
APPROVAL_ROUTES: tuple[ApprovalRoute, ...] = ("console", "elicitation", "both")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_ENV = "SAGENTS_GATEWAY_TOKEN"
"""Environment variable holding the gateway's bearer token for HTTP (never a command-line flag,
so it does not show in ``ps``)."""


@dataclass(frozen=True, kw_only=True)
class GatewaySettings:
    """What ``sagents serve`` runs with.

    Attributes:
        config: The config file (``mcpServers`` format plus sagents settings), or None.
        profile: The profile chosen with ``--profile``, or None.
        transport: ``stdio`` (default) or ``http`` (streamable HTTP).
        host: HTTP bind address; 127.0.0.1 by default.
        port: HTTP port; 0 picks a free one.
        mode: The default permission mode of sessions (a profile may set its own).
        workspace: The root of the sessions' workspaces (each session gets its own directory
            under it, see :mod:`sagents.gateway._workspaces`), or None for the data dir's.
        shared_workspace: Every session uses ``workspace`` itself, one folder for all
            (``--shared-workspace``; trusted users only).
        bearer_token: Over HTTP, the token every request must carry (``Authorization: Bearer``);
            required to bind anything but loopback.
        token_profiles: Over HTTP, profile bound to each bearer token (token -> profile).
        background_after_s: Seconds after which a running call becomes a background call;
            None never hands off.
        allowed_hosts: Extra ``Host`` header values accepted by the DNS-rebinding protection
            (``host:port``, ``host:*``).
        tool_search: ``--tool-search``: list ``search_tools`` and ``tool_expand_tools``, then
            only the tools each session expanded (:mod:`sagents.gateway._tool_search`).
        name: The MCP server name announced to clients.
        store: ``--store``: ``postgresql://...`` for replicas on one database
            (docs/scale-out.md); None uses the config's ``store``, else the embedded SQLite files.
        approvals: Who is asked for approvals (``--approvals``; see :data:`ApprovalRoute`).
        console: Serve the web console at ``/console/`` beside ``/mcp`` (HTTP only).
        tls_cert: TLS certificate (PEM) to serve HTTPS with; tls_key: its private key.
        tls_proxy: A TLS-terminating proxy is in front (``--behind-tls-proxy``): the console
            may be served on a non-loopback bind over plain HTTP to it, with ``Secure`` cookies.
        metrics_public: ``--metrics-public``: ``/metrics`` answers without a bearer token
            (docs/observability.md).
        metrics_port: ``--metrics-port``: also serve ``/metrics`` on this port of ``host``
            (for the stdio transport too); None: only beside ``/mcp`` over HTTP.
        oauth: Over HTTP, the ``oauth`` section: ``/mcp`` accepts OAuth access tokens of its
            issuer (docs/gateway.md, "Authorization"); None: configured tokens only.
        public_url: The URL clients reach the gateway at (``--public-url``, else
            ``oauth.publicUrl``), without a trailing slash; None: the bound address.
        scope_profiles: The profiles with ``scopes``, in the config's order: an OAuth access
            token gets the first whose scopes it holds all of.
    """

    config: Path | None = None
    profile: Profile | None = None
    transport: TransportName = "stdio"
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    mode: PermissionMode = "ask"
    workspace: Path | None = None
    shared_workspace: bool = False
    bearer_token: str | None = field(default=None, repr=False)
    token_profiles: Mapping[str, Profile] = field(default_factory=dict, repr=False)
    background_after_s: float | None = None
    allowed_hosts: tuple[str, ...] = ()
    tool_search: bool = False
    name: str = "sagents"
    store: str | None = field(default=None, repr=False)
    approvals: ApprovalRoute = "elicitation"
    console: bool = True
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_proxy: bool = False
    metrics_public: bool = False
    metrics_port: int | None = None
    oauth: OAuthConfig | None = None
    public_url: str | None = None
    scope_profiles: tuple[Profile, ...] = ()


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only accepts local connections."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _ProfileParams(BaseModel):
    model_config = ConfigDict(extra="forbid")  # one spelling per key: the documented one

    servers: list[str] | None = None
    tools: list[str] | None = None
    skills: list[str] | None = None
    prompts: list[str] | None = None
    resources: list[str] | None = None
    mode: str | None = None
    bearer_token_env: str | None = Field(default=None, alias="bearerTokenEnv")
    scopes: list[str] | None = Field(default=None, min_length=1)


def load_profiles(config: Path) -> dict[str, Profile]:
    """Read the ``profiles`` section of a config file.

    Shape::

        {"mcpServers": {...},
         "profiles": {"ops": {"servers": ["fleet"], "tools": ["fleet__list_devices"],
                              "skills": ["triage"], "prompts": ["fleet__triage"],
                              "resources": ["sagents://upstream/fleet/*"],
                              "mode": "read-only",
                              "bearerTokenEnv": "OPS_TOKEN",
                              "scopes": ["mcp:ops"]}}}

    Returns:
        Profiles by name (empty when the file has none).

    Raises:
        ConfigError: unreadable file, invalid JSON, or a bad profile (naming file and key).
    """
    try:
        data: Any = json.loads(config.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"cannot read the config: {error.strerror}", file=str(config)) from error
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"invalid JSON: {error.msg} at line {error.lineno}", file=str(config)
        ) from error
    if not isinstance(data, dict):
        raise ConfigError("the config must be a JSON object", file=str(config))
    raw = data.get("profiles", {})
    if not isinstance(raw, dict):
        raise ConfigError("'profiles' must be an object", file=str(config), key="profiles")
    profiles: dict[str, Profile] = {}
    for name, value in raw.items():
        key = f"profiles.{name}"
        try:
            params = _ProfileParams.model_validate(value)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            documented = documented_key(_ProfileParams, where)
            if first["type"] == "extra_forbidden" and documented is not None:
                raise ConfigError(
                    f"unknown key {where!r}: the configuration spells it {documented!r}",
                    file=str(config),
                    key=f"{key}.{where}",
                    hint=f"rename it to {documented!r}",
                ) from error
            raise ConfigError(
                f"invalid profile: {first['msg']}",
                file=str(config),
                key=f"{key}.{where}" if where else key,
            ) from error
        try:
            mode = parse_permission_mode(params.mode) if params.mode is not None else None
        except ValueError as error:
            raise ConfigError(str(error), file=str(config), key=f"{key}.mode") from error
        resources = frozenset(params.resources) if params.resources is not None else None
        try:
            if resources is not None:
                check_resource_patterns(resources)
        except ValueError as error:
            raise ConfigError(str(error), file=str(config), key=f"{key}.resources") from error
        profiles[name] = Profile(
            name=name,
            servers=frozenset(params.servers) if params.servers is not None else None,
            tools=frozenset(params.tools) if params.tools is not None else None,
            skills=frozenset(params.skills) if params.skills is not None else None,
            prompts=frozenset(params.prompts) if params.prompts is not None else None,
            resources=resources,
            mode=mode,
            bearer_token_env=params.bearer_token_env,
            scopes=frozenset(params.scopes) if params.scopes is not None else None,
        )
    return profiles


def token_profiles(profiles: Mapping[str, Profile]) -> dict[str, Profile]:
    """The profiles bound to a bearer token whose environment variable is set (token -> profile).

    Raises:
        ConfigError: two profiles resolve to the same token.
    """
    bound: dict[str, Profile] = {}
    for profile in profiles.values():
        if not profile.bearer_token_env:
            continue
        token = os.environ.get(profile.bearer_token_env, "")
        if not token:
            continue
        if token in bound:
            raise ConfigError(
                f"profiles {bound[token].name!r} and {profile.name!r} use the same bearer token",
                key=f"profiles.{profile.name}.bearerTokenEnv",
            )
        bound[token] = profile
    return bound


def scope_profiles(profiles: Mapping[str, Profile]) -> tuple[Profile, ...]:
    """The profiles an OAuth access token's scopes select, in the config's order."""
    return tuple(profile for profile in profiles.values() if profile.scopes is not None)
