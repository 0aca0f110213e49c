"""An upstream server's prompts, resources and resource templates (docs/mcp.md, "Prompts,
resources and completion").

A connection lists them, when the server announces the capability (MCP spec 2025-11-25,
"Prompts" and "Resources"), right after its tools, and again when the server sends
``notifications/prompts/list_changed`` or ``notifications/resources/list_changed`` (or the
matching ``subscriptions/listen`` events on 2026-07-28). Lists are followed through every page,
as ``tools/list`` is. The values stay the SDK's own types, so that nothing a server says about
an item (title, icons, annotations, size, ``_meta``) is lost on the way through a gateway.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio
import mcp_types as types
from mcp import ClientSession

__all__ = [
    "MAX_CATALOG_PAGES",
    "CatalogChangedCallback",
    "CatalogKind",
    "ServerCatalog",
    "list_all",
    "list_catalog",
]

logger = logging.getLogger(__name__)

MAX_CATALOG_PAGES = 1000  # pages followed before giving up on a paginator that never ends

CatalogKind = Literal["prompts", "resources"]
"""What changed: ``prompts``, or ``resources`` (resources and resource templates)."""

CatalogChangedCallback = Callable[[str, CatalogKind], Awaitable[None]]
"""``(server, kind)``, awaited after a server's prompts or resources were listed anew."""

_Item = TypeVar("_Item")
_Page = types.ListPromptsResult | types.ListResourcesResult | types.ListResourceTemplatesResult


@dataclass(frozen=True, kw_only=True)
class ServerCatalog:
    """What one server offers besides tools, as it last listed it.

    Attributes:
        prompts: ``prompts/list``, every page.
        resources: ``resources/list``, every page.
        templates: ``resources/templates/list``, every page.
        completions: True when the server announced the ``completions`` capability.
        directory_read: True when the server declared the Skills extension with
            ``directoryRead: true`` (it serves ``resources/directory/read``).
    """

    prompts: tuple[types.Prompt, ...] = ()
    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    completions: bool = False
    directory_read: bool = False


async def list_all(
    fetch: Callable[[types.PaginatedRequestParams | None], Awaitable[_Page]],
    items: Callable[[_Page], list[_Item]],
    *,
    server: str,
    method: str,
) -> list[_Item]:
    """Follow a paginated list to its end (a cursor that repeats or is empty ends the walk)."""
    found: list[_Item] = []
    seen: set[str] = set()
    cursor: str | None = None
    for _ in range(MAX_CATALOG_PAGES):
        page = await fetch(types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        found.extend(items(page))
        cursor = page.next_cursor
        if not cursor:
            break
        if cursor in seen:
            logger.warning("MCP server %r repeated %s cursor %r", server, method, cursor)
            break
        seen.add(cursor)
    return found


async def list_catalog(
    session: ClientSession,
    *,
    server: str,
    timeout: float,  # noqa: ASYNC109 - a bound on the whole walk
    kinds: frozenset[CatalogKind] = frozenset({"prompts", "resources"}),
    previous: ServerCatalog | None = None,
) -> ServerCatalog:
    """List what the server's capabilities announce; a kind not in ``kinds`` is kept from
    ``previous``. A list that fails is logged and left empty: it costs only that list.

    Args:
        session: A negotiated session.
        server: The server's name (for logs).
        timeout: Seconds for each kind's whole walk.
        kinds: What to list now.
        previous: The catalog so far.
    """
    caps = session.server_capabilities
    old = previous or ServerCatalog()
    prompts, resources, templates = old.prompts, old.resources, old.templates
    has = {
        "prompts": caps is not None and caps.prompts is not None,
        "resources": caps is not None and caps.resources is not None,
    }

    async def walk(
        method: str,
        fetch: Callable[[types.PaginatedRequestParams | None], Awaitable[_Page]],
        items: Callable[[Any], list[_Item]],
    ) -> tuple[_Item, ...]:
        found = await _guarded(
            server, method, timeout, lambda: list_all(fetch, items, server=server, method=method)
        )
        return tuple(found)

    if "prompts" in kinds:
        prompts = ()
        if has["prompts"]:
            prompts = await walk(
                "prompts/list", lambda p: session.list_prompts(params=p), lambda r: r.prompts
            )
    if "resources" in kinds:
        resources, templates = (), ()
        if has["resources"]:
            resources = await walk(
                "resources/list",
                lambda p: session.list_resources(params=p),
                lambda r: r.resources,
            )
            templates = await walk(
                "resources/templates/list",
                lambda p: session.list_resource_templates(params=p),
                lambda r: r.resource_templates,
            )
    return ServerCatalog(
        prompts=prompts,
        resources=resources,
        templates=templates,
        completions=caps is not None and caps.completions is not None,
        directory_read=_declares_directory_read(caps),
    )


def _declares_directory_read(caps: types.ServerCapabilities | None) -> bool:
    skills = (caps.extensions or {}).get("io.modelcontextprotocol/skills") if caps else None
    return isinstance(skills, dict) and skills.get("directoryRead") is True


async def _guarded(
    server: str,
    method: str,
    timeout: float,  # noqa: ASYNC109 - a bound on the walk
    walk: Callable[[], Awaitable[list[_Item]]],
) -> list[_Item]:
    with anyio.move_on_after(timeout):
        try:
            return await walk()
        except Exception as error:  # noqa: BLE001 - one failed list costs only that list
            logger.warning("MCP server %r: %s failed: %s", server, method, error)
            return []
    logger.warning("MCP server %r: %s took longer than %g s", server, method, timeout)
    return []
