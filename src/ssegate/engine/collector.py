"""When the gateway's cyclic garbage collector runs: long-lived objects frozen, full collections
on growth (:class:`LongLivedObjects`).

CPython collects its oldest generation once the objects promoted into it since the last full
collection number a quarter of it. A gateway's old generation is its streams (about a hundred
tracked objects each: protocol, transport, parser, subscriber, cursors, closures) and whatever
else lives for minutes, and its churn is steady (streams come and go, records pass through the
Kafka cache), so that rule fires every few tens of seconds, and each full collection walks every
old object with the event loop stopped: at 10,000 streams, 0.5 s. Those pauses were the whole
p99 of a filtered fan-out (`ssegate bench keyed`), while nothing they walked was garbage.

The policy here keeps what the collector is for, finding garbage cycles, without the pauses:

- The young generations are collected as CPython schedules them, and by the event loop every
  :data:`YOUNG_SECONDS`: most cycles (a request's, an exception's traceback) die there.
  CPython counts a young generation's allocations *less its deallocations*, of any age: a
  Kafka cache at its bound frees an old record for each new one, so its count stays low and
  CPython's young collections stop while the young generation grows (200,000 objects in two
  minutes at 5,000 messages/s). The collection that finally came walked them all, on
  whichever thread allocated (the Kafka fetch thread), holding the GIL: 0.25-0.55 s. Collected
  every :data:`YOUNG_SECONDS` from the loop instead, a young generation holds what a tenth of a
  second allocated, and its collection takes a few milliseconds.
- What survives a collection of generation 1 is frozen (:func:`gc.freeze`: moved to the
  permanent generation, which no automatic collection walks). A frozen object is still freed by
  reference counting as soon as nothing refers to it; only a garbage *cycle* among frozen
  objects waits. A closed connection leaves none: its HTTP protocol lets go of what refers back
  to it when the connection is lost (``HttpProtocolBase._release``), so its memory returns at
  once, not at the next full collection.
- The automatic full collection is off. The event loop checks the process's resident memory
  every :data:`CHECK_SECONDS`, less what the bounded caches hold (the Kafka cache's bytes,
  :data:`BOUNDED_CACHES`: they grow to their own bound and are no garbage), and runs a full
  collection (unfreeze, collect, freeze again) once that has grown by
  :attr:`FullCollectionSchedule.growth` since the last one, or once
  :attr:`~FullCollectionSchedule.max_interval` has passed. Memory held by waiting cycles is so
  bounded by the same kind of ratio CPython bounds it by, measured where it matters (bytes, not
  objects); a gateway whose memory is flat never pauses for one.
- The growth starts at a quarter. A full collection that reclaims next to nothing (under 1 %
  of what it walked: growth was streams opening, not garbage; 50,000 streams opening over h2
  made six in a row that reclaimed 0 objects) doubles it, up to 2 (memory tripled); one that
  finds garbage sets it back to a quarter.
- Growth that connections account for is not counted. A full collection that reclaims next to
  nothing while connections were opened measures what each took (the growth since the last one
  over the connections added: all of it was live); until a collection finds garbage, that much
  and half as much again (:attr:`~FullCollectionSchedule.connection_margin`: a connection holds
  more once it streams than while it opens) for each connection over the count at the last full
  collection is left out of the growth, counting from the most connections open at once since.
  Streams opening are the growth of a gateway that holds no garbage, and every full collection
  walks all of them: 100,000 HTTP/1.1 streams over 7 workers paid 1-3 s per worker, mid-run,
  for a collection that reclaimed 0 objects, because memory had doubled since the last one
  while the streams opened. The most open, not the number open now: a mass disconnect is not
  growth (what the closed connections held is freed at once, above; what is left of it are
  holes in the allocator's arenas, which new connections fill), and any other garbage cycles
  show as growth once new connections take their place.
- Pages freed by connections that closed go back to the system. Once the open connections
  have fallen by :data:`RETURN_AFTER_CLOSED` from the most open since the last time, the C
  allocator is asked to return its free pages (jemalloc's purge, or glibc's ``malloc_trim``, a
  fraction of a millisecond at a hundred MiB): without it, glibc kept what clients dropped for
  not reading had freed resident (1,000 of them: it returned about 1.3 MiB of the 10.6 MiB they
  left), and jemalloc returns it only over the next seconds. With CPython's own small-object
  allocator, its pages go back as their arenas empty, which a long-lived object in each keeps
  from happening: :mod:`ssegate.engine.allocator` is why the gateway runs on jemalloc.

Every full collection is a log line (``gateway.gc_full``: its reason, pause, objects walked and
reclaimed) and every collection of any generation an observation of ``ssegate.gc.pause``
(label ``generation``). ``SSEGATE_GC=python`` keeps CPython's own schedule (for comparison, or
for code whose long-lived objects form garbage cycles often).
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

ENVIRONMENT = "SSEGATE_GC"
"""``python``: CPython's own collection schedule, nothing frozen."""
CHECK_SECONDS = 1.0
"""How often the event loop looks at resident memory for a full collection."""
YOUNG_SECONDS = 0.1
"""How often the event loop collects the young generations (0 and 1) itself."""
NEVER = 2**31 - 1
"""A threshold the count of generation-1 collections never reaches: no automatic full one."""
BOUNDED_CACHES = ("ssegate.kafka.cache.bytes",)
"""Gauges of bytes held by caches with a bound of their own, left out of the growth."""
CONNECTIONS = "ssegate.connections.active"
"""The gauge of open connections, whose growth :class:`FullCollectionSchedule` accounts for."""
RETURN_AFTER_CLOSED = 500
"""Connections closed since the most open that make the C allocator return its free pages."""
PAUSE_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 5.0)
_PAGE = os.sysconf("SC_PAGE_SIZE")

