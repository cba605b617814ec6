"""Which records of a partition are repeats: a record written again under the same id.

A producer whose writes are at-least-once (the pipeline's Spark sink, :mod:`ssegate.pipeline`)
marks every record with a :data:`~ssegate.kafka.topics.RECORD_ID_HEADER` that its input alone
decides. A record written again is the identical record under the same id, in the same
partition (same key), at a later offset, usually within a micro-batch of the first copy.

The rule, per partition: **a record is a repeat when a record at most** ``horizon`` **offsets
before it carries the same id.** It depends on the log alone (the ``horizon`` offsets before
each record), not on where a reader started, how much a cache holds or what it evicted, so
every reader of the partition, in every process that uses the same horizon, finds the same
repeats: a client that got a first copy from one gateway process and resumes on another is not
given the repeat there either. A reader that starts at offset ``X`` reads from ``X - horizon``
on (or the log start), learning the ids there without handing them over
(:attr:`RepeatFilter.start`), so it knows the first copies that lie just before ``X``.

Records without the header are never repeats and cost nothing here. A repeat of a repeat is
found from the nearest copy, so three copies further apart than the horizon in all, but each
within it of the one before, are one record.

Memory: the ids of at most ``horizon`` records per partition and reader, each entry about
:data:`ENTRY_BYTES` besides the id itself (shared with the message while the cache holds it). An
id longer than :data:`MAX_ID_BYTES` is remembered by a 16-byte digest instead, so a producer
writing huge ids cannot make the memory grow past ``horizon`` entries of bounded size. Entries
older than the horizon go as records arrive: the bound holds by itself, whatever the cache
keeps. Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass

from ssegate.kafka.topics import RECORD_ID_HEADER

DEFAULT_HORIZON = 10_000
"""Offsets back within which a record's id makes a later record with it a repeat.

Spark writes a repeat when a micro-batch is written again after a restart, or a task again
after its executor was lost: the repeat lies at most a micro-batch's records of the partition
after the first copy (thousands of records; the pipeline's cluster test sees 75). 10,000 covers
that with room for other writers in between, at about 1.9 MB per partition whose records carry
ids (:data:`ENTRY_BYTES` plus the id's bytes object, 87 bytes for the pipeline's 54-byte ids).
``cache.repeat-horizon`` sets it; the same on every gateway process reading a topic."""

ENTRY_BYTES = 104
"""What remembering one id costs besides the id's own bytes: its dict entry, its places in the
expiry queues and the offset int (tracemalloc, 100,000 records through a horizon of 10,000)."""

MAX_ID_BYTES = 96
"""Ids up to this long are remembered as they are; longer ones by their BLAKE2b digest of 16
bytes (a false match has a chance of 2**-128). The pipeline's ids are usually 30 to 80 bytes."""


@dataclass(frozen=True, slots=True)
class Repeat:
    """A record passed over as a repeat."""

    offset: int
    earlier: int
    """The offset of the copy before it (the nearest one)."""
    record_id: bytes


class RepeatFilter:
    """Finds the repeats among the records one reader reads of one partition, in offset order."""

    __slots__ = ("_ids", "_last", "_offsets", "_seen", "horizon", "start")

    def __init__(self, horizon: int, start: int) -> None:
        if horizon < 1:
            raise ValueError(f"a repeat horizon is at least 1, not {horizon}")
        self.horizon = horizon
        self.start = start
        """The first offset the reader hands over: records before it were read only to learn
        their ids."""
        self._seen: dict[bytes, int] = {}
        """Id → the offset of its latest copy within the horizon."""
        self._offsets: deque[int] = deque()
        self._ids: deque[bytes] = deque()
        """The offset and id of every record remembered, oldest first: what expires next (two
        queues rather than one of pairs: a pair would cost 56 bytes more per record)."""
        self._last = -1

    def __len__(self) -> int:
        """How many ids are remembered."""
        return len(self._seen)

    @property
    def reading_from(self) -> int:
        """Where the reader starts to know every id within the horizon before :attr:`start`
        (the log start may be later: reading from there is as good)."""
        return max(0, self.start - self.horizon)

    def earlier_copy(self, offset: int, record_id: bytes) -> int | None:
        """The offset of the copy before the record at ``offset`` with id ``record_id``, if it
        is a repeat, else ``None``; either way, the record is remembered.

        A record at or before one already judged (the reader went back) is ``None`` and is not
        remembered again: it cannot repeat itself."""
        if offset <= self._last:
            return None
        self._last = offset
        if len(record_id) > MAX_ID_BYTES:
            record_id = hashlib.blake2b(record_id, digest_size=16).digest()
        seen = self._seen
        offsets = self._offsets
        ids = self._ids
        oldest = offset - self.horizon
        while offsets and offsets[0] < oldest:
            gone = ids.popleft()
            if seen[gone] == offsets.popleft():  # else a later copy keeps it
                del seen[gone]
        earlier = seen.get(record_id)
        seen[record_id] = offset
        offsets.append(offset)
        ids.append(record_id)
        return earlier


def record_id(headers: tuple[tuple[str, bytes], ...]) -> bytes | None:
    """The last :data:`~ssegate.kafka.topics.RECORD_ID_HEADER` value among ``headers`` (a dead
    letter keeps its input's headers and adds its own id after them), or ``None``."""
    found = None
    for name, value in headers:
        if name == RECORD_ID_HEADER:
            found = value
    return found
