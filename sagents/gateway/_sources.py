"""The gateway's seams on the real layers: progress from the hub, skill files as resources.

- :class:`HubProgressSource` adapts a :class:`~sagents.progress.ProgressHub` to the gateway's
  :class:`~sagents.gateway._seams.ProgressSource`: a subscription registers a queue for the
  session that keeps only the events whose ``tool_call_id`` is the call's, and hands them on
  synchronously as the hub publishes them (no pump task, so nothing published before the call
  returns can be missed by the gateway's final drain).
- :class:`SkillResources` serves the files of the configured skills as MCP resources
  (``skill://<skill>/<path>``; docs/gateway.md), filtered by the session profile's skills. An
  MCP server's skill ``<server>__<skill>`` is ``skill://<server>/<skill>/<path>``: the server
  is a prefix and the last segment before the file is the skill's own name, as the Skills
  extension requires ("the final segment of the skill path is the skill's name"); its files
  are fetched on the first read (:class:`~sagents.skill._mcp_source.MCPSkillSource`).
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote, unquote

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from sagents.core._result import EmbeddedResource, ResourceLink
from sagents.core.events import Event
from sagents.errors import SkillNotFoundError, SkillResourceNotFoundError
from sagents.gateway._seams import PROGRESS_BUFFER
from sagents.mcp import TOOL_NAME_SEPARATOR
from sagents.mcp._ext_types import SkillEntry, SkillFile
from sagents.progress._hub import ProgressHub
from sagents.progress._queue import EventQueue
from sagents.skill._disclosure import read_skill_resource
from sagents.skill._mcp_source import MCPSkillSource
from sagents.skill._proxy import SkillSource, prepare_skill
from sagents.skill._schema import SkillSchema

__all__ = ["SKILL_URI_PREFIX", "HubProgressSource", "SkillResources", "skill_uri"]

SKILL_URI_PREFIX = "skill://"
"""Skill files are ``skill://<skill name>/<path inside the skill>`` (path segments URL-quoted)."""


class _CallQueue(EventQueue):
    """A hub queue that forwards one tool call's events into a memory stream as they arrive."""

    def __init__(self, tool_call_id: str, send: MemoryObjectSendStream[object]) -> None:
        super().__init__(max_buffered=PROGRESS_BUFFER)
        self._tool_call_id = tool_call_id
        self._send = send

    def offer(self, event: Event) -> bool:
        if self.closed or getattr(event, "tool_call_id", None) != self._tool_call_id:
            return False
        try:
            self._send.send_nowait(event)
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False  # progress is droppable; the client is behind or gone
        return True

    def close(self) -> None:
        super().close()
        self._send.close()


class HubProgressSource:
    """The progress hub as the gateway's ``ProgressSource``.

    Args:
        hub: The hub the tool core publishes to (``ToolManager(progress_hub=hub)``).
    """

    def __init__(self, hub: ProgressHub) -> None:
        self.hub = hub

    @asynccontextmanager
    async def subscribe(
        self, session_id: str, tool_call_id: str
    ) -> AsyncIterator[MemoryObjectReceiveStream[object]]:
        """Receive the session's events of ``tool_call_id`` while the context is open."""
        send, receive = anyio.create_memory_object_stream[object](PROGRESS_BUFFER)
        queue = _CallQueue(tool_call_id, send)
        self.hub.register_progress_queue(session_id, queue)
        try:
            yield receive
        finally:
            self.hub.unregister_progress_queue(session_id, queue)
            receive.close()


