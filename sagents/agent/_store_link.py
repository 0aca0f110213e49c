"""Where an agent's paused runs and sessions live: ``SAgent(store=...)`` resolved once
(docs/agent.md, "Pausing and resuming").

``None`` is the embedded SQLite store of the data directory (paused runs only); an opened
store (``sagents.store.open_store``) or its ``agents``, or any
:class:`~sagents.store.AgentStore`, is used as it is; a ``postgresql://`` URL is opened by
``async with`` the agent. With a store given, sessions are kept there too.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import cast

from sagents.audit._store import default_data_dir
from sagents.errors import RunStateError
from sagents.store._agents import SqliteAgentStore
from sagents.store._location import parse_store_url
from sagents.store._open import open_store
from sagents.store._protocols import AgentStore

__all__ = ["StoreLink"]


class StoreLink:
    """An agent's store, as ``SAgent(store=...)`` named it.

    Attributes:
        given: Whether a store was given (then sessions are kept in it too).
    """

    def __init__(self, store: AgentStore | str | object | None) -> None:
        self.given = store is not None
        self._url = store if isinstance(store, str) else None
        self._store: AgentStore | None = None
        if store is not None and not isinstance(store, str):
            self._store = cast(AgentStore, getattr(store, "agents", store))
        self._stack: AsyncExitStack | None = None

    async def open(self) -> None:
        """Open the store a URL names (nothing to do for the others)."""
        if self._url is not None and self._store is None:
            stack = AsyncExitStack()
            opened = await stack.enter_async_context(
                open_store(parse_store_url(self._url), data_dir=default_data_dir())
            )
            self._store, self._stack = opened.agents, stack

    async def close(self) -> None:
        """Close the store :meth:`open` opened."""
        if self._stack is not None:
            stack, self._stack = self._stack, None
            self._store = None
            await stack.aclose()

    @property
    def store(self) -> AgentStore:
        """The store (the embedded one made on first use when none was given).

        Raises:
            RunStateError: a URL store that is not open.
        """
        if self._store is None:
            if self._url is not None:
                raise RunStateError(
                    "this agent's store is a URL and is not open",
                    hint="enter the agent first: async with SAgent(..., store=url) as agent",
                    details={"reason": "store"},
                )
            self._store = SqliteAgentStore()
        return self._store
