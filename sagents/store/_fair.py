"""A map bounded in total and per owner, so that one owner cannot push out another's entries.

A plain least-recently-added cache shared by several principals lets one of them evict all the
others' entries by adding many of its own (one client's approvals pushing out the pending
approvals of everyone else). :class:`FairMap` caps each owner's entries (an owner over its cap
loses its own oldest) and, when the total is full, takes the oldest entry of the owner that holds
the most.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["FairMap"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class FairMap(Generic[K, V]):
    """Entries in insertion order, each charged to an owner.

    Args:
        limit: Entries kept in all. per_owner: Entries kept for one owner.
    """

    def __init__(self, *, limit: int, per_owner: int) -> None:
        self._limit = limit
        self._per_owner = per_owner
        self._entries: OrderedDict[K, tuple[str, V]] = OrderedDict()
        self._counts: Counter[str] = Counter()

    def put(self, key: K, value: V, owner: str) -> list[V]:
        """Add or replace ``key`` (then the newest), charged to ``owner``.

        Returns:
            The values evicted to make room (as above), oldest first.
        """
        self.pop(key)
        evicted: list[V] = []
        if self._counts[owner] >= self._per_owner:
            evicted.append(self._pop_oldest_of(owner))
        while len(self._entries) >= self._limit:
            biggest, _ = self._counts.most_common(1)[0]
            evicted.append(self._pop_oldest_of(biggest))
        self._entries[key] = (owner, value)
        self._counts[owner] += 1
        return evicted

    def touch(self, key: K) -> None:
        """Make ``key`` the newest entry (a use), evicting nothing."""
        if key in self._entries:
            self._entries.move_to_end(key)

    def _pop_oldest_of(self, owner: str) -> V:
        key = next(k for k, (o, _) in self._entries.items() if o == owner)
        _, value = self._entries.pop(key)
        self._uncount(owner)
        return value

    def _uncount(self, owner: str) -> None:
        self._counts[owner] -= 1
        if not self._counts[owner]:
            del self._counts[owner]

    def get(self, key: K) -> V | None:
        """The value of ``key``, or None."""
        found = self._entries.get(key)
        return found[1] if found is not None else None

    def pop(self, key: K) -> V | None:
        """Remove ``key``; its value, or None."""
        found = self._entries.pop(key, None)
        if found is None:
            return None
        owner, value = found
        self._uncount(owner)
        return value

    def values(self) -> list[V]:
        """The values, oldest first."""
        return [value for _, value in self._entries.values()]

    def items(self) -> list[tuple[K, V]]:
        """The keys and values, oldest first."""
        return [(key, value) for key, (_, value) in self._entries.items()]

    def count_of(self, owner: str) -> int:
        """How many entries ``owner`` has."""
        return self._counts[owner]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._entries))
