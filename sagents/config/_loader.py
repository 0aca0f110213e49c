"""Load the configuration file into plain frozen values (docs/configuration.md).

``${VAR}`` (and VS Code's ``${env:VAR}``) in ``env`` values, ``headers`` values and ``apiKey`` is
replaced by the environment variable; a missing variable is an error naming file and key. Every
error is a :class:`~sagents.errors.ConfigError` naming the file and the key (``mcpServers.x.url``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from mcp import StdioServerParameters
from pydantic import ValidationError

from sagents.config._cache import CacheSettings
from sagents.config._hooks import CommandHook
from sagents.config._keys import (
    SERVER_KEYS_ONLY,
    json_type,
    misspelt_top_level,
    respelled,
    unknown_key,
)
from sagents.config._models import (
    ConfigFileParams,
    HookParams,
    HooksParams,
    ImageUnderstandingParams,
    ServerEntryParams,
    WebFetchParams,
    documented_key,
)
from sagents.config._oauth import OAuthConfig, oauth_config
from sagents.config._rate_limits import RateLimit
from sagents.core._limits import ScriptLimits
from sagents.core._secrets import MIN_SECRET_CHARS
from sagents.errors import ConfigError, SandboxError
from sagents.mcp._convert import check_server_name
from sagents.mcp._params import (
    ServerParams,
    SseServerParameters,
    StreamableHttpServerParameters,
    UpstreamOAuth,
)
from sagents.mcp._sandboxed import check_config_file
from sagents.mcp._settings import ServerSandbox, ServerSettings
from sagents.sandbox import NetworkPolicy
from sagents.tool.impl._image import ImageSettings
from sagents.tool.impl._web_fetch import WebFetchSettings

__all__ = [
    "AgentSettings",
    "BackgroundCallsSettings",
    "ImageUnderstandingSettings",
    "MCPServerConfig",
    "QuotaSettings",
    "SagentsConfig",
    "SandboxSettings",
    "SkillsSettings",
    "load_config",
    "parse_config",
]


_T = TypeVar("_T")

_VAR = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class MCPServerConfig:
    """One enabled server: its name, where it is, and how sagents treats it."""

    name: str
    params: ServerParams
    settings: ServerSettings


@dataclass(frozen=True, kw_only=True)
class BackgroundCallsSettings:
    """Seconds after which a long call becomes a background call (None: never)."""

    auto_after_sec: float | None = None


@dataclass(frozen=True, kw_only=True)
class QuotaSettings:
    """The ``quotas`` block (docs/configuration.md); None: no quota.

    Attributes:
        workspace_bytes: ``quotas.workspaceBytes``: what one session's workspace, its run
            records and its background tasks' logs may hold together, in bytes.
        principal_bytes: ``quotas.principalBytes``: what the workspaces, run records and
            background tasks' logs of every session of one principal (a bearer token; every
            client without one is one principal) may hold together, in bytes.
        background_tasks_per_session: ``quotas.backgroundTasksPerSession``: background tasks
            one session may run at once.
    """

    workspace_bytes: int | None = None
    principal_bytes: int | None = None
    background_tasks_per_session: int | None = None


@dataclass(frozen=True, kw_only=True)
class AgentSettings:
    """The ``agent`` section (docs/configuration.md): the agent of the web console's Chat page.

    Attributes:
        model: ``"provider:model"`` (as ``sagents chat --model`` takes it).
        system: The system prompt ("" for none).
    """

    model: str
    system: str = ""


@dataclass(frozen=True, kw_only=True)
class SkillsSettings:
    """Where skills come from.

    Attributes:
        directories: Skill roots (one folder per skill); relative ones are resolved against
            the config file's directory.
        servers: Enabled MCP servers whose skills join them (``"skills": true`` in the
            server's entry), in file order; their skills are ``<server>__<skill>``.
    """

    directories: tuple[Path, ...] = ()
    servers: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ImageUnderstandingSettings:
    """``builtinTools.imageUnderstanding`` (docs/configuration.md): the vision model of the
    ``image_understanding`` tool and its caps.

    Attributes:
        model: ``model``: the vision model's name; None: ``$SAGENTS_MODEL``.
        base_url: ``baseUrl``: its OpenAI-compatible endpoint; None: ``$OPENAI_BASE_URL``.
        api_key_env: ``apiKeyEnv``: the environment variable holding its key.
        caps: ``maxBytes``, ``maxPixels`` and ``maxSide``, with the tool's defaults for
            those the file leaves unset.
    """

    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    caps: ImageSettings = field(default_factory=ImageSettings)


@dataclass(frozen=True, kw_only=True)
class SandboxSettings:
    """The top-level ``sandbox`` section (docs/configuration.md).

    Attributes:
        provider: ``sandbox.provider`` as the file names it (``"bwrap"``), or None. Kept for
            the sandbox layer; the sessions of ``sagents serve`` run in bubblewrap whatever
            it says (docs/sandbox.md).
    """

    provider: str | None = None


@dataclass(frozen=True, kw_only=True)
class SagentsConfig:
    """The loaded configuration.

    Attributes:
        servers: Enabled servers, in file order.
        disabled: Names of servers switched off in the file.
        scripts: run_script limits (the ``scripts`` block).
        background_calls: Background-call settings.
        sandbox: The ``sandbox`` section.
        skills: The skill directories and the servers whose skills join them.
        local_tools: Modules whose ``TOOLS`` are registered as local tools (dotted names).
        builtin_tools: Names of the built-in tools to offer (gateway).
        web_fetch: ``builtinTools.webFetch`` as the tool's settings (its defaults for the
            keys the file leaves unset).
        memory_anonymous_user: ``builtinTools.memory.anonymousUser``: the memory user of
            sessions without one (None: they are refused the memory tools).
        image_understanding: ``builtinTools.imageUnderstanding``.
        store_url: ``store.url`` (``${VAR}`` expanded), or None for the embedded store.
        store_lease_s: ``store.leaseSec``: seconds of a replica's heartbeat lease, or None.
        quotas: The ``quotas`` block.
        session_idle_timeout_s: ``sessionIdleTimeout``: seconds after which an idle client
            session of ``sagents serve`` is ended, or None for the default (30 minutes).
        oauth: The ``oauth`` section (docs/gateway.md, "Authorization"), or None.
        secrets: ``(name, value)`` of every secret the file hands out or names: each
            ``${VAR}`` expanded into a server's ``env``, ``headers`` or ``apiKey`` or the
            store's URL (named ``VAR``), the store URL's password (``store.password``), and
            the ``secrets`` block's ``values`` and ``env`` (docs/gateway.md, "Secrets").
        hooks: ``hooks.preToolUse`` then ``hooks.postToolUse``, in file order (docs/gateway.md,
            "Hooks"); :func:`sagents.config.tools.build_tool_manager` applies them.
        rate_limits: ``rateLimits``, in file order (docs/gateway.md, "Rate limits");
            :func:`sagents.config.tools.build_tool_manager` applies them before the hooks.
        cache: The ``cache`` section (docs/gateway.md, "Result cache"), or None;
            :func:`sagents.config.tools.build_tool_manager` applies it after the hooks.
        approval_timeout_s: ``approvals.timeoutSec``: seconds an approval asked of a person
            waits (and a sealed ``requestState`` stays valid); 600 by default.
        agent: The ``agent`` section (the console's Chat page), or None.
        source: The file it came from, if any.
    """

    servers: tuple[MCPServerConfig, ...] = ()
    disabled: tuple[str, ...] = ()
    scripts: ScriptLimits = field(default_factory=ScriptLimits)
    background_calls: BackgroundCallsSettings = field(default_factory=BackgroundCallsSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    skills: SkillsSettings = field(default_factory=SkillsSettings)
    local_tools: tuple[str, ...] = ()
    builtin_tools: tuple[str, ...] = ()
    web_fetch: WebFetchSettings = field(default_factory=WebFetchSettings)
    memory_anonymous_user: str | None = None
    image_understanding: ImageUnderstandingSettings = field(
        default_factory=ImageUnderstandingSettings
    )
    store_url: str | None = field(default=None, repr=False)
    store_lease_s: float | None = None
    quotas: QuotaSettings = field(default_factory=QuotaSettings)
    session_idle_timeout_s: float | None = None
    oauth: OAuthConfig | None = None
    secrets: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    approval_timeout_s: float = 600.0
    agent: AgentSettings | None = None
    hooks: tuple[CommandHook, ...] = ()
    rate_limits: tuple[RateLimit, ...] = ()
    cache: CacheSettings | None = None
    source: Path | None = None

    def as_supervisor_input(self) -> dict[str, tuple[ServerParams, ServerSettings]]:
        """``{name: (params, settings)}`` for :meth:`sagents.mcp.MCPSupervisor.add_servers`."""
        return {s.name: (s.params, s.settings) for s in self.servers}


def load_config(path: str | Path, *, environ: Mapping[str, str] | None = None) -> SagentsConfig:
    """Read and parse a configuration file.

    Args:
        path: The JSON file.
        environ: Variables for ``${VAR}`` expansion; default ``os.environ``.

    Raises:
        ConfigError: unreadable file, invalid JSON (with line and column), or a bad key.
    """
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read the configuration: {error.strerror}", file=file) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}", file=file
        ) from None
    return parse_config(data, file=file, environ=environ, source=Path(path))


def parse_config(
    data: Any,
    *,
    file: str = "<config>",
    environ: Mapping[str, str] | None = None,
    source: Path | None = None,
) -> SagentsConfig:
    """Parse an already-decoded configuration document (see :func:`load_config`).

    Raises:
        ConfigError: naming ``file`` and the key at fault.
    """
    if not isinstance(data, dict):
        raise ConfigError("the configuration must be a JSON object", file=file)
    for name in data:  # other clients' keys are ignored here, so check the spelling first
        documented = documented_key(ConfigFileParams, str(name))
        if documented is not None:
            message, respell = respelled(str(name), documented)
            raise ConfigError(message, file=file, key=str(name), hint=respell)
        misspelt = misspelt_top_level(str(name))
        if misspelt is not None:
            raise ConfigError(misspelt[0], file=file, key=str(name), hint=misspelt[1])
        if name in SERVER_KEYS_ONLY:
            logger.warning(
                "%s: %r at the top level is ignored: it is a key of a server entry "
                "(mcpServers.<name>.%s; docs/configuration.md)",
                file, name, name,
            )  # fmt: skip
    try:
        model = ConfigFileParams.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            message, hint = unknown_key(first["loc"])
            raise ConfigError(message, file=file, key=key, hint=hint) from None
        if first["type"] == "model_type":  # pydantic's message names our class, not the file's
            message = f"must be a JSON object, not {json_type(first['input'])}"
            raise ConfigError(message, file=file, key=key) from None
        raise ConfigError(first["msg"], file=file, key=key) from None
    env = os.environ if environ is None else environ
    section = "mcpServers" if model.mcp_servers is not None else "servers"
    servers: list[MCPServerConfig] = []
    disabled: list[str] = []
    secrets = _holds_secrets(model)
    expanded: list[tuple[str, str]] = []
    for name, entry in model.entries().items():
        key = f"{section}.{name}"
        try:
            check_server_name(name)
        except ValueError as error:
            raise ConfigError(str(error), file=file, key=key) from None
        if entry.disabled or not entry.enabled:
            disabled.append(name)
            continue
        params = _params(entry, key=key, file=file, env=_Recorded(env, expanded))
        isolation = _sandbox(
            name,
            entry,
            params,
            key=f"{key}.sandbox",
            file=file,
            source=source,
            secrets=secrets,
            home_bytes=model.quotas.workspace_bytes,
        )
        settings = _settings(entry, isolation)
        servers.append(MCPServerConfig(name=name, params=params, settings=settings))
    store_url = (
        _expand(model.store.url, key="store.url", file=file, env=_Recorded(env, expanded))
        if model.store.url
        else None
    )
    return SagentsConfig(
        servers=tuple(servers),
        disabled=tuple(disabled),
        scripts=model.scripts.to_limits(),
        background_calls=BackgroundCallsSettings(
            auto_after_sec=model.background_calls.auto_after_sec
        ),
        sandbox=SandboxSettings(provider=model.sandbox.provider),
        skills=SkillsSettings(
            directories=tuple(_skill_dir(entry, source) for entry in model.skills.directories),
            servers=tuple(
                name
                for name, entry in model.entries().items()
                if entry.skills and name not in disabled
            ),
        ),
        local_tools=tuple(model.local_tools.modules),
        builtin_tools=tuple(model.builtin_tools.enabled),
        web_fetch=_web_fetch(model.builtin_tools.web_fetch),
        memory_anonymous_user=model.builtin_tools.memory.anonymous_user,
        image_understanding=_image_understanding(model.builtin_tools.image_understanding),
        store_url=store_url,
        store_lease_s=model.store.lease_seconds,
        quotas=QuotaSettings(
            workspace_bytes=model.quotas.workspace_bytes,
            principal_bytes=model.quotas.principal_bytes,
            background_tasks_per_session=model.quotas.background_tasks_per_session,
        ),
        session_idle_timeout_s=model.session_idle_timeout,
        oauth=oauth_config(model.oauth, env=env, file=file) if model.oauth is not None else None,
        secrets=_secrets(model, expanded, store_url, env),
        approval_timeout_s=model.approvals.timeout_sec,
        agent=AgentSettings(model=model.agent.model, system=model.agent.system)
        if model.agent is not None
        else None,
        hooks=_hooks(model.hooks),
        rate_limits=tuple(
            RateLimit(match=limit.match, calls=limit.calls, per_s=limit.per_sec)
            for limit in model.rate_limits
        ),
        cache=CacheSettings(
            ttl_s=model.cache.ttl_sec, max_entries=model.cache.max_entries, match=model.cache.match
        )
        if model.cache is not None
        else None,
        source=source,
    )


def _web_fetch(params: WebFetchParams) -> WebFetchSettings:
    """``builtinTools.webFetch`` as the tool's settings: a key the file leaves unset keeps the
    tool's default (written once, in :class:`WebFetchSettings`)."""
    default = WebFetchSettings()
    return WebFetchSettings(
        allow_networks=tuple(params.allow_networks),
        allow_hosts=tuple(params.allow_hosts),
        allow_domains=tuple(params.allow_domains),
        deny_domains=tuple(params.deny_domains),
        max_redirects=_given(params.max_redirects, default.max_redirects),
        max_bytes=_given(params.max_bytes, default.max_bytes),
        timeout_seconds=_given(params.timeout_seconds, default.timeout_seconds),
        seen_urls_only=_given(params.seen_urls_only, default.seen_urls_only),
    )


def _image_understanding(params: ImageUnderstandingParams) -> ImageUnderstandingSettings:
    """``builtinTools.imageUnderstanding`` as typed settings: a key the file leaves unset keeps
    the default (:class:`ImageUnderstandingSettings`, the tool's :class:`ImageSettings`)."""
    default = ImageUnderstandingSettings()
    return ImageUnderstandingSettings(
        model=params.model,
        base_url=params.base_url,
        api_key_env=_given(params.api_key_env, default.api_key_env),
        caps=ImageSettings(
            max_bytes=_given(params.max_bytes, default.caps.max_bytes),
            max_pixels=_given(params.max_pixels, default.caps.max_pixels),
            max_side=_given(params.max_side, default.caps.max_side),
        ),
    )


def _given(value: _T | None, default: _T) -> _T:
    """``value``, or ``default`` when the file left it unset (None)."""
    return default if value is None else value


class _Recorded(Mapping[str, str]):
    """The environment of ``${VAR}`` expansion, noting each variable read as a secret."""

    def __init__(self, env: Mapping[str, str], found: list[tuple[str, str]]) -> None:
        self._env = env
        self._found = found

    def __getitem__(self, name: str) -> str:
        value = self._env[name]
        self._found.append((name, value))
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)


