"""The changed tool definitions a gateway holds, for its console (docs/gateway.md, "Pinned
definitions"; docs/console.md)."""

from __future__ import annotations

from dataclasses import dataclass

from sagents.mcp import MCPSupervisor
from sagents.store._pins import ToolPin
from sagents.store._protocols import PinStore

__all__ = ["ToolChanges"]


@dataclass(frozen=True, kw_only=True)
class ToolChanges:
    """The held changes of a gateway's upstream tools, and their acceptance.

    Attributes:
        pins: The gateway store's pinned definitions.
        supervisor: The gateway's upstream servers (None: no server registered yet).
    """

    pins: PinStore
    supervisor: MCPSupervisor | None

    async def changed(self) -> list[ToolPin]:
        """The held changes of the gateway's servers, by server and tool.

        Raises:
            StoreError: the store cannot be used.
        """
        servers = set(self.supervisor.server_names) if self.supervisor is not None else set()
        return [pin for pin in await self.pins.changes() if pin.server in servers]

    async def accept(
        self, server: str, tool: str | None, *, offered_digest: str | None = None
    ) -> list[ToolPin]:
        """Accept the held change of ``tool`` (every held tool of ``server`` when None), only
        while it offers ``offered_digest`` when given (the change the operator was shown); the
        server's tools are checked again at once, so an accepted one is released now.

        Raises:
            StoreError: the store cannot be used.
        """
        accepted = await self.pins.accept(server, tool, offered_digest=offered_digest)
        if accepted and self.supervisor is not None:
            await self.supervisor.review_definitions(server)
        return accepted
