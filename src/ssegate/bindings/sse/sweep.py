"""The one timer that visits every open SSE stream of a process (:class:`StreamSweep`).

The sse server's streams (:class:`~ssegate.bindings.sse.server.DownstreamStream`) join the sweep
when they open and leave it when they close; a visit is the stream's own business (a keep-alive,
the slow-client checks). The sweep owns only the pacing: one tick per round, each round spread
over :data:`SWEEP_SLICES` loop callbacks, none holding the loop for longer than
:data:`SLICE_BUDGET`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class SweptStream(Protocol):
    """What the sweep asks of a stream it visits."""

    @property
    def sweep_period(self) -> float:
        """The shortest interval the sweep must keep for this stream (inf: any)."""

    def visit(self, now: float) -> None:
        """The stream's turn in this round."""


SWEEP_SLICES = 10
"""Loop callbacks a sweep round is spread over."""

SLICE_BUDGET = 0.004
"""Seconds a sweep slice may hold the loop; the rest of the slice goes on at the loop's next
turn, after the I/O and events that waited."""


class StreamSweep:
    """One timer that visits every open SSE stream: idle ones send a keep-alive, slow ones are
    dropped.

    Streams mark themselves written on every write; a visit finding a stream unwritten for
    ``keepalive`` seconds makes it send ``:``, and one finding it written (or stalled) checks
    how far behind its client is. Every stream is visited once per tick, a quarter of the
    shortest keep-alive or slow-client timeout (at most 1 s), so a keep-alive goes out between
    ``keepalive`` and ``keepalive + tick``. A round is visited in :data:`SWEEP_SLICES` slices
    spread over the tick, not all at once: 20,000 streams opened together would otherwise send
    20,000 keep-alives in one loop callback, and every live event behind them would wait. A
    slice that takes longer than :data:`SLICE_BUDGET` (50,000 streams opened together over
    HTTP/2 make a slice of 5,000 keep-alives, about 200 ms) goes on at the loop's next turn,
    so no slice holds up the events behind it for longer than that; keep-alives are then later
    by the time the loop needs.
    Without a running event loop nothing is scheduled and :meth:`sweep` is called by hand.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.tick = 1.0
        self._members: dict[SweptStream, None] = {}
        self._round: list[SweptStream] = []
        """What is left to visit of the current round, visited from the end."""
        self._slice = 0
        self._left = 0
        """Visits left in the current slice, after one that ran out of time."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.Handle | None = None

    def __len__(self) -> int:
        return len(self._members)

    def add(self, member: SweptStream) -> None:
        self.tick = min(self.tick, max(0.02, member.sweep_period / 4))
        self._members[member] = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._handle is not None and self._loop is not loop:
            self._handle.cancel()
            self._handle = None
        if self._handle is None:
            self._loop = loop
            self._handle = loop.call_later(self.tick / SWEEP_SLICES, self._fire)

    def discard(self, member: SweptStream) -> None:
        self._members.pop(member, None)
        if not self._members and self._handle is not None:
            self._handle.cancel()
            self._handle = None
            self._round = []
            self._left = 0

    def sweep(self, now: float | None = None) -> None:
        """Visit every member once."""
        at = self.clock() if now is None else now
        for member in list(self._members):
            member.visit(at)

    def _fire(self) -> None:
        self._handle = None
        if not self._left:  # a new slice
            if not self._round:
                self._round = list(self._members)
                self._slice = max(1, -(-len(self._round) // SWEEP_SLICES))
            self._left = min(self._slice, len(self._round))
        at = self.clock()
        deadline = time.perf_counter() + SLICE_BUDGET
        members = self._members
        visiting = self._round
        visited = 0
        while self._left and visiting:
            member = visiting.pop()
            self._left -= 1
            if member in members:  # not closed since the round began
                member.visit(at)
            visited += 1
            if not visited % 64 and time.perf_counter() >= deadline:
                break
        if not visiting:
            self._left = 0
        loop = self._loop
        if self._members and loop is not None and not loop.is_closed():
            if self._left:
                self._handle = loop.call_soon(self._fire)
            else:
                self._handle = loop.call_later(self.tick / SWEEP_SLICES, self._fire)


_shared_sweep = StreamSweep()


def shared_sweep() -> StreamSweep:
    """The process's stream sweep, shared by every sse server binding."""
    return _shared_sweep
