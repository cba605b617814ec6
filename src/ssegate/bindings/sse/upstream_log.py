"""What a shared upstream delivered since its oldest stopped member's place: :class:`UpstreamLog`.

The sse-kafka proxy resumes a stream whose client stopped reading from the partition cache. An
upstream SSE server has no such cache to go back to, so an
:class:`~ssegate.bindings.sse.upstream.UpstreamFanout` keeps this log instead: the same role
for the SSE proxy, and the only place its members' missed events wait. A member whose client
stops reading takes a :class:`LogPlace` and is written nothing more; each delivery is appended
once, whatever the number of stopped members (the entries are the fanout's own encoded bytes and
parsed items, shared, not copied); once the client reads again it is written what the log holds
from its place on, in one write, and its place is released. The log keeps its entries from the
oldest place on and nothing at all while no member is stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Item = TypeVar("Item")


@dataclass(frozen=True, slots=True)
class LogPlace:
    """Where a stopped member left the log."""

    index: int
    """The absolute index of the first entry it is owed."""
    appended: int
    """The log's byte count then."""


class UpstreamLog(Generic[Item]):
    """The deliveries owed to stopped members: ``(items, encoded bytes)`` each."""

    __slots__ = ("_entries", "_first", "_places", "appended")

    def __init__(self) -> None:
        self._entries: list[tuple[Sequence[Item], bytes]] = []
        self._first = 0
        """The absolute index of ``_entries[0]``."""
        self._places: dict[int, int] = {}
        """Open places by index: how many."""
        self.appended = 0
        """Bytes appended while any place was open."""

    def __len__(self) -> int:
        """Entries kept."""
        return len(self._entries)

    @property
    def end(self) -> int:
        """The absolute index the next entry gets."""
        return self._first + len(self._entries)

    def mark(self) -> LogPlace:
        """A place reading every delivery from now on."""
        place = LogPlace(self.end, self.appended)
        self._places[place.index] = self._places.get(place.index, 0) + 1
        return place

    def append(self, items: Sequence[Item], data: bytes) -> None:
        """A delivery: kept while any place is open."""
        if self._places:
            self._entries.append((items, data))
            self.appended += len(data)

    def owed(self, place: LogPlace) -> int:
        """Bytes delivered since ``place``."""
        return self.appended - place.appended

    def since(self, place: LogPlace) -> list[tuple[Sequence[Item], bytes]]:
        """The deliveries from ``place`` on."""
        return self._entries[place.index - self._first :]

    def release(self, place: LogPlace) -> None:
        """``place`` reads no more: drop the entries no open place is owed."""
        count = self._places.get(place.index, 0)
        if count <= 0:
            return
        if count > 1:
            self._places[place.index] = count - 1
            return
        del self._places[place.index]
        if not self._places:
            self._first = self.end
            self._entries = []
            return
        oldest = min(self._places)
        if oldest > self._first:
            del self._entries[: oldest - self._first]
            self._first = oldest
