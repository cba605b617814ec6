"""Fixed-size tables of counts and token buckets, over a buffer several processes may share.

No dict can be shared by the workers of ``ssegate start --workers N``; a buffer can (an
anonymous shared mapping made before the fork: :mod:`ssegate.quotas.shared`). These tables
keep their state in such a buffer and nothing else, so every process sees the same counts.
They do no locking: the caller holds the memory's lock around each call.

A key (``bindings.events.address 10.1.2.3``) is hashed once (:func:`digest`, BLAKE2b) into a
home slot and a 16-byte fingerprint stored in the slot, so two keys share a count only if their
128-bit fingerprints collide as well. A key lives within :data:`PROBE` slots of its home (linear
probing); a slot freed leaves a tombstone, reused by the next key placed over it. Memory is
fixed at creation: when no slot within the probe window is free, :meth:`CounterTable.acquire`
answers :data:`FULL` and the caller refuses the stream, rather than grow.

- :class:`CounterTable`: concurrent streams per key. A slot whose count falls to zero is freed.
- :class:`BucketTable`: a token bucket per key (:mod:`ssegate.quotas.bucket`). A bucket that
  has refilled to its burst says nothing a missing one would not, so one found full is evicted
  when a new key needs its slot.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Final

from ssegate.quotas.bucket import Bucket, take

PROBE: Final = 32
"""Slots a key may sit from its home slot."""
FINGERPRINT: Final = 16
EMPTY: Final = bytes(FINGERPRINT)
TOMBSTONE: Final = b"\xff" * FINGERPRINT

ADMITTED: Final = -1
""":meth:`CounterTable.acquire`: every key was under its limit; each now counts one more."""
FULL: Final = -2
""":meth:`CounterTable.acquire`: a key found no free slot; nothing was counted."""

_COUNT = struct.Struct("<I")
_BUCKET = struct.Struct("<dddd")  # tokens, stamp, rate (tokens a second), burst


def digest(key: str) -> bytes:
    """24 bytes for ``key``: 8 choosing its home slot, then its 16-byte fingerprint."""
    raw = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=24).digest()
    fingerprint = raw[8:]
    if fingerprint in (EMPTY, TOMBSTONE):  # reserved markers; 2**-127 odds, still handled
        fingerprint = b"\x01" + fingerprint[1:]
    return raw[:8] + fingerprint


class SlotTable:
    """``capacity`` slots of a fingerprint and ``payload`` bytes each, in ``buffer``."""

    __slots__ = ("_buffer", "capacity", "payload", "stride")

    def __init__(self, buffer: memoryview, capacity: int, payload: int) -> None:
        self.capacity = capacity
        self.payload = payload
        self.stride = FINGERPRINT + payload
        if len(buffer) < self.size(capacity, payload):
            raise ValueError("the buffer is smaller than the table")
        self._buffer = buffer

    @staticmethod
    def size(capacity: int, payload: int) -> int:
        """Bytes a table of ``capacity`` slots of ``payload`` bytes takes."""
        return capacity * (FINGERPRINT + payload)

    def _slots(self, key: bytes) -> range:
        home = int.from_bytes(key[:8], "little") % self.capacity
        return range(home, home + min(PROBE, self.capacity))

    def _fingerprint(self, index: int) -> bytes:
        at = index * self.stride
        return bytes(self._buffer[at : at + FINGERPRINT])

    def find(self, key: bytes) -> int | None:
        """The slot holding ``key`` (from :func:`digest`), or ``None``."""
        fingerprint = key[8:]
        for probe in self._slots(key):
            index = probe % self.capacity
            found = self._fingerprint(index)
            if found == fingerprint:
                return index
            if found == EMPTY:
                return None
        return None

    def place(self, key: bytes) -> int | None:
        """The slot holding ``key``, or a free one now given to it (its payload zeroed);
        ``None`` when the probe window has no free slot."""
        fingerprint = key[8:]
        free: int | None = None
        for probe in self._slots(key):
            index = probe % self.capacity
            found = self._fingerprint(index)
            if found == fingerprint:
                return index
            if found == TOMBSTONE or (found != EMPTY and self.vacant(index)):
                free = index if free is None else free
            elif found == EMPTY:
                free = index if free is None else free
                break
        if free is not None:
            at = free * self.stride
            self._buffer[at : at + FINGERPRINT] = fingerprint
            self._buffer[at + FINGERPRINT : at + self.stride] = bytes(self.payload)
        return free

    def vacant(self, index: int) -> bool:
        """A slot whose key may be forgotten now (none in a plain table)."""
        return False

    def free(self, index: int) -> None:
        at = index * self.stride
        self._buffer[at : at + FINGERPRINT] = TOMBSTONE

    def keys(self) -> int:
        """Slots in use."""
        return sum(
            1
            for index in range(self.capacity)
            if self._fingerprint(index) not in (EMPTY, TOMBSTONE)
        )

    def _payload(self, index: int) -> int:
        return index * self.stride + FINGERPRINT


class CounterTable(SlotTable):
    """A count per key: the streams a key holds open."""

    __slots__ = ()

    def __init__(self, buffer: memoryview, capacity: int) -> None:
        super().__init__(buffer, capacity, _COUNT.size)

    def count(self, key: bytes) -> int:
        index = self.find(key)
        return 0 if index is None else self._get(index)

    def acquire(self, limits: list[tuple[bytes, int]]) -> int:
        """Count one more for every key of ``limits`` (``(key, limit)``), all or none:
        :data:`ADMITTED`; else the position in ``limits`` of the first key already at its
        limit, or :data:`FULL` when a key found no slot. A refusal changes nothing."""
        placed: list[int] = []
        refusal: int | None = None
        for position, (key, limit) in enumerate(limits):
            index = self.place(key)
            if index is None:
                refusal = FULL
                break
            placed.append(index)
            if self._get(index) >= limit:
                refusal = position
                break
        if refusal is not None:
            for index in placed:
                if self._get(index) == 0:
                    self.free(index)
            return refusal
        for index in placed:
            self._set(index, self._get(index) + 1)
        return ADMITTED

    def release(self, keys: list[bytes]) -> None:
        """Count one less for each key; a key at zero is forgotten (its slot freed)."""
        for key in keys:
            index = self.find(key)
            if index is None:
                continue
            held = self._get(index) - 1
            if held <= 0:
                self.free(index)
            else:
                self._set(index, held)

    def _get(self, index: int) -> int:
        value: int = _COUNT.unpack_from(self._buffer, self._payload(index))[0]
        return value

    def _set(self, index: int, value: int) -> None:
        _COUNT.pack_into(self._buffer, self._payload(index), value)


class BucketTable(SlotTable):
    """A token bucket per key: how many streams a key may still open now."""

    __slots__ = ("now",)

    def __init__(self, buffer: memoryview, capacity: int) -> None:
        super().__init__(buffer, capacity, _BUCKET.size)
        self.now = 0.0
        """The time of the call under way, by which a full bucket is judged vacant."""

    def take(self, key: bytes, now: float, rate: float, burst: float) -> float | None:
        """Take one token from ``key``'s bucket (new ones start full): 0.0 when taken, else
        the seconds until one is there; ``None`` when the key found no slot."""
        self.now = now
        index = self.place(key)
        if index is None:
            return None
        at = self._payload(index)
        tokens, stamp, _, _ = _BUCKET.unpack_from(self._buffer, at)
        fresh = stamp == 0.0
        bucket = Bucket(burst if fresh else tokens, now if fresh else stamp)
        after, wait = take(bucket, now, rate, burst)
        _BUCKET.pack_into(self._buffer, at, after.tokens, after.stamp, rate, burst)
        return wait

    def vacant(self, index: int) -> bool:
        fields: tuple[float, float, float, float] = _BUCKET.unpack_from(
            self._buffer, self._payload(index)
        )
        tokens, stamp, rate, burst = fields
        return stamp != 0.0 and tokens + (self.now - stamp) * rate >= burst
