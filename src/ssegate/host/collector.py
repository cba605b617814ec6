"""When the gateway's cyclic garbage collector runs: long-lived objects frozen, full collections
on growth the open streams do not explain (:class:`LongLivedObjects`).

CPython collects its oldest generation once the objects promoted into it since the last full
collection number a quarter of it. A gateway's old generation is its streams (protocol,
transport, parser, subscriber, cursors) and whatever else lives for minutes, and its churn is
steady, so that rule fires every few tens of seconds, and each full collection walks every old
object with the event loop stopped, while next to nothing it walks is garbage. What that cost,
and what each rule below took back, is in docs/performance.md ("Garbage-collection pauses").

The policy keeps what the collector is for, finding garbage cycles, without the pauses:

- The young generations are collected as CPython schedules them, and by the event loop every
  :data:`YOUNG_SECONDS`. CPython counts a young generation's allocations *less its
  deallocations*, of any age: a Kafka cache at its bound frees an old record for each new one,
  so CPython's own young collections stop while the young generation grows, and the one that
  finally comes walks it all on whichever thread allocated (the fetch thread), holding the GIL.
- What survives a collection of generation 1 is frozen (:func:`gc.freeze`: moved to the
  permanent generation, which no automatic collection walks). A frozen object is still freed by
  reference counting as soon as nothing refers to it; only a garbage *cycle* among frozen
  objects waits. A closed connection leaves none: its HTTP protocol lets go of what refers back
  to it when the connection is lost (``HttpProtocolBase._release``).
- The automatic full collection is off. The event loop checks the process's resident memory
  every :data:`CHECK_SECONDS`, less what the bounded caches hold (:data:`BOUNDED_CACHES`: they
  grow to their own bound and are no garbage), and runs a full collection (unfreeze, collect,
  freeze again) once that has grown by :attr:`FullCollectionSchedule.growth` since the last one
  beyond what the streams opened since account for, or once
  :attr:`~FullCollectionSchedule.max_interval` has passed. A gateway whose memory is flat, or
  grows only with its streams, never pauses for one.
- What a stream holds is measured, not assumed: a full collection that reclaims next to nothing
  while streams were opened divides the growth since the last one by the streams opened (all of
  it was live). Until a collection finds garbage, that much times
  :attr:`~FullCollectionSchedule.stream_margin` for each stream over the count at the last full
  collection is left out of the growth, counting from the most streams open at once since (a
  mass disconnect is not growth). A stream is a request being answered, HTTP/1.1 or one stream
  of an HTTP/2 connection alike (:data:`STREAMS`): over HTTP/2 one connection carries hundreds.
- Such a collection also doubles the growth that makes the next one due (up to
  :attr:`~FullCollectionSchedule.max_growth`); one that finds garbage sets it back.
- Pages freed by streams that closed go back to the system. Once the open streams have fallen
  by :data:`RETURN_AFTER_CLOSED` from the most open since the last time, the C allocator is
  asked to return its free pages (jemalloc's purge, or glibc's ``malloc_trim``), which it would
  otherwise keep resident (:mod:`ssegate.host.allocator`).

Every full collection is a warning (``gateway.gc_full``: its reason, pause, objects walked and
reclaimed; it stopped the loop in proportion to what the process holds, and the policy makes it
rare, so each is worth an operator's eye) and a count (``ssegate.gc.full_collections``, label
``reason``), and every collection of any generation an observation of ``ssegate.gc.pause``
(label ``generation``).
``SSEGATE_GC=python`` (:data:`ssegate.host.switches.GC`) keeps CPython's own schedule.
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

from ssegate.host import switches
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

CHECK_SECONDS = 1.0
"""How often the event loop looks at resident memory for a full collection."""
YOUNG_SECONDS = 0.1
"""How often the event loop collects the young generations (0 and 1) itself."""
NEVER = 2**31 - 1
"""A threshold the count of generation-1 collections never reaches: no automatic full one."""
BOUNDED_CACHES = ("ssegate.kafka.cache.bytes",)
"""Gauges of bytes held by caches with a bound of their own, left out of the growth."""
STREAMS = "http.active.requests"
"""The gauge of requests being answered (HTTP/1.1 exchanges and HTTP/2 streams), whose growth
:class:`FullCollectionSchedule` accounts for."""
RETURN_AFTER_CLOSED = 500
"""Streams closed since the most open that make the C allocator return its free pages."""
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
    streams: int = 0
    """The streams open after the last full collection (or at start)."""
    most_streams: int = 0
    """The most streams seen open at once since the last full collection."""
    per_stream: float = 0.0
    """Bytes each stream opened since the last full collection is taken to hold: measured by
    the last one that found next to no garbage, ``0`` once one finds garbage."""
    stream_margin: float = 1.5
    """How many times :attr:`per_stream` each stream opened since is allowed: a stream holds
    more once it has streamed a while than while it opens (docs/performance.md, "Garbage-
    collection pauses")."""

    def due(self, resident: int, now: float, streams: int = 0) -> FullReason | None:
        """Why a full collection should run now, or ``None``, with ``streams`` open (the most
        seen since the last full collection is kept)."""
        self.most_streams = max(self.most_streams, streams)
        opened = max(0, self.most_streams - self.streams)
        grown = resident - self.baseline - self.per_stream * self.stream_margin * opened
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
        streams: int = 0,
    ) -> None:
        """A full collection finished, leaving ``resident`` bytes and ``streams`` open; it
        reclaimed ``reclaimed`` of the ``walked`` objects. Growth that brought no garbage is
        not met with the next full collection as soon: a gateway's memory grows with the
        streams it holds, and each full collection costs in proportion to them."""
        if walked > 0 and reclaimed < self.worth * walked:
            self.growth = min(self.max_growth, self.growth * 2)
            opened = max(self.most_streams, streams) - self.streams
            if opened > 0:
                self.per_stream = max(0, resident - self.baseline) / opened
        else:
            self.growth = self.base_growth
            self.per_stream = 0.0
        self.baseline = resident
        self.last = now
        self.streams = self.most_streams = streams