FullReason = Literal["growth", "interval"]


@dataclass(slots=True)
class FullCollectionSchedule:
    """When a full collection is due: pure, given the resident bytes that count (those of the
    bounded caches left out) and the time."""

    baseline: int
    """The bytes that count, after the last full collection (or at start)."""
    last: float
    """When the last full collection ran (or the start)."""
    growth: float = 0.25
    """Growth over :attr:`baseline`, as a share of it, that makes one due now."""
    base_growth: float = 0.25
    """:attr:`growth` after a full collection that found garbage."""
    max_growth: float = 2.0
    """:attr:`growth` at the most, after full collections that found next to none."""
    worth: float = 0.01
    """A full collection that reclaims less than this share of the objects it walked found
    next to no garbage: the growth that makes the next one due doubles."""
    floor: int = 32 * 1024 * 1024
    """Growth in bytes below which none is due, whatever the share (a small process)."""
    max_interval: float = 3600.0
    """At the longest between two; ``0`` for no such bound."""
    connections: int = 0
    """The connections open after the last full collection (or at start)."""
    most_connections: int = 0
    """The most connections seen open at once since the last full collection."""
    per_connection: float = 0.0
    """Bytes each connection opened since the last full collection is taken to hold: measured
    by the last one that found next to no garbage, ``0`` once one finds garbage."""
    connection_margin: float = 1.5
    """How many times :attr:`per_connection` each connection opened since is allowed. A
    connection holds more once it streams than while it opens (100,000 HTTP/1.1 key-filtered
    streams on six workers: 13.5 KiB each measured by a collection while 2,500 of a worker's
    16,700 had opened, 16.8-17.6 KiB once all of them streamed), and a growth of a quarter more
    per connection over 14,000 connections passed the unexplained growth that made a full
    collection due: 0.5-2.6 s with the loop stopped, reclaiming nothing, in every worker."""

    def due(self, resident: int, now: float, connections: int = 0) -> FullReason | None:
        """Why a full collection should run now, or ``None``, with ``connections`` open (the
        most seen since the last full collection is kept)."""
        self.most_connections = max(self.most_connections, connections)
        opened = max(0, self.most_connections - self.connections)
        grown = resident - self.baseline - self.per_connection * self.connection_margin * opened
        if grown >= max(self.floor, self.growth * self.baseline):
            return "growth"
        if 0 < self.max_interval <= now - self.last:
            return "interval"
        return None

    def ran(
        self,
        resident: int,
        now: float,
        reclaimed: int = 0,
        walked: int = 0,
        connections: int = 0,
    ) -> None:
        """A full collection finished, leaving ``resident`` bytes and ``connections`` open; it
        reclaimed ``reclaimed`` of the ``walked`` objects. Growth that brought no garbage is
        not met with the next full collection as soon: a gateway's memory grows with the
        streams it holds, and each full collection costs in proportion to them."""
        if walked > 0 and reclaimed < self.worth * walked:
            self.growth = min(self.max_growth, self.growth * 2)
            opened = max(self.most_connections, connections) - self.connections
            if opened > 0:
                self.per_connection = max(0, resident - self.baseline) / opened
        else:
            self.growth = self.base_growth
            self.per_connection = 0.0
        self.baseline = resident
        self.last = now
        self.connections = self.most_connections = connections


