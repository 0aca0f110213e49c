"""Where an agent's paused runs and sessions live: ``SAgent(store=...)`` resolved once
(docs/agent.md, "Pausing and resuming").

``None`` is the embedded SQLite store of the data directory (paused runs only); an opened
store (``sagents.store.open_store``) or its ``agents``, or any
:class:`~sagents.store.AgentStore`, is used as it is; a ``postgresql://`` URL is opened by
``async with`` the agent. With a store given, sessions are kept there too; a session the store
did not keep stays this process's latest copy, saved again before the store's is read.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from contextlib import AsyncExitStack
from typing import cast

from sagents.audit._store import default_data_dir
from sagents.errors import RunStateError, SagentsError, StoreUnavailableError
from sagents.store._agents import SqliteAgentStore
from sagents.store._location import parse_store_url
from sagents.store._open import open_store
from sagents.store._protocols import AgentStore

__all__ = ["StoreLink"]

logger = logging.getLogger(__name__)


class StoreLink:
    """An agent's store, as ``SAgent(store=...)`` named it.

    Args:
        store: As ``SAgent(store=...)``.
        max_unsaved: Sessions the store did not keep that are held for their next save; past
            it the oldest is dropped, with an error in the log.

    Attributes:
        given: Whether a store was given (then sessions are kept in it too).
    """

    def __init__(self, store: AgentStore | str | object | None, *, max_unsaved: int) -> None:
        self.given = store is not None
        self.max_unsaved = max_unsaved
        # session id -> the document the store did not keep (least recent first)
        self._unsaved: OrderedDict[str, str] = OrderedDict()
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

    async def save_session(self, session_id: str, document: str) -> None:
        """Save a session's document; if the store fails, it is held until
        :meth:`save_unsaved` stores it.

        Raises:
            StoreError: the store failed (the document is held).
            RunStateError: a URL store that is not open (the document is held).
        """
        self._unsaved.pop(session_id, None)  # an older copy held: this one replaces it
        try:
            await self.store.save_session(session_id, document)
        except SagentsError:  # StoreError, RunStateError: held, and the caller is told
            self._unsaved[session_id] = document
            while len(self._unsaved) > self.max_unsaved:
                dropped, _ = self._unsaved.popitem(last=False)
                logger.error(
                    "the session %r was never stored and is dropped: more than %d sessions "
                    "wait for the store",
                    dropped,
                    self.max_unsaved,
                )
            raise

    async def save_unsaved(self, session_id: str) -> None:
        """Store the session's held document, if the store failed to keep its last save: this
        process's copy is then the latest, which a load must not replace.

        Raises:
            StoreError: the store still fails (the document stays held).
            RunStateError: a URL store that is not open (the document stays held).
        """
        document = self._unsaved.get(session_id)
        if document is None:
            return
        await self.store.save_session(session_id, document)
        if self._unsaved.get(session_id) is document:  # not replaced by a newer one meanwhile
            del self._unsaved[session_id]

    @property
    def unsaved(self) -> tuple[str, ...]:
        """The ids of the sessions held for their next save (least recent first)."""
        return tuple(self._unsaved)

    async def save_all_unsaved(self) -> None:
        """Try once to store every held session (the agent closes): each one the store still
        refuses is logged at ERROR with the store's error, and stays held. Once the store is
        unreachable the others are not tried (each would wait the store's own timeout again):
        they are logged with that error."""
        down: StoreUnavailableError | None = None
        for session_id in list(self._unsaved):
            error: SagentsError | None = down
            if error is None:
                try:
                    await self.save_unsaved(session_id)
                except SagentsError as failed:  # StoreError, RunStateError: logged, never raised
                    error = failed
                    if isinstance(failed, StoreUnavailableError):
                        down = failed
            if error is not None:
                logger.error(
                    "the session %r was never stored and is lost when this process ends: %s",
                    session_id,
                    error.message,
                )
