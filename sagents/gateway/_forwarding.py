"""Upstream prompts, resources, resource templates and completion, forwarded like tools
(docs/gateway.md, "Prompts, resources and completion").

- Prompts are named ``<server>__<prompt>``, as tools are (``TOOL_NAME_SEPARATOR``).
- Resources and templates get the URI ``sagents://upstream/<server>/<upstream URI>``: the
  upstream URI follows verbatim (not re-encoded), so each server's resources stay apart, a
  template's variables stay variables (``sagents://upstream/files/file:///{path}``), and the
  upstream URI is exactly what follows the server's name. URIs inside results (the ``uri`` of
  read contents, embedded resources and resource links in prompt messages) are rewritten the
  same way.
- What a session sees is filtered by its profile: ``servers`` (as for tools), ``prompts``
  (names) and ``resources`` (globs over the gateway's URIs and templates, ``*`` within a path
  segment, ``**`` across: :mod:`sagents.gateway._resource_policy`); a name or URI outside the
  offer is refused as unknown, whatever way it is named. URIs are normalised before any match,
  and the normalised URI is the one forwarded; one with dot-segments or encoded separators is
  refused.
- Failure isolation: only ready servers' items are listed (:meth:`MCPSupervisor.catalogs`), so
  one server down hides only its own; a request to it fails with a JSON-RPC error naming it.

:class:`UpstreamForwarding` answers for the gateway; :func:`forwarding_handlers` gives the
SDK's low-level server its ``on_list_prompts``, ``on_get_prompt``,
``on_list_resource_templates`` and ``on_completion``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import mcp_types as mt
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from sagents.errors import (
    SagentsError,
    ToolTimeoutError,
    UnknownToolError,
    UpstreamProtocolError,
)
from sagents.gateway._policy import Profile
from sagents.gateway._resource_policy import normalised_uri, resource_offered
from sagents.mcp import TOOL_NAME_SEPARATOR, ServerCatalog
from sagents.mcp._ext_types import ReadResourceDirectoryResult

__all__ = [
    "FORWARDED_CACHE_HINTS",
    "UPSTREAM_URI_PREFIX",
    "CatalogSource",
    "UpstreamForwarding",
    "forwarded_error",
    "forwarding_handlers",
    "split_upstream_uri",
    "upstream_uri",
]

UPSTREAM_URI_PREFIX = "sagents://upstream/"
"""Upstream resources are ``sagents://upstream/<server>/<upstream URI>``."""
_RESOURCE_NOT_FOUND = -32002  # MCP spec 2025-11-25, "Resources", "Error Handling"
FORWARDED_CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    method: CacheHint(ttl_ms=0, scope="private")
    for method in ("prompts/list", "resources/templates/list")
}
"""``ttlMs``/``cacheScope`` of the forwarded lists (2026-07-28, "Caching"): private (per
session offer) and immediately stale (upstream lists change without notice), as the gateway's
other lists."""


class CatalogSource(Protocol):
    """Where upstream catalogs come from (:class:`sagents.mcp.MCPSupervisor`)."""

    def catalogs(self) -> Mapping[str, ServerCatalog]:
        """Each ready server's catalog."""
        ...

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None = None
    ) -> mt.GetPromptResult:
        """``prompts/get`` upstream."""
        ...

    async def read_resource(self, server: str, uri: str) -> mt.ReadResourceResult:
        """``resources/read`` upstream."""
        ...

    async def complete(
        self,
        server: str,
        ref: mt.ResourceTemplateReference | mt.PromptReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
    ) -> mt.CompleteResult:
        """``completion/complete`` upstream."""
        ...

    async def read_directory(
        self, server: str, uri: str, cursor: str | None = None
    ) -> ReadResourceDirectoryResult:
        """``resources/directory/read`` upstream."""
        ...

    def on_resource_updated(self, listener: Callable[[str, str], Awaitable[None]]) -> None:
        """Await ``listener(server, uri)`` for each update of a subscribed resource."""
        ...

    async def subscribe_resource(self, server: str, uri: str) -> None:
        """Subscribe to ``uri`` on ``server`` (kept across its restarts)."""
        ...

    async def unsubscribe_resource(self, server: str, uri: str) -> None:
        """End the subscription to ``uri`` on ``server``."""
        ...


