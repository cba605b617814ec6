"""Where in a partition cache the messages of one key, or of one header value, are.

A filtered stream that opens over a full cache should cost what it receives, not what the
cache holds. :class:`CacheIndex` keeps, for a :class:`~.partition_cache.PartitionCache`, a
posting list per message key and per ``(header name, value)`` pair: the offsets, ascending, of
the held messages that carry it. Reading what an
:class:`~ssegate.kafka.topics.Interest` may want from an offset is then a merge of the few
posting lists the interest names, from that offset on.

Keys are always indexed (one list entry per keyed message, the offset object the message
already holds). Headers are indexed by name, on demand: the first reader asking for a header
name has the cache's messages scanned once for it, and from then on appends keep it current.
An unfiltered topic, or one filtered only by key, pays nothing for headers.

Posting lists only grow at the tail and shrink at the head, as the cache does; an entry whose
message was compacted away stays until the cache rebuilds its storage (the reader skips it),
so lists are rebuilt with the cache. Pure: no I/O, no clock.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator
from typing import TypeVar

from ssegate.kafka.topics import Interest, KafkaMessage

K = TypeVar("K", bytes, tuple[str, bytes])

# What the index costs, measured with tracemalloc over 200,000 messages (the offset objects are
# the messages' own, so only containers count): a posting list of k ≥ 2 offsets costs
# ENTRY_BYTES + POSTINGS_BYTES + (k - 2) * OFFSET_BYTES, a key held once ENTRY_BYTES.
ENTRY_BYTES = 53
"""A key or header value held by one message: its dict entry."""
POSTINGS_BYTES = 136
"""What a second message of the same key or header value adds: a posting list of two."""
OFFSET_BYTES = 9
"""Each further message of a key or header value: one list slot."""


class Postings:
    """The ascending offsets of the held messages with one key or header value."""

    __slots__ = ("head", "offsets")

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.head = 0

    def __len__(self) -> int:
        return len(self.offsets) - self.head

    def append(self, offset: int) -> None:
        offsets = self.offsets
        if not offsets or offsets[-1] != offset:  # a message carrying the same header twice
            offsets.append(offset)

    def drop_through(self, offset: int) -> None:
        """Forget offsets up to and including ``offset`` (the cache evicted them)."""
        offsets = self.offsets
        head = self.head
        while head < len(offsets) and offsets[head] <= offset:
            head += 1
        # Forgotten offsets go once they are half the list (amortised O(1) each): a key seen
        # every few seconds for hours must not keep every offset it ever had, nor their ints.
        if head and head * 2 >= len(offsets):
            del offsets[:head]
            head = 0
        self.head = head

    def from_offset(self, offset: int) -> Iterator[int]:
        offsets = self.offsets
        start = bisect.bisect_left(offsets, offset, lo=self.head)
        return iter(offsets[start:]) if start < len(offsets) else iter(())


class CacheIndex:
    """Posting lists of one partition cache: every key, and the header names asked for."""

    __slots__ = ("by_header", "by_key", "bytes", "header_names")

    def __init__(self) -> None:
        self.by_key: dict[bytes, int | Postings] = {}
        self.by_header: dict[tuple[str, bytes], int | Postings] = {}
        self.header_names: set[str] = set()
        self.bytes = 0
        """What the index costs in memory, estimated from the constants below."""

    def add(self, message: KafkaMessage) -> None:
        """Index ``message``, the newest held."""
        grown = 0
        if message.key is not None:
            grown += _add(self.by_key, message.key, message.offset)
        if self.header_names:
            for header in message.headers:
                if header[0] in self.header_names:
                    grown += _add(self.by_header, header, message.offset)
        self.bytes += grown

    def remove(self, message: KafkaMessage) -> None:
        """``message`` left the head of the cache."""
        shrunk = 0
        if message.key is not None:
            shrunk += _drop(self.by_key, message.key, message.offset)
        if self.header_names:
            for header in message.headers:
                if header[0] in self.header_names:
                    shrunk += _drop(self.by_header, header, message.offset)
        self.bytes -= shrunk

    def rebuild(self, messages: Iterable[KafkaMessage]) -> None:
        """Start over from the cache's held messages, oldest first."""
        self.by_key = {}
        self.by_header = {}
        self.bytes = 0
        for message in messages:
            self.add(message)

    def wanted_from(
        self, offset: int, interest: Interest, held: Iterable[KafkaMessage]
    ) -> Iterator[int]:
        """The offsets from ``offset`` on, ascending and each once, of held messages that
        ``interest`` may want; ``held`` is read once if a header name is asked for the first
        time."""
        missing = {name for name, _ in interest.headers} - self.header_names
        if missing:
            self.header_names |= missing
            self.rebuild(held)
        lists: list[Iterator[int]] = []
        for key in interest.keys:
            _from_offset(self.by_key.get(key), offset, lists)
        for header in interest.headers:
            _from_offset(self.by_header.get(header), offset, lists)
        if len(lists) == 1:
            return lists[0]
        return _distinct(heapq.merge(*lists))


def _add(postings_by: dict[K, int | Postings], name: K, offset: int) -> int:
    found = postings_by.get(name)
    if found is None:
        postings_by[name] = offset  # most keys are held once: no list for them
        return ENTRY_BYTES
    if isinstance(found, int):
        if found == offset:
            return 0
        postings = postings_by[name] = Postings()
        postings.offsets.append(found)
        postings.append(offset)
        return POSTINGS_BYTES
    before = len(found)
    found.append(offset)
    return (len(found) - before) * OFFSET_BYTES


def _drop(postings_by: dict[K, int | Postings], name: K, offset: int) -> int:
    found = postings_by.get(name)
    if found is None:
        return 0
    if isinstance(found, int):
        if found > offset:
            return 0
        del postings_by[name]
        return ENTRY_BYTES
    before = len(found)
    found.drop_through(offset)
    if found:
        return (before - len(found)) * OFFSET_BYTES
    del postings_by[name]
    return ENTRY_BYTES + POSTINGS_BYTES + (before - 2) * OFFSET_BYTES


def _from_offset(found: int | Postings | None, offset: int, into: list[Iterator[int]]) -> None:
    if found is None:
        return
    if isinstance(found, int):
        if found >= offset:
            into.append(iter((found,)))
    elif found:
        into.append(found.from_offset(offset))


def _distinct(offsets: Iterator[int]) -> Iterator[int]:
    last = -1
    for offset in offsets:
        if offset != last:
            last = offset
            yield offset