def _secrets(
    model: ConfigFileParams,
    expanded: list[tuple[str, str]],
    store_url: str | None,
    env: Mapping[str, str],
) -> tuple[tuple[str, str], ...]:
    found = list(expanded)
    password = urllib.parse.urlsplit(store_url).password if store_url else None
    if password:
        found.append(("store.password", urllib.parse.unquote(password)))
    listed = [*model.secrets.values.items()]
    listed.extend((name, env[name]) for name in model.secrets.env if name in env)
    for name, value in listed:
        if len(value) < MIN_SECRET_CHARS:
            logger.warning(
                "secrets: %r is shorter than %d characters: it is not redacted (it would "
                "redact ordinary text)",
                name,
                MIN_SECRET_CHARS,
            )
    return tuple(dict.fromkeys([*found, *listed]))


def _skill_dir(entry: str, source: Path | None) -> Path:
    path = Path(entry).expanduser()
    if not path.is_absolute() and source is not None:
        path = source.parent / path
    return path


def _expand(value: str, *, key: str, file: str, env: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise ConfigError(
                f"environment variable {name!r} is not set",
                file=file,
                key=key,
                hint=f"export {name}=... or write the value into the file",
            )
        return env[name]

    return _VAR.sub(replace, value)


def _expand_map(
    values: Mapping[str, str], *, key: str, file: str, env: Mapping[str, str]
) -> dict[str, str]:
    return {k: _expand(v, key=f"{key}.{k}", file=file, env=env) for k, v in values.items()}


def _params(
    entry: ServerEntryParams, *, key: str, file: str, env: Mapping[str, str]
) -> ServerParams:
    kind = entry.type or entry.transport
    if entry.command is not None and entry.url is not None:
        raise ConfigError("give either 'command' or 'url', not both", file=file, key=key)
    if entry.command is not None:
        if kind not in (None, "stdio"):
            raise ConfigError(f"'command' needs type 'stdio', not {kind!r}", file=file, key=key)
        if entry.auth is not None or entry.client_id is not None or entry.scopes is not None:
            raise ConfigError(
                "'auth', 'clientId' and 'scopes' are for a remote server ('url'), not a stdio one",
                file=file,
                key=key,
            )
        return StdioServerParameters(
            command=entry.command,
            args=list(entry.args),
            env=_expand_map(entry.env, key=f"{key}.env", file=file, env=env) or None,
            cwd=entry.cwd,
        )
    if entry.url is None:
        raise ConfigError("a server needs 'command' (stdio) or 'url'", file=file, key=key)
    if kind == "stdio":
        raise ConfigError("type 'stdio' needs 'command', not 'url'", file=file, key=key)
    headers = _expand_map(entry.headers, key=f"{key}.headers", file=file, env=env) or None
    api_key = (
        _expand(entry.api_key, key=f"{key}.apiKey", file=file, env=env)
        if entry.api_key is not None
        else None
    )
    sse = kind == "sse" or (kind is None and entry.url.rstrip("/").endswith("/sse"))
    if entry.auth is None:
        if entry.client_id is not None or entry.scopes is not None:
            raise ConfigError(
                "'clientId' and 'scopes' need \"auth\": \"oauth\"", file=file, key=key
            )
    elif sse:
        raise ConfigError(
            '"auth": "oauth" needs the Streamable HTTP transport, not SSE', file=file, key=key
        )
    elif api_key is not None or any(name.lower() == "authorization" for name in headers or {}):
        raise ConfigError(
            '"auth": "oauth" sends its own Authorization header: drop \'apiKey\' and the '
            "'Authorization' header",
            file=file,
            key=key,
        )
    if sse:
        return SseServerParameters(url=entry.url, headers=headers, api_key=api_key)
    oauth = (
        UpstreamOAuth(client_id=entry.client_id, scopes=tuple(entry.scopes or ()))
        if entry.auth == "oauth"
        else None
    )
    return StreamableHttpServerParameters(
        url=entry.url, headers=headers, api_key=api_key, oauth=oauth
    )


def _sandbox(
    name: str,
    entry: ServerEntryParams,
    params: ServerParams,
    *,
    key: str,
    file: str,
    source: Path | None,
    secrets: bool,
    home_bytes: int | None,
) -> ServerSandbox | None:
    """The server's ``sandbox`` block as a :class:`ServerSandbox` (None: runs on the host);
    its home is held to ``home_bytes`` (``quotas.workspaceBytes``).

    Raises:
        ConfigError: the block is on a server that is not stdio, or a value is unusable
            (relative path outside a file, ``/``, a path inside a writable one, a bad name, a
            path that would show the config file: see
            :func:`sagents.mcp._sandboxed.check_config_file`).
    """
    block = entry.sandbox
    if block is None:
        return None
    if not isinstance(params, StdioServerParameters):
        raise ConfigError(
            "'sandbox' applies only to stdio servers ('command')",
            file=file,
            key=key,
            hint="a remote server runs elsewhere: remove 'sandbox' from this entry",
        )

    def path(value: str, where: str) -> str:
        expanded = Path(value).expanduser()
        if not expanded.is_absolute():
            if source is None:
                raise ConfigError(
                    f"sandbox path {value!r} must be absolute", file=file, key=f"{key}.{where}"
                )
            expanded = source.parent / expanded
        return str(expanded)

    try:
        sandbox = ServerSandbox(
            network=NetworkPolicy(allow=tuple(block.network.allow)) if block.network else False,
            readable=tuple(path(p, f"readable.{i}") for i, p in enumerate(block.readable)),
            writable=tuple(path(p, f"writable.{i}") for i, p in enumerate(block.writable)),
            env=tuple(block.env),
            home=path(block.home, "home") if block.home is not None else None,
            memory_mb=block.memory_mb,
            cpu_seconds=block.cpu_sec,
            cpu_cores=block.cpu_cores,
            max_processes=block.max_processes,
            uid=block.uid,
            config_file=os.path.abspath(source) if source is not None else None,
            config_has_secrets=secrets,
            home_bytes=home_bytes,
        )
    except ValueError as error:
        raise ConfigError(str(error), file=file, key=key) from None
    try:
        check_config_file(name, sandbox)
    except SandboxError as error:
        where = error.details.get("where")
        raise ConfigError(
            error.message, file=file, key=f"{key}.{where}" if where else key, hint=error.hint
        ) from None
    return sandbox


def _holds_secrets(model: ConfigFileParams) -> bool:
    """Whether the file writes a secret into itself: a server's ``env`` or ``headers`` value
    or ``apiKey``, or the store's URL with a password, given as it is rather than by
    ``${NAME}`` references (any value without one counts, ``"1"`` included: the file cannot
    say which values are keys)."""

    def literal(value: str) -> bool:
        return bool(value.strip()) and "${" not in value

    for entry in model.entries().values():
        values = [*entry.env.values(), *entry.headers.values()]
        if entry.api_key is not None:
            values.append(entry.api_key)
        if any(literal(value) for value in values):
            return True
    url = model.store.url or ""
    return literal(url) and "@" in url.split("//", 1)[-1].split("/", 1)[0]


def _settings(entry: ServerEntryParams, sandbox: ServerSandbox | None = None) -> ServerSettings:
    given: dict[str, Any] = {
        "connect_timeout": entry.connect_timeout,
        "discover_timeout": entry.discover_timeout,
        "list_timeout": entry.list_timeout,
        "call_timeout": entry.call_timeout,
        "max_concurrency": entry.max_concurrency,
        "ping_timeout": entry.ping_timeout,
    }
    chosen = {k: v for k, v in given.items() if v is not None}
    if entry.ping_interval is not None:
        chosen["ping_interval"] = entry.ping_interval or None  # 0: no idle pings
    return ServerSettings(
        permission=entry.permission,
        tool_permissions=dict(entry.tool_permissions),
        sandbox=sandbox,
        on_definition_change=entry.on_definition_change,
        **chosen,
    )


def _hooks(hooks: HooksParams) -> tuple[CommandHook, ...]:
    """The ``hooks`` section's commands, pre hooks first, each in file order."""
    events: tuple[tuple[Literal["preToolUse", "postToolUse"], list[HookParams]], ...] = (
        ("preToolUse", hooks.pre_tool_use),
        ("postToolUse", hooks.post_tool_use),
    )
    return tuple(
        CommandHook(
            event=event,
            match=hook.match,
            command=tuple(hook.command),
            timeout_s=hook.timeout_sec,
            on_error=hook.on_error,
        )
        for event, params in events
        for hook in params
    )
