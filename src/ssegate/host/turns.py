"""Work that may wait for a later turn of the event loop: :class:`TurnBudget`.

A client's new request costs the gateway about a tenth of a millisecond (parse, route, guard,
open the stream, subscribe it), and the event loop hands every request that arrived in one poll
to its connection in the same turn. A thousand clients that connect at once so hold the loop for
up to a hundred milliseconds, and every event of every open stream waits behind them: the live
streams' latency rises by that much for the crowd's arrival, whatever the crowd does next.

Opening a request can wait a turn; writing an open stream's events should not. A
:class:`TurnBudget` runs such deferrable work at once while the work run in the current turn has
taken less than :data:`TURN_BUDGET`; past it, the work waits, in order, for later turns. Each
later turn runs waiting work for up to the budget and leaves the rest behind whatever else was
queued meanwhile (a Kafka batch to hand over, a sweep slice), so those wait at most about a
budget for the crowd. What waited is counted (:attr:`TurnBudget.deferred`; the http server
counts its requests that waited in ``ssegate.http.requests.deferred``).

The turn's start is the first deferrable work in it, and the turn ends when a callback queued
then runs (:meth:`asyncio.AbstractEventLoop.call_soon`: after everything already queued). Without
a running loop (a test calling a handler by hand) every piece of work runs at once, and so it
does with ``SSEGATE_TURNS=off`` (:data:`ssegate.host.switches.TURNS`): a budget of none.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from ssegate.host import switches

TURN_BUDGET = 0.002
"""Seconds of deferrable work a turn of the event loop runs before the rest waits."""


class TurnBudget:
    """Deferrable work, run at once within a turn's budget and otherwise in later turns."""

    def __init__(
        self, budget: float | None = TURN_BUDGET, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.budget = budget
        """Seconds of deferrable work per turn; ``None``: no budget, all work runs at once."""
        self._clock = clock
        self._turn_started: float | None = None
        """When the current turn's first deferrable work started (None: none yet)."""
        self._waiting: deque[Callable[[], None]] = deque()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the turns are of: work left waiting on a loop that is gone is dropped."""
        self.deferred = 0
        """Pieces of work that waited for a later turn, since the start."""

    def __len__(self) -> int:
        """Pieces of work waiting."""
        return len(self._waiting)

    def run(self, work: Callable[[], None]) -> bool:
        """Run ``work`` now (True), or after what waits already once this turn's budget is
        spent (False)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or self.budget is None:
            work()
            return True
        if loop is not self._loop:
            self._for_loop(loop)
        if self._waiting or self._spent(loop):
            self._waiting.append(work)
            self.deferred += 1
            self._schedule(loop)
            return False
        work()
        return True

    def _for_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Turns of ``loop`` from now on. What waited on another loop is dropped: that loop
        is gone (a process has one; a test suite runs many), with the connections it served."""
        self._loop = loop
        self._waiting.clear()
        self._scheduled = False
        self._turn_started = None

    def _spent(self, loop: asyncio.AbstractEventLoop) -> bool:
        now = self._clock()
        started = self._turn_started
        if started is None:
            self._turn_started = now
            loop.call_soon(self._turn_over)
            return False
        return now - started >= (self.budget or 0.0)

    def _turn_over(self) -> None:
        self._turn_started = None

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._resume)

    def _resume(self) -> None:
        """A later turn: run what waits for up to the budget, then queue the rest again."""
        self._scheduled = False
        waiting = self._waiting
        clock = self._clock
        started = clock()
        try:
            while waiting:
                waiting.popleft()()
                if clock() - started >= (self.budget or 0.0):
                    break
        finally:  # work that raised leaves the rest waiting, not stranded
            if waiting:
                self._schedule(asyncio.get_running_loop())
            self._turn_started = None


_shared = TurnBudget(TURN_BUDGET if switches.TURNS.on() else None)


def shared_turns() -> TurnBudget:
    """The process's turn budget, shared by every http and sse server binding."""
    return _shared