MALLCTL_ARENAS_ALL = 4096
"""jemalloc's index for "every arena" in a ``mallctl`` name."""


def _find_page_return() -> Callable[[int], int] | None:
    """What makes the C allocator return its free pages now: jemalloc's purge of every arena
    when it is preloaded (:mod:`ssegate.engine.allocator`; without it, jemalloc returns them
    over the next seconds), else glibc's ``malloc_trim`` (None with another C library)."""
    try:
        process = ctypes.CDLL(None)
    except OSError:
        return None
    try:
        mallctl = process.mallctl
    except AttributeError:
        pass
    else:
        name = f"arena.{MALLCTL_ARENAS_ALL}.purge".encode()

        def purge(_pad: int) -> int:
            return int(mallctl(name, None, None, None, ctypes.c_size_t(0)))

        return purge
    try:
        trim: Callable[[int], int] = process.malloc_trim
    except AttributeError:
        return None
    return trim


_RETURN_PAGES = _find_page_return()


@dataclass(slots=True)
class FreePagesReturn:
    """When the C allocator is asked to return its free pages: pure, given the connections open."""

    after_closed: int = RETURN_AFTER_CLOSED
    most: int = 0
    """The most connections open at once since the last return (or start)."""

    def due(self, connections: int) -> bool:
        """Whether ``connections`` open now is ``after_closed`` fewer than the most since the
        last return; if so, the most starts again from now."""
        self.most = max(self.most, connections)
        if self.most - connections < self.after_closed:
            return False
        self.most = connections
        return True


