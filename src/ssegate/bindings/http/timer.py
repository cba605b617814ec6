"""What HTTP/1.1 and HTTP/2 connections share about time: timers, and closing gracefully.

A connection has a single timer at a time for itself: its idle timeout while nothing is in
flight, or the grace period of a lingering close. :class:`RequestDeadlines` is one more, for the
requests still arriving: each must end within the request timeout.

:func:`linger_close` is how a connection ends after a final answer (a refusal, a GOAWAY) without
losing it: closing with unread input makes the kernel send RST, which can destroy the answer
before the peer reads it. So the write side is shut, input is read and dropped, and the
connection closes at the peer's EOF or after a short grace period.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

LINGER_SECONDS = 2.0


class ConnectionTimer:
    """One re-armable timer: arming it cancels what was armed before."""

    __slots__ = ("_handle",)

    def __init__(self) -> None:
        self._handle: asyncio.TimerHandle | None = None

    @property
    def armed(self) -> bool:
        return self._handle is not None

    def arm(self, delay: float, callback: Callable[[], None]) -> None:
        self.cancel()
        self._handle = asyncio.get_running_loop().call_later(delay, self._fire, callback)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self, callback: Callable[[], None]) -> None:
        self._handle = None
        callback()


class RequestDeadlines:
    """Requests that must end within ``timeout`` seconds of starting, on one timer.

    Every request gets the same timeout, so deadlines come due in the order they were set: a
    queue and a timer armed for its head. ``overdue(key)`` is called for each key whose
    deadline passed; whether that request has ended since is the caller's to check.
    """

    __slots__ = ("_overdue", "_queue", "_timeout", "_timer")

    def __init__(self, timeout: float, overdue: Callable[[int], None]) -> None:
        self._timeout = timeout
        self._overdue = overdue
        self._queue: list[tuple[float, int]] = []
        """(deadline, key), soonest first; a list, as an empty deque takes 760 bytes and every
        connection has one."""
        self._timer = ConnectionTimer()

    def expect(self, key: int) -> None:
        self._queue.append((time.monotonic() + self._timeout, key))
        if not self._timer.armed:
            self._timer.arm(self._timeout, self._fire)

    def cancel(self) -> None:
        self._timer.cancel()
        self._queue.clear()

    def close(self) -> None:
        """Cancel, and let go of ``overdue`` (a method of the connection that holds this: kept,
        it would make the two a cycle that only the cyclic collector could free)."""
        self.cancel()
        self._overdue = _ignore

    def _fire(self) -> None:
        now = time.monotonic()
        queue = self._queue
        due = 0
        while due < len(queue) and queue[due][0] <= now:
            due += 1
        overdue, queue[:due] = queue[:due], []
        for _, key in overdue:
            self._overdue(key)
        if queue:
            self._timer.arm(max(0.0, queue[0][0] - now), self._fire)


def _ignore(key: int) -> None:
    """What closed deadlines call: nothing is overdue on a closed connection."""


def linger_close(transport: asyncio.Transport, timer: ConnectionTimer) -> bool:
    """Shut the write side and close after the grace period; False when that cannot be done
    (the transport is closing, or cannot half-close, as over TLS) and the caller should close."""
    if transport.is_closing() or not transport.can_write_eof():
        return False
    transport.write_eof()
    timer.arm(LINGER_SECONDS, transport.close)
    return True