def upstream_uri(server: str, uri: str) -> str:
    """The gateway's URI of ``uri`` of ``server`` (a template's text works the same way)."""
    return f"{UPSTREAM_URI_PREFIX}{server}/{uri}"


def split_upstream_uri(uri: str) -> tuple[str, str] | None:
    """``(server, upstream URI)`` of a gateway URI, or None when it is not one."""
    if not uri.startswith(UPSTREAM_URI_PREFIX):
        return None
    server, sep, original = uri.removeprefix(UPSTREAM_URI_PREFIX).partition("/")
    if not sep or not server or not original:
        return None
    return server, original


def forwarded_error(error: SagentsError) -> MCPError:
    """The JSON-RPC error a client gets for a failed upstream request."""
    if isinstance(error, UpstreamProtocolError) and "jsonrpc_code" in error.details:
        return MCPError(int(error.details["jsonrpc_code"]), error.message)
    if isinstance(error, ToolTimeoutError):
        return MCPError(mt.REQUEST_TIMEOUT, error.message)
    if isinstance(error, UnknownToolError):
        return MCPError(mt.INVALID_PARAMS, error.message)
    return MCPError(mt.INTERNAL_ERROR, error.message)


class UpstreamForwarding:
    """The upstream servers' prompts, resources, templates and completion, per session.

    Args:
        source: The catalogs and the requests (the supervisor); None until it exists (then
            nothing is listed and requests are refused as unknown).
        before: Awaited before each answer (``sagents serve`` waits there, bounded, for servers
            still on their first start).
    """

    def __init__(
        self,
        source: CatalogSource | None = None,
        *,
        before: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.source = source
        self.before = before

    def _catalogs(self, profile: Profile | None) -> dict[str, ServerCatalog]:
        if self.source is None:
            return {}
        servers = profile.servers if profile is not None else None
        return {
            name: catalog
            for name, catalog in self.source.catalogs().items()
            if servers is None or name in servers
        }

    # prompts -----------------------------------------------------------------------------

    def list_prompts(self, profile: Profile | None) -> list[mt.Prompt]:
        """The offered prompts, renamed ``<server>__<prompt>``, in server order."""
        return [
            prompt.model_copy(update={"name": name})
            for name, (_server, prompt) in self._prompts(profile).items()
        ]

    def _prompts(self, profile: Profile | None) -> dict[str, tuple[str, mt.Prompt]]:
        wanted = profile.prompts if profile is not None else None
        found: dict[str, tuple[str, mt.Prompt]] = {}
        for server, catalog in self._catalogs(profile).items():
            for prompt in catalog.prompts:
                name = f"{server}{TOOL_NAME_SEPARATOR}{prompt.name}"
                if wanted is None or name in wanted:
                    found.setdefault(name, (server, prompt))
        return found

    async def get_prompt(
        self, profile: Profile | None, params: mt.GetPromptRequestParams
    ) -> mt.GetPromptResult:
        """``prompts/get`` of an offered prompt, its messages' resource URIs rewritten.

        Raises:
            MCPError: ``-32602`` for a prompt not offered; the upstream's error otherwise.
        """
        offered = self._prompts(profile).get(params.name)
        if offered is None or self.source is None:
            raise MCPError(mt.INVALID_PARAMS, f"no prompt {params.name!r} is offered")
        server, prompt = offered
        try:
            result = await self.source.get_prompt(server, prompt.name, params.arguments)
        except SagentsError as error:
            raise forwarded_error(error) from error
        messages = [
            message.model_copy(update={"content": _rewrite_block(server, message.content)})
            for message in result.messages
        ]
        return result.model_copy(update={"messages": messages})

    # resources ---------------------------------------------------------------------------

    def list_resources(self, profile: Profile | None) -> list[mt.Resource]:
        """The offered upstream resources, under gateway URIs."""
        found: list[mt.Resource] = []
        for server, catalog in self._catalogs(profile).items():
            for resource in catalog.resources:
                uri = upstream_uri(server, resource.uri)
                if _resource_offered(profile, uri):
                    found.append(resource.model_copy(update={"uri": uri}))
        return found

    def list_templates(self, profile: Profile | None) -> list[mt.ResourceTemplate]:
        """The offered upstream resource templates, under gateway URI templates."""
        found: list[mt.ResourceTemplate] = []
        for server, catalog in self._catalogs(profile).items():
            for template in catalog.templates:
                uri = upstream_uri(server, template.uri_template)
                if _resource_offered(profile, uri):
                    found.append(template.model_copy(update={"uri_template": uri}))
        return found

    def offered_resource(self, profile: Profile | None, uri: str) -> tuple[str, str]:
        """``(server, upstream URI)`` of a gateway URI the session is offered, normalised
        (:func:`~sagents.gateway._resource_policy.normalised_uri`): the URI checked is the URI
        forwarded.

        Raises:
            MCPError: ``-32602`` for a URI with dot-segments or encoded separators; ``-32002``
                for a URI not offered (or of a server that is down).
        """
        try:
            uri = normalised_uri(uri)
        except ValueError as error:
            raise MCPError(
                mt.INVALID_PARAMS,
                f"{error}; name the resource without '.', '..', '%2F' or '%5C' in its path",
            ) from None
        split = split_upstream_uri(uri)
        if split is None or self.source is None:
            raise MCPError(_RESOURCE_NOT_FOUND, f"unknown resource {uri!r}")
        if split[0] not in self._catalogs(profile) or not _resource_offered(profile, uri):
            raise MCPError(_RESOURCE_NOT_FOUND, f"resource {uri!r} is not offered")
        return split

    def resource_offered(self, profile: Profile | None, uri: str) -> bool:
        """Whether the profile's ``resources`` patterns offer the gateway URI ``uri``."""
        return _resource_offered(profile, uri)

    async def read_resource(self, profile: Profile | None, uri: str) -> mt.ReadResourceResult:
        """``resources/read`` of a gateway URI, forwarded to its server.

        Raises:
            MCPError: ``-32002`` for a URI not offered (or of a server that is down); the
                upstream's error otherwise.
        """
        server, original = self.offered_resource(profile, uri)
        assert self.source is not None
        try:
            result = await self.source.read_resource(server, original)
        except SagentsError as error:
            raise forwarded_error(error) from error
        contents = [
            item.model_copy(update={"uri": upstream_uri(server, item.uri)})
            for item in result.contents
        ]
        return result.model_copy(update={"contents": contents})

    async def read_directory(
        self, profile: Profile | None, uri: str, cursor: str | None
    ) -> ReadResourceDirectoryResult:
        """``resources/directory/read`` of a gateway URI, forwarded to a server that declared
        ``directoryRead``; the children's URIs rewritten, those outside the offer left out.

        Raises:
            MCPError: ``-32602`` for a URI not offered, or of a server without directory
                reads (the Skills extension: not a directory resource); the upstream's error
                otherwise.
        """
        try:
            server, original = self.offered_resource(profile, uri)
        except MCPError:
            raise MCPError(mt.INVALID_PARAMS, f"{uri!r} is not a directory resource") from None
        catalog = self._catalogs(profile).get(server)
        if self.source is None or catalog is None or not catalog.directory_read:
            raise MCPError(mt.INVALID_PARAMS, f"{uri!r} is not a directory resource")
        try:
            result = await self.source.read_directory(server, original, cursor)
        except SagentsError as error:
            raise forwarded_error(error) from error
        children = [
            child.model_copy(update={"uri": upstream_uri(server, child.uri)})
            for child in result.resources
        ]
        offered = [child for child in children if _resource_offered(profile, child.uri)]
        return result.model_copy(update={"resources": offered})

    # completion --------------------------------------------------------------------------

    async def complete(
        self, profile: Profile | None, params: mt.CompleteRequestParams
    ) -> mt.CompleteResult:
        """``completion/complete`` for an offered prompt or template; an empty completion for
        what the gateway offers itself or a server without the ``completions`` capability.

        Raises:
            MCPError: ``-32602`` for a prompt or template not offered.
        """
        ref = params.ref
        upstream_ref: mt.PromptReference | mt.ResourceTemplateReference
        if isinstance(ref, mt.PromptReference):
            offered = self._prompts(profile).get(ref.name)
            if offered is None:
                raise MCPError(mt.INVALID_PARAMS, f"no prompt {ref.name!r} is offered")
            server = offered[0]
            upstream_ref = ref.model_copy(update={"name": offered[1].name})
        else:
            split = split_upstream_uri(ref.uri)
            if split is None:
                return _no_completion()  # skill files and tasks: nothing to complete
            templates = {t.uri_template for t in self.list_templates(profile)}
            if ref.uri not in templates:
                raise MCPError(mt.INVALID_PARAMS, f"no resource template {ref.uri!r} is offered")
            server = split[0]
            upstream_ref = ref.model_copy(update={"uri": split[1]})
        catalog = self._catalogs(profile).get(server)
        if self.source is None or catalog is None or not catalog.completions:
            return _no_completion()
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        try:
            return await self.source.complete(server, upstream_ref, argument, context)
        except SagentsError as error:
            raise forwarded_error(error) from error


def _no_completion() -> mt.CompleteResult:
    return mt.CompleteResult(completion=mt.Completion(values=[], total=0, has_more=False))


def _resource_offered(profile: Profile | None, uri: str) -> bool:
    return resource_offered(profile.resources if profile is not None else None, uri)


def _rewrite_block(server: str, block: Any) -> Any:
    """A prompt message's content with its resource URIs under the gateway's scheme."""
    if isinstance(block, mt.EmbeddedResource):
        inner = block.resource.model_copy(update={"uri": upstream_uri(server, block.resource.uri)})
        return block.model_copy(update={"resource": inner})
    if isinstance(block, mt.ResourceLink):
        return block.model_copy(update={"uri": upstream_uri(server, block.uri)})
    return block


ProfileOf = Callable[[ServerRequestContext[Any, Any]], Profile | None]
"""The profile of the session a request belongs to (the gateway's own session lookup)."""


def forwarding_handlers(forwarding: UpstreamForwarding, profile_of: ProfileOf) -> dict[str, Any]:
    """The low-level server's handlers for prompts, resource templates and completion.

    Args:
        forwarding: What answers.
        profile_of: The profile of a request's session (it also registers the connection for
            ``list_changed`` notifications).

    Returns:
        Keyword arguments for :class:`mcp.server.lowlevel.server.Server`.
    """

    async def before() -> None:
        if forwarding.before is not None:
            await forwarding.before()

    async def on_list_prompts(
        ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListPromptsResult:
        profile = profile_of(ctx)
        await before()
        return mt.ListPromptsResult(prompts=forwarding.list_prompts(profile))

    async def on_get_prompt(
        ctx: ServerRequestContext[Any, Any], params: mt.GetPromptRequestParams
    ) -> mt.GetPromptResult:
        profile = profile_of(ctx)
        await before()
        return await forwarding.get_prompt(profile, params)

    async def on_list_resource_templates(
        ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourceTemplatesResult:
        profile = profile_of(ctx)
        await before()
        return mt.ListResourceTemplatesResult(resource_templates=forwarding.list_templates(profile))

    async def on_completion(
        ctx: ServerRequestContext[Any, Any], params: mt.CompleteRequestParams
    ) -> mt.CompleteResult:
        profile = profile_of(ctx)
        await before()
        return await forwarding.complete(profile, params)

    return {
        "on_list_prompts": on_list_prompts,
        "on_get_prompt": on_get_prompt,
        "on_list_resource_templates": on_list_resource_templates,
        "on_completion": on_completion,
    }