MALLCTL_ARENAS_ALL = 4096
"""jemalloc's index for "every arena" in a ``mallctl`` name."""


def _find_page_return() -> Callable[[int], int] | None:
    """What makes the C allocator return its free pages now: jemalloc's purge of every arena
    when it is preloaded (:mod:`ssegate.host.allocator`; without it, jemalloc returns them
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
    """When the C allocator is asked to return its free pages: pure, given the streams open."""

    after_closed: int = RETURN_AFTER_CLOSED
    most: int = 0
    """The most streams open at once since the last return (or start)."""

    def due(self, streams: int) -> bool:
        """Whether ``streams`` open now is ``after_closed`` fewer than the most since the
        last return; if so, the most starts again from now."""
        self.most = max(self.most, streams)
        if self.most - streams < self.after_closed:
            return False
        self.most = streams
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
            self._unbounded(), time.monotonic(), streams=self._streams()
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
        if not switches.GC.on():
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
        schedule.ran(unbounded, time.monotonic(), reclaimed, walked, self._streams())
        self.full_collections += 1
        self._metrics.inc("ssegate.gc.full_collections", reason=reason)
        log.event("gateway.gc_full", level=logging.WARNING,
                  reason=reason, pause_ms=round(pause * 1000, 1), walked=walked,
                  reclaimed=reclaimed, unbounded_mib=round(unbounded / 2**20, 1),
                  streams=schedule.streams,
                  per_stream_kib=round(schedule.per_stream / 1024, 1),
                  next_growth=schedule.growth)  # fmt: skip
        return reclaimed

    def _unbounded(self) -> int:
        """Resident bytes less those of the bounded caches."""
        metrics = self._metrics
        bounded = sum(metrics.gauge_total(name) for name in BOUNDED_CACHES)
        return max(0, self._resident() - int(bounded))

    def _streams(self) -> int:
        return int(self._metrics.gauge_total(STREAMS))

    def _check(self) -> None:
        self._timer = self._loop.call_later(self._check_seconds, self._check)
        streams = self._streams()
        reason = self.schedule.due(self._unbounded(), time.monotonic(), streams)
        if reason is not None:
            self.collect_fully(reason)
        if self.free_pages.due(streams):
            self._return_free_pages(streams)

    def _return_free_pages(self, streams: int) -> None:
        """Streams closed in number: the C allocator gives back the pages they freed."""
        if _RETURN_PAGES is None:
            return
        before = self._resident()
        started = time.perf_counter()
        _RETURN_PAGES(0)
        pause = time.perf_counter() - started
        self.pages_returned += 1
        log.event("gateway.free_pages_returned", level=logging.DEBUG, streams=streams,
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
