"""``sagents serve`` on the real layers: the config's MCP servers, skills and progress.

:class:`ConfiguredGateway` is the :class:`~sagents.gateway.server.Gateway` that
:func:`~sagents.gateway.factory.build_gateway` returns (issue 7, §1):

- one :class:`~sagents.tool.tool_manager.ToolManager` holds every configured MCP server's tools
  (``<server>__<tool>``, with their annotations and permission classes), the local tools of the
  ``localTools`` modules (plain names; a clash with any other tool is refused) and, when the
  config has a ``skills`` section, ``load_skill`` / ``read_skill_file``;
- the gateway serves it through a :class:`~sagents.tool.tool_proxy.ToolProxy`; each session's
  mode and profile filter what is offered (:mod:`sagents.gateway.policy`);
- the manager's progress hub feeds each call's ``tool_progress`` (upstream
  ``notifications/progress`` arrive as ``info`` text) to the client as
  ``notifications/progress`` (:class:`~sagents.gateway.sources.HubProgressSource`);
- skill files are resources (``skill://<skill>/<path>``);
- an upstream ``notifications/tools/list_changed`` is applied to the registry by the tool core,
  then passed on to every connected client.

Servers are started side by side when the gateway is entered; one that cannot start is logged
and kept supervised (its tools appear, with a ``list_changed``, when it comes up), so one broken
server does not keep the others from being served.
"""

from __future__ import annotations

import importlib
import logging
from types import TracebackType
from typing import Self

import anyio

from sagents.config.loader import MCPServerConfig, SagentsConfig, load_config
from sagents.errors import (
    ConfigError,
    SagentsError,
    SkillRootError,
    ToolNameConflictError,
    UpstreamUnavailableError,
)
from sagents.gateway.approval import Approver
from sagents.gateway.seams import ProxyProvider
from sagents.gateway.server import Gateway
from sagents.gateway.settings import GatewaySettings
from sagents.gateway.sources import HubProgressSource, SkillResources
from sagents.progress.hub import ProgressHub
from sagents.skill.manager import SkillManager
from sagents.skill.proxy import SkillProxy, SkillSource
from sagents.skill.session import SkillSession
from sagents.skill.skill_tool import SkillTools
from sagents.tool.tool_manager import ToolManager
from sagents.tool.tool_proxy import ToolProxy

__all__ = ["ConfiguredGateway"]

logger = logging.getLogger(__name__)


class ConfiguredGateway(Gateway):
    """The gateway of a config file; ``async with`` starts its servers and closes them.

    Args:
        settings: What ``sagents serve`` was given (``settings.config`` may be None: then only
            the gateway's own tools are served).
        approver: Decides approvals instead of asking the client (tests); None asks the client.

    Raises:
        ConfigError: the config file is unreadable or invalid (raised here, before anything
            starts).
    """

    def __init__(self, settings: GatewaySettings, *, approver: Approver | None = None) -> None:
        self.settings = settings
        self.config = load_config(settings.config) if settings.config else SagentsConfig()
        self.hub = ProgressHub()
        self.manager = ToolManager(progress_hub=self.hub)
        _register_local_tools(self.manager, self.config)
        self.skills = _skills(self.config, settings)
        if self.skills is not None:
            source: SkillSource = self.skills
            SkillTools(lambda _context: SkillSession(source)).register(self.manager)
        background = settings.background_after_s
        if background is None:
            background = self.config.background_calls.auto_after_sec
        super().__init__(
            ProxyProvider(ToolProxy(self.manager)),
            mode=settings.mode,
            profile=settings.profile,
            token_profiles=settings.token_profiles,
            progress=HubProgressSource(self.hub),
            resources=SkillResources(self.skills) if self.skills is not None else None,
            approver=approver,
            background_after_s=background,
            workspace=str(settings.workspace) if settings.workspace else None,
            name=settings.name,
        )

    async def __aenter__(self) -> Self:
        await self.manager.__aenter__()
        try:
            if self.config.servers:
                self.manager.on_mcp_tools_changed(self._upstream_tools_changed)
                refused: list[ConfigError] = []
                async with anyio.create_task_group() as tg:
                    for server in self.config.servers:
                        tg.start_soon(self._start_server, server, refused)
                if refused:
                    raise refused[0]
            await super().__aenter__()
        except BaseException:
            await self.manager.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        try:
            return await super().__aexit__(exc_type, exc, tb)
        finally:
            with anyio.CancelScope(shield=True):
                await self.manager.aclose()

    async def _start_server(self, server: MCPServerConfig, refused: list[ConfigError]) -> None:
        try:
            names = await self.manager.register_mcp_server(
                server.name, server.params, server.settings
            )
        except ToolNameConflictError as error:
            refused.append(
                ConfigError(
                    f"MCP server {server.name!r}: {error.message}",
                    file=str(self.config.source) if self.config.source else None,
                    key=f"mcpServers.{server.name}",
                )
            )
            return
        except UpstreamUnavailableError as error:
            logger.warning(
                "MCP server %r is not available (%s); retrying in the background",
                server.name,
                error.message,
            )
            await self.manager.register_mcp_server(
                server.name, server.params, server.settings, wait=False
            )
            return
        logger.info("MCP server %r: %d tools", server.name, len(names))

    async def _upstream_tools_changed(self, server: str, names: list[str]) -> None:
        await self.notify_tools_changed()


def _register_local_tools(manager: ToolManager, config: SagentsConfig) -> None:
    """Register the ``TOOLS`` of each ``localTools`` module under their plain names.

    Raises:
        ConfigError: a module cannot be imported, has no ``TOOLS`` list, or a tool cannot be
            registered (a bad definition, or a name registered twice).
    """
    file = str(config.source) if config.source else None
    for index, module_name in enumerate(config.local_tools):
        key = f"localTools.modules.{index}"
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise ConfigError(
                f"cannot import {module_name!r}: {error}", file=file, key=key
            ) from error
        tools = getattr(module, "TOOLS", None)
        if not isinstance(tools, list | tuple):
            raise ConfigError(f"module {module_name!r} has no TOOLS list", file=file, key=key)
        for tool in tools:
            try:
                manager.register_tool(tool)
            except SagentsError as error:
                raise ConfigError(f"{module_name}: {error.message}", file=file, key=key) from error


def _skills(config: SagentsConfig, settings: GatewaySettings) -> SkillSource | None:
    """The skills of the config's directories (the profile's only), or None without any."""
    if not config.skills.directories:
        return None
    manager = SkillManager()
    for index, directory in enumerate(config.skills.directories):
        try:
            manager.add_skill_dir(directory)  # each bad skill is logged by the manager
        except SkillRootError as error:
            raise ConfigError(
                error.message,
                file=str(config.source) if config.source else None,
                key=f"skills.directories.{index}",
            ) from error
    profile = settings.profile
    if profile is not None and profile.skills is not None:
        return SkillProxy(manager, available_skills=sorted(profile.skills))
    return manager
