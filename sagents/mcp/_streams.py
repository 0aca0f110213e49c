"""``ReadStream`` / ``WriteStream``: the shape of an MCP transport's two streams, as the SDK's
``ClientSession`` takes them (anyio memory object streams, or wrappers of them).

Structural protocols of our own, method for method the SDK's (which it keeps in a private
module): what satisfies one satisfies the other.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self, TypeVar

__all__ = ["ReadStream", "WriteStream"]

T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)


class ReadStream(Protocol[T_co]):
    """Items read from a transport."""

    async def receive(self) -> T_co: ...
    async def aclose(self) -> None: ...
    def __aiter__(self) -> ReadStream[T_co]: ...
    async def __anext__(self) -> T_co: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None: ...


class WriteStream(Protocol[T_contra]):
    """Items written to a transport."""

    async def send(self, item: T_contra, /) -> None: ...
    async def aclose(self) -> None: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None: ...
