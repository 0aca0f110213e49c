"""``open_gateway(settings)``: the gateway ``sagents serve`` runs, built from open parts.

``async with open_gateway(settings) as gateway`` opens the store, the tool manager with the
config's MCP servers and local tools, the run_script host and the built-in tools, in that
order, then builds a :class:`~sagents.gateway._runtime.ConfiguredGateway` over them (no part
is bound after the gateway exists) and enters it; leaving closes everything in reverse order.
:func:`build_gateway` is the same, with the config checked at once (docs/gateway.md).
:class:`EmptyProvider` remains for embedding the gateway with no tools at all.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType

from sagents.gateway._empty import EmptyProvider
from sagents.gateway._runtime import ConfiguredGateway, open_configured_gateway, plan_gateway
from sagents.gateway._settings import GatewaySettings
from sagents.gateway._tool_search import ToolRanker
from sagents.tool._approval import Approver, check_approver
from sagents.tool.impl import VisionModel

__all__ = ["EmptyProvider", "build_gateway", "open_gateway"]


class _OpenOnce(AbstractAsyncContextManager[ConfiguredGateway]):
    """The context manager of one gateway: entered once, with an error that says so otherwise
    (a generator-based one fails on a second entry with an unrelated ``AttributeError``)."""

    def __init__(
        self, call: str, opener: Callable[[], AbstractAsyncContextManager[ConfiguredGateway]]
    ) -> None:
        self._call = call
        self._make = opener  # called on entering: open_gateway checks the config then
        self._opener: AbstractAsyncContextManager[ConfiguredGateway] | None = None

    async def __aenter__(self) -> ConfiguredGateway:
        if self._opener is not None:
            raise RuntimeError(
                f"this {self._call} was already entered: each call opens one gateway, "
                f"entered once; call {self._call} again for another"
            )
        self._opener = self._make()
        return await self._opener.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._opener is not None, "__aexit__ without __aenter__"
        return await self._opener.__aexit__(exc_type, exc, tb)


def open_gateway(
    settings: GatewaySettings,
    *,
    approver: Approver | None = None,
    wait_for_servers: bool = True,
    image_model: VisionModel | None = None,
    tool_ranker: ToolRanker | None = None,
) -> AbstractAsyncContextManager[ConfiguredGateway]:
    """Open the gateway ``sagents serve`` runs, and close it on leaving.

    Use::

        async with open_gateway(settings) as gateway:
            await gateway.run_stdio()

    Args:
        settings: What ``sagents serve`` was given (``settings.config`` may be None: then only
            the gateway's own tools are served).
        approver: Decides approvals instead of asking the client (tests); None asks the client.
        wait_for_servers: True waits for every upstream server's first start attempt before
            the gateway is yielded; False yields at once and each server's tools are offered
            (with ``notifications/tools/list_changed`` to connected clients) as it becomes
            ready, so that ``sagents serve`` answers ``initialize`` without waiting. A local
            tool then keeps its name, and an upstream tool of the same name is skipped with a
            warning.
        image_model: The vision model of the ``image_understanding`` built-in tool, when the
            config enables it.
        tool_ranker: Ranks the tools of ``settings.tool_search`` (``sagents serve`` passes
            ``sagents.agent.suggest_tools``).

    Raises:
        ConfigError: the config file is unreadable or invalid, a skill directory is missing, a
            ``localTools`` module cannot be imported or has no ``TOOLS``,
            ``settings.tool_search`` without a ``tool_ranker``; or, while opening, a local or
            built-in tool whose name is already taken (what was opened is closed again).
        RuntimeError: the same ``open_gateway(...)`` entered a second time.
        TypeError: at the call, ``approver`` is no :class:`~sagents.tool.Approver` (no
            ``approve`` method).
    """
    check_approver(approver, "open_gateway")

    def opener() -> AbstractAsyncContextManager[ConfiguredGateway]:
        plan = plan_gateway(
            settings,
            approver=approver,
            wait_for_servers=wait_for_servers,
            image_model=image_model,
            tool_ranker=tool_ranker,
        )
        return open_configured_gateway(plan)

    return _OpenOnce("open_gateway(...)", opener)


def build_gateway(
    settings: GatewaySettings,
    *,
    approver: Approver | None = None,
    wait_for_servers: bool = True,
    image_model: VisionModel | None = None,
    tool_ranker: ToolRanker | None = None,
) -> AbstractAsyncContextManager[ConfiguredGateway]:
    """:func:`open_gateway`, with the config read and checked now rather than on entering.

    Returns:
        An async context manager: ``async with build_gateway(settings) as gateway`` opens the
        gateway as :func:`open_gateway` does.

    Raises:
        ConfigError: as :func:`open_gateway`, for what can be checked before opening anything.
        TypeError: ``approver`` is no :class:`~sagents.tool.Approver` (no ``approve`` method).
    """
    check_approver(approver, "build_gateway")
    plan = plan_gateway(
        settings,
        approver=approver,
        wait_for_servers=wait_for_servers,
        image_model=image_model,
        tool_ranker=tool_ranker,
    )
    return _OpenOnce("build_gateway(...)", lambda: open_configured_gateway(plan))
