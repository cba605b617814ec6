"""The memory the quota tables live in, shared by the workers of one ``ssegate start``.

The workers are forked by the supervisor (:mod:`ssegate.engine.process`) and build their
bindings after the fork, so nothing they build is shared. :func:`prepare` is called by the
supervisor before it forks: when a binding of the config has ``x-ssegate-quotas`` it makes one
:class:`QuotaMemory`, a memory file (Linux's ``memfd_create``) mapped
``MAP_SHARED``, which every worker inherits and :func:`attach` hands to the
bindings. A gateway of one process makes its own when its binding is built.

Locking is a POSIX record lock (``fcntl.lockf``) on that file: held for one table operation
(microseconds, never across an ``await``), and released by the kernel when its holder dies, so a
worker killed mid-operation cannot wedge the others (a ``multiprocessing`` lock would stay held).
Such locks belong to a process, so only one thread of each process may use the memory (the
event loop's).

A worker that dies holding streams leaves their counts behind; the supervisor then stops every
worker (the gateway runs whole or not at all), and the memory ends with the processes, so no
count outlives the run it was taken in. Memory is bounded: :data:`COUNTER_SLOTS` keys with open
streams and :data:`BUCKET_SLOTS` identities with a recent opening, whatever the load
(:mod:`ssegate.quotas.table` refuses a key it has no slot for).
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
from collections.abc import Iterator

from ssegate.config.model import Config
from ssegate.quotas.table import BucketTable, CounterTable, SlotTable

OPTION = "x-ssegate-quotas"
COUNTER_SLOTS = 65_536
BUCKET_SLOTS = 65_536


class QuotaMemory:
    """A counter table and a bucket table in one shared mapping, with its lock."""

    def __init__(
        self, counter_slots: int = COUNTER_SLOTS, bucket_slots: int = BUCKET_SLOTS
    ) -> None:
        counters = SlotTable.size(counter_slots, 4)
        size = counters + SlotTable.size(bucket_slots, 32)
        self._fd = os.memfd_create("ssegate-quotas", os.MFD_CLOEXEC)
        os.ftruncate(self._fd, size)
        self._map = mmap.mmap(self._fd, size, mmap.MAP_SHARED)
        view = memoryview(self._map)
        self.counters = CounterTable(view[:counters], counter_slots)
        self.buckets = BucketTable(view[counters:], bucket_slots)

    @contextlib.contextmanager
    def locked(self) -> Iterator[QuotaMemory]:
        """Hold the lock every process of the gateway takes around a table operation."""
        fcntl.lockf(self._fd, fcntl.LOCK_EX)
        try:
            yield self
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)


_prepared: QuotaMemory | None = None


def wants_quotas(config: Config) -> bool:
    """A binding of ``config`` has ``options.x-ssegate-quotas``."""
    return any(OPTION in binding.options for binding in config.bindings.values())


def prepare(config: Config) -> None:
    """Make the memory the processes about to be forked will share, when ``config`` has
    quotas. Called by the supervisor before it forks."""
    global _prepared
    if _prepared is None and wants_quotas(config):
        _prepared = QuotaMemory()


def attach() -> QuotaMemory:
    """The memory :func:`prepare` made before the fork, else a new one for this process."""
    return _prepared if _prepared is not None else QuotaMemory()
