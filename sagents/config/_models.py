"""Pydantic models of the configuration file: the trust boundary (docs/configuration.md).

The file is the standard ``mcpServers`` JSON of Claude Desktop and Cursor (VS Code's ``servers``
also loads), with sagents' own per-server keys beside the standard ones and global sections
(``scripts``, ``backgroundCalls``, ``sandbox``). Unknown per-server keys are refused, so that a
typo does not silently do nothing; unknown top-level keys of other clients are ignored.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from sagents.core._limits import ScriptLimits
from sagents.core._permissions import PermissionClass
from sagents.errors import ConfigError
from sagents.sandbox import ANY_PUBLIC_HOST, NetworkPolicy

__all__ = [
    "BackgroundCallsParams",
    "BuiltinToolsParams",
    "ConfigFileParams",
    "ImageUnderstandingParams",
    "LocalToolsParams",
    "MemoryParams",
    "OAuthParams",
    "QuotasParams",
    "SandboxSectionParams",
    "ScriptsParams",
    "SecretsParams",
    "ServerEntryParams",
    "ServerNetworkParams",
    "ServerSandboxParams",
    "SkillsParams",
    "StoreParams",
    "WebFetchParams",
    "documented_key",
]

logger = logging.getLogger(__name__)

TransportName = Literal["stdio", "sse", "http", "streamable-http", "streamableHttp"]


class _Strict(BaseModel):
    # One spelling per key: the documented camelCase one (docs/configuration.md). A field's
    # Python name (``call_timeout``) is not a second spelling: it is refused, naming the key.
    model_config = ConfigDict(extra="forbid", frozen=True)


def _allow_entry(entry: str) -> str:
    NetworkPolicy(allow=(entry,))  # the message names the entry and what it should be
    return entry


class ServerNetworkParams(_Strict):
    """A sandboxed server's ``network`` block: ``{"allow": [...]}`` (docs/mcp.md, "Sandboxed
    servers"); ``true`` stands for ``{"allow": ["*"]}``, any public host."""

    allow: list[Annotated[str, AfterValidator(_allow_entry)]] = Field(min_length=1)


class ServerSandboxParams(_Strict):
    """A stdio server's ``sandbox`` block (docs/mcp.md, "Sandboxed servers"): run it in its own
    bubblewrap sandbox. Paths may start with ``~``; relative ones are relative to the config
    file's directory."""

    # false (None): no network; true: any public host; {"allow": [...]}: what it lists.
    network: ServerNetworkParams | None = None
    readable: list[str] = Field(default_factory=list)
    writable: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)
    home: str | None = None
    memory_mb: int | None = Field(default=1024, alias="memoryMb", gt=0)
    cpu_sec: int | None = Field(default=None, alias="cpuSec", gt=0)
    cpu_cores: float | None = Field(default=1.0, alias="cpuCores", gt=0)
    max_processes: int | None = Field(default=64, alias="maxProcesses", gt=0)
    uid: int | None = Field(default=None, ge=0, lt=2**31)

    @field_validator("network", mode="before")
    @classmethod
    def _network_switch(cls, value: Any) -> Any:
        if value is True:
            return {"allow": [ANY_PUBLIC_HOST]}
        if value is False or value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError('network is true, false or {"allow": [...]}')
        return value


