"""What HTTP/1.1 and HTTP/2 build on: the connection's setup, counters and idle timeout, and a
response's bookkeeping.

:class:`HttpProtocolBase` is a :class:`~ssegate.bindings.tcp.flow.FlowControlledProtocol` that
also holds the connection's :class:`~ssegate.bindings.http.types.ConnectionSetup`, counts in the
binding's metrics, and keeps the connection's timers: the idle timeout while nothing is in
flight (or the grace period of a closing), and the deadlines of the requests still arriving
(:class:`~ssegate.bindings.http.timer.RequestDeadlines`).

:class:`ResponseStreamBase` is the part of :class:`~ssegate.contract.exchange.ResponseStream` both
protocols answer alike: headers are sent once (a 200 with none when data comes first), nothing
is sent after the end or once closed, a HEAD response sends no body, ``on_close`` callbacks run
once when the stream closes and ``on_drain`` callbacks each time the protocol says it drained,
``buffered``/``unsent`` are the stream's own queue plus the connection's, and ``writable`` is
an open stream holding nothing itself on a connection whose transport is not paused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from ssegate.bindings.http.timer import ConnectionTimer, RequestDeadlines
from ssegate.bindings.http.types import ConnectionSetup
from ssegate.bindings.tcp.flow import FlowControlledProtocol
from ssegate.contract.exchange import DirectSocket


class HttpProtocolBase(FlowControlledProtocol):
    """One HTTP connection of either version: its setup, counters and timers."""

    def __init__(self, setup: ConnectionSetup, request_timeout: float) -> None:
        super().__init__()
        self._setup = setup
        self._dispatch = setup.dispatch
        self._limits = setup.limits
        self._timer = ConnectionTimer()
        """The idle timeout while nothing is in flight, or the grace period of a closing."""
        self._deadlines = RequestDeadlines(request_timeout, self._request_overdue)
        """Each request still arriving must have arrived within ``request_timeout``."""

    @property
    def _ending(self) -> bool:
        """Nothing more is to be answered on this connection."""
        raise NotImplementedError

    def _idle_expired(self) -> None:
        """The idle timeout passed; whether anything is in flight since is for it to check."""
        raise NotImplementedError

    def _request_overdue(self, key: int) -> None:
        """The request timeout passed for the request ``key`` (given to ``_deadlines.expect``);
        whether it has arrived since is for it to check."""
        raise NotImplementedError

    def _stop_timers(self) -> None:
        """Nothing more is timed on this connection: no idle timeout, no request deadline."""
        self._timer.cancel()
        self._deadlines.cancel()

    def _release(self) -> None:
        """The connection is gone: stop its timers and let go of what refers back to it, so
        that reference counting frees it at once. The collector policy
        (:mod:`ssegate.host.collector`) freezes what lives long, and a cycle of frozen
        objects waits for a full collection: closed connections would pile up until one."""
        self._stop_timers()
        self._deadlines.close()

    def _arm_idle(self) -> None:
        if self._transport is None or self._ending:
            self._timer.cancel()
            return
        self._timer.arm(self._limits.idle_timeout, self._idle_expired)

    def _count(self, name: str, **labels: str) -> None:
        metrics = self._setup.metrics
        if metrics is not None:
            metrics.inc(name, self._setup.binding, 1.0, **labels)


Connection = TypeVar("Connection", bound=FlowControlledProtocol)


class ResponseStreamBase(Generic[Connection]):
    """The bookkeeping of one response, on a connection of type ``Connection``."""

    def __init__(self, connection: Connection, head_only: bool) -> None:
        self._connection = connection
        self._head_only = head_only
        self._headers_sent = False
        self._ended = False
        """The end of the response was given (it may still wait to be sent)."""
        self._closed = False
        self.pending_size = 0
        """Bytes the stream holds itself, not yet handed to the connection."""
        self._close_callbacks: list[Callable[[], None]] = []
        self._drain_callbacks: list[Callable[[], None]] = []

    # -- ResponseStream -----------------------------------------------------------------------

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        if self._headers_sent or self._closed:
            return
        self._headers_sent = True
        self._ended = end
        self._write_head(status, headers, end)

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        if self._closed or self._ended:
            return
        if not self._headers_sent:
            self.send_headers(200, [])
            if self._closed:
                return
        self._ended = end
        self._write_body(b"" if self._head_only else data, end)

    @property
    def buffered(self) -> int:
        return self.pending_size + self._connection.buffered

    @property
    def unsent(self) -> int:
        return self.pending_size + self._connection.unsent

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def writable(self) -> bool:
        """Open, holding nothing itself, and its connection's transport not paused."""
        return not self._closed and not self.pending_size and not self._connection.write_paused

    def direct_socket(self) -> DirectSocket | None:
        """None: only an HTTP/1.1 response streaming chunked over cleartext TCP has one."""
        return None

    def on_close(self, callback: Callable[[], None]) -> None:
        if self._closed:
            callback()
        else:
            self._close_callbacks.append(callback)

    def on_drain(self, callback: Callable[[], None]) -> None:
        self._drain_callbacks.append(callback)

    # -- for the protocol ---------------------------------------------------------------------

    def _write_head(self, status: int, headers: list[tuple[str, str]], end: bool) -> None:
        """Hand the head to the connection (called once)."""
        raise NotImplementedError

    def _write_body(self, data: bytes, end: bool) -> None:
        """Hand body bytes (none for HEAD) and perhaps the end to the connection."""
        raise NotImplementedError

    def drained(self) -> None:
        """The connection can take more: run the drain callbacks."""
        for callback in list(self._drain_callbacks):
            callback()

    def close(self) -> None:
        """The stream is over: run the close callbacks, once."""
        if self._closed:
            return
        self._closed = True
        self._drain_callbacks.clear()
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            callback()