class SkillResources:
    """The files of the skills as resources (``skill://<skill>/<path>``).

    Args:
        skills: The skills (a ``SkillManager`` or ``SkillProxy``).
        max_bytes: Largest file served, in bytes.
        upstream: The MCP servers' skills among ``skills``, whose ``skills/list`` entries
            (digests included) are passed on without fetching their files.
    """

    def __init__(
        self,
        skills: SkillSource,
        *,
        max_bytes: int = 1024 * 1024,
        upstream: MCPSkillSource | None = None,
    ) -> None:
        self.skills = skills
        self.max_bytes = max_bytes
        self.upstream = upstream

    def _offered(self, skills: frozenset[str] | None) -> list[SkillSchema]:
        return [s for s in self.skills.list_skills() if skills is None or s.name in skills]

    def list_resources(self, skills: frozenset[str] | None) -> list[ResourceLink]:
        """Every file of every skill offered to the session, ``SKILL.md`` first per skill."""
        links: list[ResourceLink] = []
        for skill in self._offered(skills):
            files = sorted(skill.files, key=lambda path: (path != "SKILL.md", path))
            for path in files:
                links.append(
                    ResourceLink(
                        uri=skill_uri(skill.name, path),
                        # SKILL.md is named as the skill (the MCP Skills extension,
                        # "Resource Metadata"); other files by their path in it
                        name=skill.name if path == "SKILL.md" else f"{skill.name}/{path}",
                        description=skill.description if path == "SKILL.md" else None,
                        mime_type=_mime(path),
                    )
                )
        return links

    async def read_resource(self, uri: str, skills: frozenset[str] | None) -> EmbeddedResource:
        """Read one skill file: UTF-8 text as ``text``, anything else as base64 ``blob``.

        Raises:
            SkillNotFoundError: not a skill URI, or the skill is not offered to the session.
            SkillResourceNotFoundError: the skill has no such file.
            PathNotAllowedError: the path leaves the skill's directory.
        """
        name, path = self._split(uri)
        skill = self.skills.get_skill(name)
        if (skills is not None and name not in skills) or skill is None:
            raise SkillNotFoundError(f"no skill {name!r} is offered to this session")
        if not path:
            raise SkillResourceNotFoundError(f"{uri!r} names no file of skill {name!r}")
        if path in skill.files:  # an MCP server's skill is fetched on first use; a path
            await prepare_skill(self.skills, name)  # outside its list is refused below
        data = await anyio.to_thread.run_sync(
            lambda: read_skill_resource(self.skills, name, path, max_bytes=self.max_bytes)
        )
        mime = _mime(path)
        try:
            return EmbeddedResource(uri=uri, mime_type=mime, text=data.decode("utf-8"))
        except UnicodeDecodeError:
            blob = base64.b64encode(data).decode("ascii")
            return EmbeddedResource(uri=uri, mime_type=mime, blob=blob)

    def _split(self, uri: str) -> tuple[str, str]:
        """The skill name and the file's path of a skill URI (see :func:`skill_uri`).

        Raises:
            SkillNotFoundError: not a ``skill://`` URI.
        """
        if not uri.startswith(SKILL_URI_PREFIX):
            raise SkillNotFoundError(f"{uri!r} is not a skill resource")
        first, _, rest = uri.removeprefix(SKILL_URI_PREFIX).partition("/")
        second, _, path = rest.partition("/")
        if path:
            nested = f"{unquote(first)}{TOOL_NAME_SEPARATOR}{unquote(second)}"
            if self.skills.get_skill(nested) is not None:
                return nested, unquote(path)
        return unquote(first), unquote(rest)

    def skill_entry(self, skill_md: str, skills: frozenset[str] | None) -> SkillEntry | None:
        """The Skills extension entry of an MCP server's skill, from that server's own
        listing (its digests, sizes and front matter; the URIs the gateway serves), or None
        for any other skill (the extension then builds the entry from the files).
        """
        if self.upstream is None:
            return None
        try:
            name, path = self._split(skill_md)
        except SkillNotFoundError:
            return None
        found = self.upstream.entry(name)
        served = self.skills.get_skill(name)
        if (
            path != "SKILL.md"
            or found is None
            or served is None
            or (skills is not None and name not in skills)
            or served is not self.upstream.get_skill(name)  # a local skill of that name wins
        ):
            return None
        entry, relatives = found
        assert not isinstance(entry.resources, str)  # the source lists no dynamic skill
        files = [
            SkillFile(uri=skill_uri(name, relative), digest=remote.digest, size=remote.size)
            for remote, relative in zip(entry.resources, relatives, strict=True)
        ]
        return SkillEntry(uri=skill_md, frontmatter=entry.frontmatter, resources=files)


def skill_uri(name: str, path: str) -> str:
    """The resource URI of file ``path`` (relative POSIX path) of skill ``name``; an MCP
    server's skill ``<server>__<skill>`` is ``skill://<server>/<skill>/<path>``."""
    server, separator, skill = name.partition(TOOL_NAME_SEPARATOR)
    if separator and server and skill:
        prefix = f"{quote(server, safe='')}/{quote(skill, safe='')}"
    else:
        prefix = quote(name, safe="")
    return f"{SKILL_URI_PREFIX}{prefix}/{quote(path, safe='/')}"


def _mime(path: str) -> str:
    if path.endswith(".md"):
        return "text/markdown"
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "application/octet-stream"