def resident_bytes() -> int:
    """This process's resident set, from ``/proc/self/statm`` (0 where it cannot be read)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class LongLivedObjects:
    """The policy above, installed in this process until :meth:`close`."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        metrics: Metrics,
        *,
        schedule: FullCollectionSchedule | None = None,
        resident: Callable[[], int] = resident_bytes,
        check_seconds: float = CHECK_SECONDS,
        young_seconds: float = YOUNG_SECONDS,
    ) -> None:
        self._loop = loop
        self._metrics = metrics
        self._resident = resident
        self._check_seconds = check_seconds
        self._young_seconds = young_seconds
        self._thresholds = gc.get_threshold()
        self._started = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._young_timer: asyncio.TimerHandle | None = None
        self.full_collections = 0
        self.free_pages = FreePagesReturn()
        self.pages_returned = 0
        """Times the C allocator was asked to return its free pages."""
        gc.collect()  # what start-up left behind, then the rest never walked again
        gc.freeze()
        self.schedule = schedule or FullCollectionSchedule(
            self._unbounded(), time.monotonic(), connections=self._connections()
        )
        gc.set_threshold(self._thresholds[0], self._thresholds[1], NEVER)
        gc.callbacks.append(self._on_collection)
        self._timer = loop.call_later(check_seconds, self._check)
        self._young_timer = loop.call_later(young_seconds, self._collect_young)
        log.event("gateway.gc", policy="long-lived objects frozen", pid=os.getpid(),
                  frozen=gc.get_freeze_count(), growth=self.schedule.growth,
                  max_interval_s=self.schedule.max_interval,
                  young_every_s=young_seconds)  # fmt: skip

    @classmethod
    def install(cls, loop: asyncio.AbstractEventLoop, metrics: Metrics) -> LongLivedObjects | None:
        """The policy, unless ``SSEGATE_GC=python`` asks for CPython's own schedule."""
        if os.environ.get(ENVIRONMENT) == "python":
            return None
        return cls(loop, metrics)

    def close(self) -> None:
        """Back to CPython's schedule, everything frozen given back to it."""
        for timer in (self._timer, self._young_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._young_timer = None
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)
        gc.set_threshold(*self._thresholds)
        gc.unfreeze()

    def collect_fully(self, reason: str) -> int:
        """Unfreeze, collect every generation, freeze what is left; returns what it reclaimed."""
        started = time.perf_counter()
        walked = gc.get_freeze_count()
        gc.unfreeze()
        reclaimed = gc.collect()
        gc.freeze()
        pause = time.perf_counter() - started
        unbounded = self._unbounded()
        schedule = self.schedule
        schedule.ran(unbounded, time.monotonic(), reclaimed, walked, self._connections())
        self.full_collections += 1
        self._metrics.inc("ssegate.gc.full_collections", reason=reason)
        log.event("gateway.gc_full", level=logging.INFO if pause < 0.1 else logging.WARNING,
                  reason=reason, pause_ms=round(pause * 1000, 1), walked=walked,
                  reclaimed=reclaimed, unbounded_mib=round(unbounded / 2**20, 1),
                  connections=schedule.connections,
                  per_connection_kib=round(schedule.per_connection / 1024, 1),
                  next_growth=schedule.growth)  # fmt: skip
        return reclaimed

    def _unbounded(self) -> int:
        """Resident bytes less those of the bounded caches."""
        metrics = self._metrics
        bounded = sum(metrics.gauge_total(name) for name in BOUNDED_CACHES)
        return max(0, self._resident() - int(bounded))

    def _connections(self) -> int:
        return int(self._metrics.gauge_total(CONNECTIONS))

    def _check(self) -> None:
        self._timer = self._loop.call_later(self._check_seconds, self._check)
        connections = self._connections()
        reason = self.schedule.due(self._unbounded(), time.monotonic(), connections)
        if reason is not None:
            self.collect_fully(reason)
        if self.free_pages.due(connections):
            self._return_free_pages(connections)

    def _return_free_pages(self, connections: int) -> None:
        """Connections closed in number: the C allocator gives back the pages they freed."""
        if _RETURN_PAGES is None:
            return
        before = self._resident()
        started = time.perf_counter()
        _RETURN_PAGES(0)
        pause = time.perf_counter() - started
        self.pages_returned += 1
        log.event("gateway.free_pages_returned", level=logging.DEBUG, connections=connections,
                  pause_ms=round(pause * 1000, 2),
                  returned_mib=round((before - self._resident()) / 2**20, 1))  # fmt: skip

    def _collect_young(self) -> None:
        self._young_timer = self._loop.call_later(self._young_seconds, self._collect_young)
        gc.collect(1)  # the survivors are frozen by _on_collection

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        """A collection of ``info["generation"]`` starts or stops (on any thread: the GIL is
        held, and collections do not nest)."""
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = info["generation"]
        self._metrics.observe("ssegate.gc.pause", time.perf_counter() - self._started,
                              buckets=PAUSE_BUCKETS, generation=str(generation))  # fmt: skip
        if generation >= 1:
            gc.freeze()  # the survivors: long-lived, walked again only by a full collection
