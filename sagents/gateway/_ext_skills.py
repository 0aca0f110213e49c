"""The MCP Skills extension (``io.modelcontextprotocol/skills``) in ``sagents serve``.

``skills/list`` and ``skills/get`` describe the skills offered to the session, built from the
same skill files the gateway serves as ``skill://<skill>/<path>`` resources
(:class:`~sagents.gateway._sources.SkillResources`): the same profile filter, the same file
list (hidden files left out) and the same path rules, so a file named in an entry is exactly
one that ``resources/read`` serves, and nothing else is. Each entry carries the ``SKILL.md``
front matter (read with the skill parser's own front-matter reader) and every file's SHA-256
digest and size.

An MCP server's skill (``skill://<server>/<skill>/...``) is described by that server's own
entry (:meth:`SkillResources.skill_entry <sagents.gateway._sources.SkillResources.skill_entry>`:
its digests, sizes and front matter under the gateway's URIs), so listing it fetches none of
its files; they are fetched, and verified against those digests, when a client reads one.

Clients that do not use the extension keep the ``skill://`` resources and the skill tools
(``load_skill``, ``read_skill_file``). Source: the Skills extension specification
(github.com/modelcontextprotocol/ext-skills, ``specification/stable/skills.mdx``).
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable
from urllib.parse import unquote

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from sagents.core._result import EmbeddedResource, ResourceLink
from sagents.errors import SagentsError
from sagents.gateway._seams import ResourceSource
from sagents.gateway._sources import SKILL_URI_PREFIX
from sagents.mcp._ext_types import (
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    SKILLS_EXTENSION,
    GetSkillRequestParams,
    GetSkillResult,
    ListSkillsResult,
    SkillEntry,
    SkillFile,
)
from sagents.skill._frontmatter import (
    FrontMatterError,
    decode_text,
    load_yaml_mapping,
    split_front_matter,
)

__all__ = ["ListedSkills", "SkillsExtension"]

logger = logging.getLogger(__name__)


_INVALID_PARAMS = -32602  # the extension: an unknown skill URI in skills/get
_JSON = TypeAdapter(Any)


@runtime_checkable
class ListedSkills(Protocol):
    """A resource source that already knows some skills' entries (an MCP server's skills)."""

    def skill_entry(self, skill_md: str, skills: frozenset[str] | None) -> SkillEntry | None:
        """The entry of the skill whose ``SKILL.md`` is ``skill_md``, or None to build it."""
        ...


class SkillsExtension(Extension):
    """``skills/list`` / ``skills/get`` over a skill-file resource source.

    Args:
        resources: The skill files (``skill://`` URIs), as the gateway serves them.
        offered: The session's skill filter for a request (None: every skill).
    """

    identifier = SKILLS_EXTENSION

    def __init__(
        self,
        resources: ResourceSource,
        offered: Callable[[ServerRequestContext[Any, Any]], frozenset[str] | None],
    ) -> None:
        self._resources = resources
        self._offered = offered

    def methods(self) -> Sequence[MethodBinding]:
        """``skills/list`` and ``skills/get``, at every protocol version."""
        return (
            MethodBinding("skills/list", mt.PaginatedRequestParams, self._list),
            MethodBinding("skills/get", GetSkillRequestParams, self._get),
        )

    async def _list(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams
    ) -> ListSkillsResult:
        skills = self._offered(ctx)
        entries: list[SkillEntry] = []
        for skill_md, files in _by_skill(self._resources.list_resources(skills)).items():
            try:
                entries.append(await self._entry(skill_md, files, skills))
            except _Unservable as error:
                logger.warning("skills/list leaves out %s: %s", skill_md, error)
        # private: the listing depends on the caller's profile; 0: files may change on disk
        return ListSkillsResult(skills=entries, ttl_ms=0, cache_scope="private")

    async def _get(
        self, ctx: ServerRequestContext[Any, Any], params: GetSkillRequestParams
    ) -> GetSkillResult:
        skills = self._offered(ctx)
        files = _by_skill(self._resources.list_resources(skills)).get(params.uri)
        if files is None:
            raise MCPError(
                _INVALID_PARAMS,
                f"{params.uri!r} is not the SKILL.md of a skill offered to this session",
                data={"uri": params.uri},
            )
        try:
            entry = await self._entry(params.uri, files, skills)
        except _Unservable as error:
            raise MCPError(_INVALID_PARAMS, f"skill {params.uri!r} {error}") from None
        return GetSkillResult(skill=entry, ttl_ms=0, cache_scope="private")

    async def _entry(
        self, skill_md: str, files: list[ResourceLink], skills: frozenset[str] | None
    ) -> SkillEntry:
        if isinstance(self._resources, ListedSkills):
            known = self._resources.skill_entry(skill_md, skills)
            if known is not None:
                return known
        if len(files) > MAX_SKILL_FILES:
            raise _Unservable(f"has {len(files)} files (more than {MAX_SKILL_FILES})")
        listed: list[SkillFile] = []
        total = 0
        front: dict[str, Any] = {}
        for link in files:
            try:
                data = _raw(await self._resources.read_resource(link.uri, skills))
            except SagentsError as error:
                raise _Unservable(f"cannot serve {link.uri!r}: {error.message}") from None
            total += len(data)
            if total > MAX_SKILL_BYTES:
                raise _Unservable(f"is larger than {MAX_SKILL_BYTES} bytes")
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            listed.append(SkillFile(uri=link.uri, digest=digest, size=len(data)))
            if link.uri == skill_md:
                front = _front_matter(data, link)
        return SkillEntry(uri=skill_md, frontmatter=front, resources=listed)


class _Unservable(Exception):
    """A skill the extension cannot describe completely (it is left out, never cut short)."""


def _by_skill(links: list[ResourceLink]) -> dict[str, list[ResourceLink]]:
    """The skill files grouped by the URI of their skill's ``SKILL.md`` (listing order).

    A skill's ``SKILL.md`` is the link named as the skill (``SkillResources`` names other
    files ``<skill>/<path>``); each file belongs to the skill whose directory URI is the
    longest prefix of its own (``skill://docs/pdf-tools/`` before ``skill://docs/``).
    """
    bases = {
        link.uri.removesuffix("SKILL.md"): link.uri
        for link in links
        if link.uri.startswith(SKILL_URI_PREFIX)
        and link.uri.endswith("/SKILL.md")
        and "/" not in link.name
    }
    grouped: dict[str, list[ResourceLink]] = {uri: [] for uri in bases.values()}
    for link in links:
        owner = max((b for b in bases if link.uri.startswith(b)), key=len, default=None)
        if owner is not None:
            grouped[bases[owner]].append(link)
    return grouped


def _raw(resource: EmbeddedResource) -> bytes:
    """The raw bytes of a read skill file (what the digest covers)."""
    if resource.blob is not None:
        return base64.b64decode(resource.blob)
    return (resource.text or "").encode("utf-8")


def _front_matter(data: bytes, link: ResourceLink) -> dict[str, Any]:
    """The front matter as written, JSON-safe; ``name`` and ``description`` filled in from
    the skill when the file has none (the ``skill.yaml`` form)."""
    front: dict[str, Any] = {}
    try:
        split = split_front_matter(decode_text(data))
        if split.front_matter is not None:
            front = _JSON.dump_python(load_yaml_mapping(split.front_matter), mode="json")
    except FrontMatterError as error:
        raise _Unservable(f"has unreadable front matter: {error}") from None
    skill = unquote(link.uri.removeprefix(SKILL_URI_PREFIX).partition("/")[0])
    front.setdefault("name", skill)
    front.setdefault("description", link.description or "")
    return front
