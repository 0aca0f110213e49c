"""``Lifespan``: an object whose lifetime is one ``@asynccontextmanager`` method
(docs/architecture.md, "Lifecycles").

An object that owns tasks or resources writes what it opens, in order, then ``yield``, then
what closes, in one generator (``_lifespan``), the shape of the MCP SDK's ``stdio_client``;
several parts are composed with one ``AsyncExitStack`` inside it, and helper tasks whose
body's error must come out unwrapped run in ``sagents.progress._scope.run_beside``.
``async with obj:`` runs it: this base is the one place that enters and leaves such a
generator by hand.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Self, TypeVar

__all__ = ["Lifespan", "body_errors_apart"]

_T = TypeVar("_T")


class Lifespan:
    """Base of an async context manager whose lifetime is its ``_lifespan`` generator."""

    __opened: AbstractAsyncContextManager[None] | None = None

    def _lifespan(self) -> AbstractAsyncContextManager[None]:
        """Open what the object owns, ``yield`` while it is used, close it (override with an
        ``@asynccontextmanager`` method)."""
        raise NotImplementedError

    @property
    def _entered(self) -> bool:
        """Whether the object is inside its ``async with``."""
        return self.__opened is not None

    async def __aenter__(self) -> Self:
        if self.__opened is not None:
            raise RuntimeError(f"{type(self).__name__} is already entered")
        opening = self._lifespan()
        await opening.__aenter__()
        self.__opened = opening
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        opened, self.__opened = self.__opened, None
        if opened is None:
            raise RuntimeError(f"{type(self).__name__} was not entered")
        return await opened.__aexit__(exc_type, exc, tb)


@asynccontextmanager
async def body_errors_apart(context: AbstractAsyncContextManager[_T]) -> AsyncIterator[_T]:
    """Enter ``context``; on leaving, leave it as if the body had ended normally, then let the
    body's own error (if any) propagate as it is (a part whose leaving must not see the
    error: a task group would cancel its tasks and wrap the error in an ``ExceptionGroup``)."""
    failure: BaseException | None = None
    async with context as value:
        try:
            yield value
        except BaseException as error:  # noqa: BLE001 - re-raised below, once the context is left
            failure = error
    if failure is not None:
        raise failure
