"""``resources/directory/read`` in ``sagents serve`` (the Skills extension, "Reading
Directories"; docs/gateway.md, "MCP extensions").

Declared as ``directoryRead: true`` in the Skills extension's settings wherever that extension
is (a config with skills). Served for:

- the gateway's skill files: every directory level of a skill the session is offered is a
  directory resource, written without a trailing slash (``skill://pdf-tools``,
  ``skill://pdf-tools/scripts``); its direct children are the files the gateway serves there
  (the same ones ``resources/read`` and ``skills/get`` list) and its subdirectories
  (``mimeType: "inode/directory"``);
- forwarded resources (``sagents://upstream/<server>/<uri>``) of a server that declared
  ``directoryRead`` itself: forwarded, the children's URIs rewritten to the gateway's, and the
  children outside the session's offer left out.

Any other URI, a file, or a directory outside the offer is ``-32602`` (Invalid params), as the
extension requires. Results are paginated (:data:`DIRECTORY_PAGE_SIZE` children, an opaque
cursor); forwarded ones keep the upstream's cursor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from sagents.gateway._forwarding import UpstreamForwarding, split_upstream_uri
from sagents.gateway._policy import Profile
from sagents.gateway._seams import ResourceSource
from sagents.mcp._ext_types import (
    DIRECTORY_MIME_TYPE,
    SKILLS_EXTENSION,
    ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult,
)

__all__ = ["DIRECTORY_PAGE_SIZE", "install_directory_read", "skill_directory"]

DIRECTORY_PAGE_SIZE = 100
"""Children per page of a skill directory."""
_SKILL_SCHEME = "skill://"


def skill_directory(files: list[mt.Resource], uri: str) -> list[mt.Resource] | None:
    """The direct children of the skill directory ``uri`` among ``files`` (the skill files a
    session may read): files as listed, subdirectories as directory resources, in path order;
    None when ``uri`` is no directory of them."""
    if not uri.startswith(_SKILL_SCHEME) or uri.endswith("/") or uri == _SKILL_SCHEME:
        return None
    prefix = uri + "/"
    children: dict[str, mt.Resource] = {}
    for file in files:
        if not file.uri.startswith(prefix):
            continue
        rest = file.uri.removeprefix(prefix)
        head, sep, _tail = rest.partition("/")
        if not head:
            continue
        if sep:
            child = prefix + head
            children.setdefault(
                child, mt.Resource(uri=child, name=head, mime_type=DIRECTORY_MIME_TYPE)
            )
        else:
            children[file.uri] = file.model_copy(update={"name": head})
    if not children:
        return None  # a file, or nothing: not a directory resource
    return [children[key] for key in sorted(children)]


def install_directory_read(
    server: Server[Any],
    resources: ResourceSource,
    session_of: Callable[[ServerRequestContext[Any, Any]], Profile | None],
    forwarding: UpstreamForwarding | None,
) -> None:
    """Serve ``resources/directory/read`` on ``server`` and declare ``directoryRead`` in the
    (already installed) Skills extension's settings."""

    async def read(
        ctx: ServerRequestContext[Any, Any], params: ReadResourceDirectoryRequestParams
    ) -> ReadResourceDirectoryResult:
        profile = session_of(ctx)
        uri = params.uri
        if forwarding is not None and split_upstream_uri(uri) is not None:
            return await forwarding.read_directory(profile, uri, params.cursor)
        skills = profile.skills if profile is not None else None
        files = [
            mt.Resource(
                uri=link.uri,
                name=link.name,
                title=link.title,
                description=link.description,
                mime_type=link.mime_type,
                size=link.size,
            )
            for link in resources.list_resources(skills)
        ]
        children = skill_directory(files, uri)
        if children is None:
            raise MCPError(mt.INVALID_PARAMS, f"{uri!r} is not a directory resource")
        start = _start(params.cursor)
        page = children[start : start + DIRECTORY_PAGE_SIZE]
        after = start + DIRECTORY_PAGE_SIZE
        return ReadResourceDirectoryResult(
            resources=page, next_cursor=str(after) if after < len(children) else None
        )

    server.add_request_handler("resources/directory/read", ReadResourceDirectoryRequestParams, read)
    settings = dict(server.extensions.get(SKILLS_EXTENSION) or {})
    server.extensions[SKILLS_EXTENSION] = {**settings, "directoryRead": True}


def _start(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise MCPError(mt.INVALID_PARAMS, f"invalid cursor {cursor!r}")
    return int(cursor)
