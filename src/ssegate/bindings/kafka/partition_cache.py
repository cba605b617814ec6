"""What one process holds of one topic partition: a bounded, offset-ordered suffix of the log.

A :class:`PartitionCache` is fed by the partition's single shared fetch, in offset order. It
holds every message from :attr:`~PartitionCache.start_offset` (older ones were evicted, or were
never fetched) up to :attr:`~PartitionCache.next_offset` (the next offset the fetch will hand
over), except what compaction removed. It is pure: no I/O, no clock of its own (callers pass
``now``), no threads.

Bounds, checked on every append and by :meth:`PartitionCache.evict`:

- ``max_bytes``: the oldest messages go first until the held size fits;
- ``max_age``: messages that entered the cache more than ``max_age`` seconds ago go (the time
  of arrival, not the record timestamp, so that a historical fetch of an old topic stays
  cached for ``max_age``). ``0`` disables the age bound, and so does compaction: the latest
  value per key is the topic's state, which only the byte bound may cut.

Eviction moves ``start_offset`` past the evicted message: a subscriber asking for an older
offset must read it from the broker.

On a compacted topic (``cleanup.policy=compact``) the cache keeps only the latest message per
key: a newer value replaces the older one in place. A tombstone (null value) removes the older
value too; the tombstone itself is kept so a subscriber resuming from before it still learns of
the delete, but a reader starting from scratch (a fresh ``historical`` subscriber, who never saw
the key) passes over tombstones. Messages without a key are never compacted.

Storage is a list with a moving head (amortised O(1) append and evict, O(log n) seek by offset);
compacted-away slots become ``None`` and the list is rebuilt when more than half is dead. A
:class:`~.cache_postings.CacheIndex` beside it says where each key's (and each asked-for header
value's) messages are, so :meth:`PartitionCache.read_wanted` costs what it returns.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass

from ssegate.bindings.kafka.cache_postings import CacheIndex
from ssegate.kafka.topics import Interest, KafkaMessage

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_AGE = 3600.0
MESSAGE_OVERHEAD = 248
"""Bytes counted per message on top of key, value and headers: what a cached record costs in
Python memory besides its payload (the message object, its bytes and int objects, the cache's
list entries), measured with tracemalloc at 100,000 small records (281 bytes each for a
35-byte payload). So ``cache.max-bytes`` bounds the memory the cache really takes."""


def message_size(message: KafkaMessage) -> int:
    size = MESSAGE_OVERHEAD + len(message.key or b"") + len(message.value or b"")
    for name, value in message.headers:
        size += len(name) + len(value)
    return size


def _payload(message: KafkaMessage) -> int:
    """A message's key and value bytes: what a read's ``max_bytes`` counts."""
    return len(message.key or b"") + len(message.value or b"")


@dataclass(frozen=True, slots=True)
class Evicted:
    """What one append or eviction pass let go."""

    messages: int = 0


class PartitionCache:
    """The cached suffix of one topic partition."""

    def __init__(
        self,
        partition: int,
        start_offset: int,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_age: float = DEFAULT_MAX_AGE,
        compacted: bool = False,
    ) -> None:
        self.partition = partition
        self.start_offset = start_offset
        """Every message from here on is held (compaction aside); older ones are not."""
        self.next_offset = start_offset
        """The next offset the shared fetch will append."""
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.compacted = compacted
        self.payload_bytes = 0
        """What the held messages take (:func:`message_size`); :attr:`bytes` adds the index."""
        self._slots: list[KafkaMessage | None] = []
        self._offsets: list[int] = []
        self._arrivals: list[float] = []
        self._head = 0
        self._dead = 0
        self._latest_by_key: dict[bytes, int] = {}  # key → absolute slot index
        self._index = CacheIndex()

    @property
    def bytes(self) -> int:
        """What the cache takes: its messages and its index. ``max_bytes`` bounds this."""
        return self.payload_bytes + self._index.bytes

    def __len__(self) -> int:
        return len(self._slots) - self._head - self._dead

    def append(self, messages: list[KafkaMessage], now: float) -> Evicted:
        """Add the fetch's next messages (offsets ascending, from ``next_offset`` on)."""
        if not messages:
            return Evicted()
        for message in messages:
            if message.offset < self.next_offset:
                continue  # a replay after a reconnect: already held
            self._store(message, now)
            self.next_offset = message.offset + 1
        return self.evict(now)

    def skip_to(self, next_offset: int) -> None:
        """The fetch passed over offsets up to ``next_offset`` (invalid messages, markers)."""
        if next_offset > self.next_offset:
            if len(self) == 0:
                self.start_offset = max(self.start_offset, next_offset)
            self.next_offset = next_offset

    def read_from(
        self, offset: int, *, limit: int = 0, max_bytes: int = 0, skip_tombstones: bool = False
    ) -> tuple[list[KafkaMessage], int]:
        """Held messages at ``offset`` and after, oldest first, at most ``limit`` if given and
        no more once their keys and values reach ``max_bytes`` if given (one at least), and the
        offset to continue reading from (:attr:`next_offset` once the end is reached).

        ``skip_tombstones`` is for a reader starting from scratch (a fresh ``historical``
        subscriber), who has no earlier value for a deleted key to forget.
        """
        index = bisect.bisect_left(self._offsets, offset, lo=self._head)
        found: list[KafkaMessage] = []
        slots = self._slots
        room = max_bytes if max_bytes > 0 else -1
        while index < len(slots):
            message = slots[index]
            index += 1
            if message is None or (skip_tombstones and message.value is None):
                continue
            found.append(message)
            if room > 0:
                room = max(0, room - _payload(message))
            if (limit > 0 and len(found) >= limit) or not room:
                if index < len(slots):
                    return found, self._offsets[index]
                break
        return found, self.next_offset

    def read_wanted(
        self,
        offset: int,
        interest: Interest,
        *,
        limit: int,
        max_bytes: int = 0,
        skip_tombstones: bool = False,
    ) -> tuple[list[KafkaMessage], int]:
        """Like :meth:`read_from`, but only the held messages ``interest`` may want, found
        through the index: the cost is in proportion to what is returned."""
        found: list[KafkaMessage] = []
        slots = self._slots
        offsets = self._offsets
        room = max_bytes if max_bytes > 0 else -1
        for wanted in self._index.wanted_from(offset, interest, self._held()):
            if len(found) >= limit or not room:
                return found, wanted
            index = bisect.bisect_left(offsets, wanted, lo=self._head)
            if index == len(offsets) or offsets[index] != wanted:
                continue  # compacted away, then evicted: the index forgets it at its rebuild
            message = slots[index]
            if message is None or (skip_tombstones and message.value is None):
                continue
            found.append(message)
            if room > 0:
                room = max(0, room - _payload(message))
        return found, self.next_offset

    def _held(self) -> Iterator[KafkaMessage]:
        """The held messages, oldest first, read only when iterated."""
        slots = self._slots
        for index in range(self._head, len(slots)):
            message = slots[index]
            if message is not None:
                yield message

    def evict(self, now: float) -> Evicted:
        """Drop what exceeds the byte budget or is older than ``max_age``."""
        dropped = 0
        aging = self.max_age > 0 and not self.compacted
        oldest_allowed = now - self.max_age if aging else None
        while self._head < len(self._slots):
            message = self._slots[self._head]
            if message is not None:
                too_big = self.bytes > self.max_bytes
                too_old = oldest_allowed is not None and self._arrivals[self._head] < oldest_allowed
                if not too_big and not too_old:
                    break
                self.payload_bytes -= message_size(message)
                dropped += 1
                if message.key is not None and self._latest_by_key.get(message.key) == self._head:
                    del self._latest_by_key[message.key]
                self._index.remove(message)
                self.start_offset = message.offset + 1
            else:
                self._dead -= 1
            self._slots[self._head] = None
            self._head += 1
        if self._head == len(self._slots):
            self.start_offset = self.next_offset
        self._compact_storage()
        return Evicted(dropped)

    def _store(self, message: KafkaMessage, now: float) -> None:
        index = len(self._slots)
        if self.compacted and message.key is not None:
            older = self._latest_by_key.get(message.key)
            if older is not None:
                replaced = self._slots[older]
                if replaced is not None:
                    self.payload_bytes -= message_size(replaced)
                    self._slots[older] = None
                    self._dead += 1
            self._latest_by_key[message.key] = index
        self._slots.append(message)
        self._offsets.append(message.offset)
        self._arrivals.append(now)
        self._index.add(message)
        self.payload_bytes += message_size(message)

    def _compact_storage(self) -> None:
        """Rebuild the lists once the evicted head or the dead slots are most of them."""
        waste = self._head + self._dead
        if waste < 1024 or waste * 2 < len(self._slots):
            return
        if not self._dead:  # only the evicted head goes: slices, at C speed
            head = self._head
            self._slots = self._slots[head:]
            self._offsets = self._offsets[head:]
            self._arrivals = self._arrivals[head:]
            self._latest_by_key = {key: at - head for key, at in self._latest_by_key.items()}
            self._head = 0
            return
        slots: list[KafkaMessage | None] = []
        offsets: list[int] = []
        arrivals: list[float] = []
        latest: dict[bytes, int] = {}
        for index in range(self._head, len(self._slots)):
            message = self._slots[index]
            if message is None:
                continue
            if message.key is not None and self.compacted:
                latest[message.key] = len(slots)
            slots.append(message)
            offsets.append(message.offset)
            arrivals.append(self._arrivals[index])
        self._slots, self._offsets, self._arrivals = slots, offsets, arrivals
        self._latest_by_key = latest
        self._head = 0
        self._dead = 0
        self._index.rebuild(self._held())  # the dead slots' offsets linger in it until now
