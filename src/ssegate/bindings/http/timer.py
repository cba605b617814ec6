"""What HTTP/1.1 and HTTP/2 connections share about time: one timer, and closing gracefully.

A connection has a single timer at a time: its idle timeout while nothing is in flight, or the
grace period of a lingering close. :func:`linger_close` is how a connection ends after a final
answer (a refusal, a GOAWAY) without losing it: closing with unread input makes the kernel send
RST, which can destroy the answer before the peer reads it. So the write side is shut, input is
read and dropped, and the connection closes at the peer's EOF or after a short grace period.
"""

from __future__ import annotations

import asyncio
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


def linger_close(transport: asyncio.Transport, timer: ConnectionTimer) -> bool:
    """Shut the write side and close after the grace period; False when that cannot be done
    (the transport is closing, or cannot half-close, as over TLS) and the caller should close."""
    if transport.is_closing() or not transport.can_write_eof():
        return False
    transport.write_eof()
    timer.arm(LINGER_SECONDS, transport.close)
    return True
