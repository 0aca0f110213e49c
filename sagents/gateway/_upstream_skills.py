"""The skills of upstream MCP servers in ``sagents serve`` (docs/gateway.md, "Skills of
upstream servers").

A server whose config entry says ``"skills": true`` has its skills (the MCP Skills extension)
joined to the gateway's, after the local skill roots, as ``<server>__<skill>``
(:class:`~sagents.skill._mcp_source.MCPSkillSource`): listed from its ``skills/list`` within its
``listTimeout``, fetched on first use within its ``callTimeout``, through the supervisor's
sessions (the call path's concurrency slots and restart handling). A server that is not ready
hides its skills.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Awaitable, Callable

import mcp_types as mt

from sagents.audit._store import default_data_dir
from sagents.config._loader import SagentsConfig
from sagents.errors import UpstreamUnavailableError
from sagents.mcp import TOOL_NAME_SEPARATOR
from sagents.mcp._ext_types import ListSkillsRequest, ListSkillsResult
from sagents.mcp._supervisor import MCPSupervisor
from sagents.skill._mcp_source import MCPSkillSource, SkillServer, remove_abandoned_caches
from sagents.skill._proxy import SkillSource, prepare_skill
from sagents.skill._schema import SkillProblem, SkillSchema
from sagents.skill.mcp_skills import FETCH_TIMEOUT_S

__all__ = [
    "UPSTREAM_SKILLS_DIR",
    "SkillsWithoutServers",
    "SupervisorSkillRequests",
    "upstream_skill_source",
]

logger = logging.getLogger(__name__)

UPSTREAM_SKILLS_DIR = "mcp-skills"
"""Where fetched skills are kept, under the data directory (one directory per gateway
process, removed when it stops)."""


class SupervisorSkillRequests:
    """``skills/list`` and ``resources/read`` on the supervisor's upstream sessions (None:
    the tool core has no MCP servers, so every request says the server is not connected)."""

    def __init__(self, supervisor: MCPSupervisor | None = None) -> None:
        self.supervisor = supervisor

    def _require(self, server: str) -> MCPSupervisor:
        if self.supervisor is None:
            raise UpstreamUnavailableError(
                f"MCP server {server!r} is not connected yet", details={"server": server}
            )
        return self.supervisor

    async def list_skills(self, server: str, cursor: str | None) -> ListSkillsResult:
        """One page of ``skills/list`` on ``server``."""
        params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
        return await self._require(server).send_request(
            server, ListSkillsRequest(params=params), ListSkillsResult
        )

    async def read_resource(self, server: str, uri: str) -> mt.ReadResourceResult:
        """``resources/read`` of ``uri`` on ``server``."""
        return await self._require(server).read_resource(server, uri)

    def ready(self, server: str) -> bool:
        """Whether ``server`` is up (its skills are shown only then)."""
        if self.supervisor is None:
            return False
        try:
            return self.supervisor.status(server).state == "ready"
        except KeyError:
            return False


def upstream_skill_source(
    config: SagentsConfig,
    requests: SupervisorSkillRequests,
    *,
    on_changed: Callable[[str], Awaitable[None]],
) -> MCPSkillSource | None:
    """The skills of the config's skill-serving servers, or None when there are none."""
    wanted = set(config.skills.servers)
    servers = [
        SkillServer(
            name=server.name,
            list_timeout_s=server.settings.list_timeout,
            fetch_timeout_s=server.settings.call_timeout or FETCH_TIMEOUT_S,
        )
        for server in config.servers
        if server.name in wanted
    ]
    if not servers:
        return None
    parent = default_data_dir() / UPSTREAM_SKILLS_DIR
    for abandoned in remove_abandoned_caches(parent):  # a killed gateway's copies
        logger.info("removed the skill copies of a gateway that ended: %s", abandoned)
    cache = parent / f"{os.getpid()}-{secrets.token_hex(4)}"
    return MCPSkillSource(servers, requests, cache, ready=requests.ready, on_changed=on_changed)


class SkillsWithoutServers:
    """A session's skills without those of the MCP servers its profile's ``servers`` leaves
    out, decided by name (``<server>__<skill>``) at every read, so a skill such a server lists
    after the session started stays hidden too, and one an offered server lists later shows.

    Args:
        source: The gateway's skills (local roots, then the servers').
        hidden: The skill-serving servers whose skills are hidden.
    """

    def __init__(self, source: SkillSource, hidden: frozenset[str]) -> None:
        self._source = source
        self._hidden = hidden

    def _shown(self, name: str | None) -> bool:
        if name is None:
            return True
        server, separator, _ = name.partition(TOOL_NAME_SEPARATOR)
        return not separator or server not in self._hidden

    def list_skills(self) -> list[SkillSchema]:
        """The source's skills that are not hidden, in its order."""
        return [skill for skill in self._source.list_skills() if self._shown(skill.name)]

    def list_skill_names(self) -> list[str]:
        """The names of :meth:`list_skills`, in the same order."""
        return [skill.name for skill in self.list_skills()]

    def get_skill(self, name: str) -> SkillSchema | None:
        """The skill ``name``, or None when it is hidden or unknown."""
        return self._source.get_skill(name) if self._shown(name) else None

    async def fetch_skill(self, name: str) -> None:
        """Fetch ``name`` if it is not hidden (see :func:`sagents.skill._proxy.prepare_skill`)."""
        if self._shown(name):
            await prepare_skill(self._source, name)

    def problems(self) -> list[SkillProblem]:
        """The source's problems, less those of hidden skills."""
        return [problem for problem in self._source.problems() if self._shown(problem.skill)]

    def reload(self) -> None:
        """Reload the source."""
        self._source.reload()