class ServerEntryParams(_Strict):
    """One entry of ``mcpServers``: standard keys, then sagents' own (camelCase, all optional)."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    type: TransportName | None = None
    transport: TransportName | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # Claude Desktop / Cursor spell "off" as disabled; sagents also reads enabled.
    disabled: bool = False
    enabled: bool = True
    connect_timeout: float | None = Field(default=None, alias="connectTimeout", gt=0)
    discover_timeout: float | None = Field(default=None, alias="discoverTimeout", gt=0)
    list_timeout: float | None = Field(default=None, alias="listTimeout", gt=0)
    call_timeout: float | None = Field(default=None, alias="callTimeout", gt=0)
    max_concurrency: int | None = Field(default=None, alias="maxConcurrency", ge=1)
    # Seconds between liveness pings of an idle server; 0 turns the idle pings off.
    ping_interval: float | None = Field(default=None, alias="pingInterval", ge=0)
    ping_timeout: float | None = Field(default=None, alias="pingTimeout", gt=0)
    permission: PermissionClass | None = None
    tool_permissions: dict[str, PermissionClass] = Field(
        default_factory=dict, alias="toolPermissions"
    )
    api_key: str | None = Field(default=None, alias="apiKey")
    # true: a sandbox with every default; an object: see ServerSandboxParams.
    sandbox: ServerSandboxParams | None = None
    # true: the server's skills (the MCP Skills extension) join the gateway's skills.
    skills: StrictBool = False
    # What a tool whose definition changed since it was pinned does until it is accepted
    # (docs/gateway.md, "Pinned definitions").
    on_definition_change: Literal["ask", "disable", "accept"] = Field(
        default="ask", alias="onDefinitionChange"
    )
    # "oauth": the gateway logs in to this remote server per principal (docs/oauth.md).
    auth: Literal["oauth"] | None = None
    client_id: str | None = Field(default=None, alias="clientId", min_length=1)
    scopes: list[str] | None = None

    @field_validator("sandbox", mode="before")
    @classmethod
    def _sandbox_switch(cls, value: Any) -> Any:
        if value is True:
            return {}
        return None if value is False else value


_LIMITS = ScriptLimits()


class ScriptsParams(_Strict):
    """``scripts``: run_script limits (by default 2000 calls, 4 at once, 30 minutes, 32 MiB of
    output; docs/run_script.md), and the pre-flight check's switch, in one shape::

        "scripts": {"maxCalls": 2000, "maxConcurrency": 4, "timeoutSec": 1800,
                    "maxOutputBytes": 33554432, "preflight": true}

    ``maxParallel``, an older spelling of ``maxConcurrency``, is still read, with a warning.
    """

    # The defaults are ScriptLimits' (written there once); the bounds are its checks, here so
    # that an error names the key.
    max_calls: int = Field(default=_LIMITS.max_calls, alias="maxCalls", ge=1)
    max_concurrency: int = Field(default=_LIMITS.max_concurrency, alias="maxConcurrency", ge=1)
    timeout_sec: float = Field(default=_LIMITS.timeout_s, alias="timeoutSec", gt=0)
    max_output_bytes: int = Field(default=_LIMITS.max_output_bytes, alias="maxOutputBytes", gt=0)
    preflight: StrictBool = _LIMITS.preflight

    @model_validator(mode="before")
    @classmethod
    def _old_spelling(cls, raw: Any) -> Any:
        if not isinstance(raw, dict) or "maxParallel" not in raw:
            return raw
        if "maxConcurrency" in raw:
            raise ValueError("give 'maxConcurrency' only: 'maxParallel' is its older spelling")
        logger.warning(
            "scripts.maxParallel is deprecated: rename it to scripts.maxConcurrency "
            "(docs/configuration.md)"
        )
        renamed = dict(raw)
        renamed["maxConcurrency"] = renamed.pop("maxParallel")
        return renamed

    def to_limits(self) -> ScriptLimits:
        """The run limits these settings give."""
        return ScriptLimits(
            max_calls=self.max_calls,
            max_concurrency=self.max_concurrency,
            timeout_s=self.timeout_sec,
            max_output_bytes=self.max_output_bytes,
            preflight=self.preflight,
        )

    @classmethod
    def parse(cls, raw: Mapping[str, Any], *, file: str | None = None) -> ScriptsParams:
        """Validate a ``scripts`` block on its own.

        Raises:
            ConfigError: naming the file and the ``scripts.<key>`` that is wrong.
        """
        try:
            return cls.model_validate(dict(raw))
        except ValidationError as error:
            first = error.errors()[0]
            key = ".".join(str(part) for part in ("scripts", *first["loc"]))
            documented = documented_key(cls, str(first["loc"][-1])) if first["loc"] else None
            if first["type"] == "extra_forbidden" and documented is not None:
                raise ConfigError(
                    f"unknown key {str(first['loc'][-1])!r}: the configuration spells it "
                    f"{documented!r}",
                    file=file,
                    key=key,
                    hint=f"rename it to {documented!r}",
                ) from None
            raise ConfigError(first["msg"], file=file, key=key) from None


class BackgroundCallsParams(_Strict):
    """``backgroundCalls``: when a long call becomes a background call."""

    auto_after_sec: float | None = Field(default=None, alias="autoAfterSec", gt=0)


class ApprovalsParams(_Strict):
    """``approvals``: how long an approval asked of a person waits (the web console, a
    2026-07-28 client's ``input_required``, an elicitation), in seconds; hours are allowed.
    It also bounds how long a sealed ``requestState`` stays valid (docs/configuration.md)."""

    timeout_sec: float = Field(
        default=600.0, alias="timeoutSec", gt=0, allow_inf_nan=False, strict=True
    )


class AgentParams(_Strict):
    """``agent``: the agent of the web console's Chat page (docs/console.md, "Chat"):
    ``"provider:model"`` as ``sagents chat --model`` takes it, and its system prompt."""

    model: str = Field(min_length=1, strict=True)
    system: str = Field(default="", strict=True)


class SkillsParams(_Strict):
    """``skills``: directories holding skills (each a folder with ``SKILL.md``), served by the
    gateway as the ``load_skill`` / ``read_skill_file`` tools and as ``skill://`` resources."""

    directories: list[str] = Field(default_factory=list)


class LocalToolsParams(_Strict):
    """``localTools``: Python modules whose ``TOOLS`` list is registered under plain names."""

    modules: list[str] = Field(default_factory=list)


class WebFetchParams(_Strict):
    """``builtinTools.webFetch``: what ``web_fetch`` may reach beyond public addresses, and its
    caps (docs/builtin_tools.md)."""

    allow_networks: list[str] = Field(default_factory=list, alias="allowNetworks")
    allow_hosts: list[str] = Field(default_factory=list, alias="allowHosts")
    allow_domains: list[str] = Field(default_factory=list, alias="allowDomains")
    deny_domains: list[str] = Field(default_factory=list, alias="denyDomains")
    max_redirects: int | None = Field(default=None, alias="maxRedirects", ge=0, le=20)
    max_bytes: int | None = Field(default=None, alias="maxBytes", gt=0)
    timeout_seconds: float | None = Field(default=None, alias="timeoutSec", gt=0)
    seen_urls_only: bool | None = Field(default=None, alias="seenUrlsOnly")

    @field_validator("allow_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for network in value:
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError as error:
                raise ValueError(f"{network!r} is not a network (CIDR, e.g. 10.0.0.0/8)") from error
        return value


class MemoryParams(_Strict):
    """``builtinTools.memory``: ``anonymousUser`` is the user of sessions that have none (all
    such sessions then share its memories); unset, they are refused the memory tools."""

    anonymous_user: str | None = Field(default=None, alias="anonymousUser", min_length=1)


class ImageUnderstandingParams(_Strict):
    """``builtinTools.imageUnderstanding``: the vision model of ``image_understanding`` (an
    OpenAI-compatible endpoint; ``$SAGENTS_MODEL``/``$OPENAI_BASE_URL`` when unset) and its
    caps (docs/builtin_tools.md)."""

    model: str | None = Field(default=None, min_length=1)
    base_url: str | None = Field(default=None, alias="baseUrl", min_length=1)
    api_key_env: str | None = Field(default=None, alias="apiKeyEnv", min_length=1)
    max_bytes: int | None = Field(default=None, alias="maxBytes", gt=0)
    max_pixels: int | None = Field(default=None, alias="maxPixels", gt=0)
    max_side: int | None = Field(default=None, alias="maxSide", gt=0)


class BuiltinToolsParams(_Strict):
    """``builtinTools``: the built-in tools the gateway offers (none by default)."""

    enabled: list[str] = Field(default_factory=list)
    web_fetch: WebFetchParams = Field(default_factory=WebFetchParams, alias="webFetch")
    memory: MemoryParams = Field(default_factory=MemoryParams)
    image_understanding: ImageUnderstandingParams = Field(
        default_factory=ImageUnderstandingParams, alias="imageUnderstanding"
    )


class StoreParams(_Strict):
    """``store``: where ``sagents serve`` keeps its state (docs/scale-out.md): ``url``
    ``postgresql://...`` for replicas sharing one database (``${VAR}`` is expanded), unset for
    the embedded SQLite files; ``leaseSec`` is a replica's heartbeat lease."""

    url: str | None = Field(default=None, min_length=1)
    lease_seconds: float | None = Field(default=None, alias="leaseSec", gt=0)


class SecretsParams(_Strict):
    """``secrets``: values redacted as ``[redacted:NAME]`` wherever a tool result, a script's
    output, a record, the audit, the console or a log would show them (docs/gateway.md,
    "Secrets"), beside those redacted anyway (every ``${VAR}`` expanded into a server's
    ``env``, ``headers`` or ``apiKey``, the store's password, the gateway's tokens).

    ``values`` maps a name to a secret value; ``env`` names environment variables whose
    values are secrets (an unset one is skipped).
    """

    values: dict[str, str] = Field(default_factory=dict)
    env: list[str] = Field(default_factory=list)


class QuotasParams(_Strict):
    """``quotas``: what the sessions of ``sagents serve`` may make the host store and run
    (docs/configuration.md, docs/security.md). Unset: no quota.

    ``workspaceBytes`` bounds each session's workspace (its files, run records and background
    task logs, counted together across runs); ``principalBytes`` bounds the workspaces of all
    sessions of one principal (one bearer token; every client without a token is one)
    together; ``backgroundTasksPerSession`` caps the background tasks one session runs at
    once.
    """

    workspace_bytes: StrictInt | None = Field(default=None, alias="workspaceBytes", gt=0)
    principal_bytes: StrictInt | None = Field(default=None, alias="principalBytes", gt=0)
    background_tasks_per_session: StrictInt | None = Field(
        default=None, alias="backgroundTasksPerSession", gt=0
    )


class OAuthParams(_Strict):
    """``oauth``: ``sagents serve`` as an OAuth 2.1 resource server (docs/gateway.md,
    "Authorization"). Checked further, and resolved, by :func:`sagents.config._oauth.oauth_config`.
    """

    issuer: str = Field(min_length=1)
    audience: str | None = Field(default=None, min_length=1)
    required_scopes: list[str] = Field(default_factory=list, alias="requiredScopes")
    public_url: str | None = Field(default=None, alias="publicUrl", min_length=1)
    introspection_endpoint: str | None = Field(
        default=None, alias="introspectionEndpoint", min_length=1
    )
    client_id: str | None = Field(default=None, alias="clientId", min_length=1)
    client_secret_env: str | None = Field(default=None, alias="clientSecretEnv", min_length=1)
    algorithms: list[str] | None = None
    leeway_seconds: float | None = Field(
        default=None, alias="leewaySec", ge=0, allow_inf_nan=False, strict=True
    )


class HookParams(_Strict):
    """One hook of ``hooks.preToolUse`` / ``hooks.postToolUse`` (docs/gateway.md, "Hooks")."""

    match: str = "*"
    command: list[str] = Field(min_length=1)
    timeout_sec: float = Field(default=5.0, alias="timeoutSec", gt=0, allow_inf_nan=False)
    on_error: Literal["deny", "allow"] = Field(default="deny", alias="onError")


class HooksParams(_Strict):
    """``hooks``: commands that see each tool call before it runs and its result after."""

    pre_tool_use: list[HookParams] = Field(default_factory=list, alias="preToolUse")
    post_tool_use: list[HookParams] = Field(default_factory=list, alias="postToolUse")


class RateLimitParams(_Strict):
    """One limit of ``rateLimits`` (docs/gateway.md, "Rate limits")."""

    match: str = "*"
    calls: int = Field(ge=1, strict=True)
    per_sec: float = Field(alias="perSec", gt=0, allow_inf_nan=False)


class CacheParams(_Strict):
    """``cache``: results of read-only tools kept a while (docs/gateway.md, "Result cache")."""

    ttl_sec: float = Field(alias="ttlSec", gt=0, allow_inf_nan=False, strict=True)
    max_entries: int = Field(default=1000, alias="maxEntries", ge=1, strict=True)
    match: str = "*"


class SandboxSectionParams(_Strict):
    """The top-level ``sandbox`` section: the sandbox provider's name (docs/configuration.md).
    Not a server's ``sandbox`` block (:class:`ServerSandboxParams`), nor the sandbox layer's own
    :class:`sagents.sandbox.SandboxParams`."""

    provider: str | None = Field(default=None, min_length=1, strict=True)


class ConfigFileParams(BaseModel):
    """The whole file. Other clients' top-level keys are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    mcp_servers: dict[str, ServerEntryParams] | None = Field(default=None, alias="mcpServers")
    servers: dict[str, ServerEntryParams] | None = None
    scripts: ScriptsParams = Field(default_factory=ScriptsParams)
    background_calls: BackgroundCallsParams = Field(
        default_factory=BackgroundCallsParams, alias="backgroundCalls"
    )
    sandbox: SandboxSectionParams = Field(default_factory=SandboxSectionParams)
    approvals: ApprovalsParams = Field(default_factory=ApprovalsParams)
    skills: SkillsParams = Field(default_factory=SkillsParams)
    local_tools: LocalToolsParams = Field(default_factory=LocalToolsParams, alias="localTools")
    builtin_tools: BuiltinToolsParams = Field(
        default_factory=BuiltinToolsParams, alias="builtinTools"
    )
    store: StoreParams = Field(default_factory=StoreParams)
    quotas: QuotasParams = Field(default_factory=QuotasParams)
    secrets: SecretsParams = Field(default_factory=SecretsParams)
    hooks: HooksParams = Field(default_factory=HooksParams)
    rate_limits: list[RateLimitParams] = Field(default_factory=list, alias="rateLimits")
    cache: CacheParams | None = None
    session_idle_timeout: float | None = Field(
        default=None, alias="sessionIdleTimeout", gt=0, allow_inf_nan=False, strict=True
    )
    oauth: OAuthParams | None = None
    agent: AgentParams | None = None

    def entries(self) -> dict[str, Any]:
        """The server entries, whichever key (``mcpServers`` or VS Code's ``servers``) held them."""
        return dict(self.mcp_servers or self.servers or {})


def documented_key(model: type[BaseModel], name: str) -> str | None:
    """The documented (camelCase) key of ``model`` that ``name`` is another spelling of: the
    field's Python name (``call_timeout`` for ``callTimeout``); None when ``name`` is none."""
    field = model.model_fields.get(name)
    if field is None or field.alias is None or field.alias == name:
        return None
    return field.alias
