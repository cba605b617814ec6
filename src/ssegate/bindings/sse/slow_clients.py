"""Slow clients of the sse server: when a stream stalls, reads again, or is dropped.

:class:`SlowClientPolicy` is the half of :class:`~ssegate.bindings.sse.server.DownstreamStream`
that decides "slow": nothing else in the sse server does, and a source hears of it only through
:meth:`~ssegate.bindings.sse.source.Subscription.pace`.

A stream's unsent bytes are what ssegate buffers for it and what the kernel holds
unsent for its connection (:attr:`ResponseStream.unsent`). A client stalls when the sweep finds its
unsent bytes over :data:`STALL_MARK` (or half of ``max-buffered``, when that is less), or at once
when a write to its socket is refused (:meth:`DownstreamStream.refused`): a group's direct write,
or, for a chunked cleartext HTTP/1.1 response, the stream's own write that left bytes to its
transport (such a response's socket is limited from its head on, as a group's direct ones are).
Such a socket's kernel takes only half of :data:`~ssegate.bindings.tcp.send_queue.SEND_LOW_WATER`
unsent, so a refusal means the client's window is shut (without the limit, a loopback socket's
kernel takes megabytes). It reads again once its unsent bytes are back at
the stall mark, or, for a stall a refused write found, down to :data:`RESUME_MARK`, where its kernel
takes writes again: asked at each sweep, and at once when its connection drains (such a socket's
transport says so as soon as what the kernel refused has gone out). The stall mark stays the release
point of a stall found at a sweep, since the kernel's share of an HTTP/2 or TLS connection's unsent
bytes is the whole connection's. A client is dropped when its unsent bytes pass ``max-buffered``
(reason ``bytes``: ssegate's buffer is checked on every write, the total on every sweep) or when it
stays stalled for ``slow-client-timeout`` seconds (reason ``time``). Only streams written since the
last sweep, or stalled, are asked, so idle streams cost nothing. A stall sets a timer for the end of
its timeout, so the drop comes then, not at the first sweep after it (up to a tick later); the drops
of a crowd that stalled together are spread over loop turns (:mod:`ssegate.host.turns`).

A stall and its end are the one backpressure signal a source is given (:meth:`Subscription.pace`):
the source stops writing to the stream, and goes on from where it stopped once the client reads
again. The sse-kafka proxy goes on from the partition cache, as a reconnect with the last event
id would; the SSE proxy from its upstream's log of what its stopped streams missed
(:mod:`~ssegate.bindings.sse.upstream_log`), which counts toward their ``max-buffered``
(:meth:`DownstreamStream.owed`). Nothing is kept per client meanwhile: a client that reads nothing
costs no ``send()`` and no copy of what it misses. A source that cannot wait writes on, into the
connection's buffer, up to ``max-buffered``.

Dropping is abortive (:meth:`ResponseStream.abort`: an HTTP/1.1 connection is reset, an
HTTP/2 stream gets ``RST_STREAM(CANCEL)`` and its connection a reset too when that connection alone
is over ``max-buffered``), so everything queued for the client is freed at once, the kernel's part
included, and the client sees the stream fail and reconnects with its last id. Each drop is one
``sse.slow_client_closed`` log line and a count in ``ssegate.sse.slow_clients{reason}``.
"""

from __future__ import annotations

import asyncio
import math
from typing import Protocol

from ssegate.bindings.sse.source import Subscription
from ssegate.bindings.sse.sweep import StreamSweep
from ssegate.bindings.tcp.send_queue import SEND_LOW_WATER
from ssegate.contract.exchange import ResponseStream
from ssegate.host.turns import TurnBudget
from ssegate.telemetry.metrics import Metrics

STALL_MARK = 64 * 1024
"""Unsent bytes over which a stream counts as stalled (the slow-client time bound runs)."""
RESUME_MARK = SEND_LOW_WATER // 2
"""Unsent bytes at or under which a client that a refused direct write stalled reads again:
under what makes its kernel refuse (:data:`~ssegate.bindings.tcp.send_queue.SEND_LOW_WATER`)."""

RESTALL_WINDOW = 1.0
"""Seconds after a stall ended within which a new one is the same stall going on."""

PENDING, OPEN, CLOSED = 0, 1, 2
"""A stream's states: before its head is sent, streaming, closed."""


class SlowClientBounds(Protocol):
    """What the policy reads of its sse server (:class:`~ssegate.bindings.sse.server.SseServer`)."""

    name: str
    metrics: Metrics
    max_buffered: int
    slow_client_timeout: float
    stall_mark: int
    resume_mark: int
    sweep: StreamSweep
    turns: TurnBudget

    def slow_client(
        self, sink: SlowClientPolicy, reason: str, unsent: int, stalled_for: float
    ) -> None: ...


class SlowClientPolicy:
    """Stalls, their end and slow-client drops, on the state of a downstream stream."""

    __slots__ = ("_resume_at", "_resumed", "_stall_timer", "stalled_since")

    _server: SlowClientBounds
    _stream: ResponseStream
    _state: int
    subscription: Subscription | None
    remote: str
    last_id: str | None

    def __init__(self) -> None:
        self.stalled_since: float | None = None
        """When the client stalled (None: it reads)."""
        self._resume_at = 0
        """While stalled: the unsent bytes at or under which it reads again (the stall mark for
        a stall found at a sweep, :data:`RESUME_MARK` for one a refused write found)."""
        self._stall_timer: asyncio.TimerHandle | None = None
        """While stalled, with a loop running: the check at the end of the timeout."""
        self._resumed: tuple[float, float] = (-math.inf, 0.0)
        """When the last stall ended, and when it had begun."""

    def _close(self) -> None:
        raise NotImplementedError

    @property
    def stalled(self) -> bool:
        """The client reads nothing now; its source was told (:meth:`Subscription.pace`)."""
        return self.stalled_since is not None

    def owed(self, size: int) -> None:
        """Its source stopped writing to it (its client reads nothing) and owes it ``size``
        bytes: dropped as slow (reason ``bytes``) once that and what its connection holds pass
        ``max-buffered``, as if they had been written."""
        behind = self._stream.buffered + size
        if self._state == OPEN and behind > self._server.max_buffered:
            self._drop_slow("bytes", behind, owed=size)

    def _pace(self, stalled: bool) -> None:
        """The client stopped reading (``True``) or reads again: its source is told."""
        subscription = self.subscription
        if subscription is not None:
            subscription.pace(stalled)

    def _dropped_as_slow(self, now: float) -> bool:
        """Check the client's unsent bytes against both bounds; True when it was dropped."""
        server = self._server
        unsent = self._stream.unsent
        stalled_since = self.stalled_since
        if unsent > server.max_buffered:
            self._drop_slow("bytes", unsent)
        elif stalled_since is None:
            if unsent > server.stall_mark:
                self._stall(now, server.stall_mark)
        elif unsent <= self._resume_at:
            self._resumed = (now, stalled_since)
            self.stalled_since = None
            self._cancel_stall_timer()
            self._pace(False)
        elif 0 < server.slow_client_timeout <= now - stalled_since:
            self._drop_slow("time", unsent, now - stalled_since)
        return self._state == CLOSED

    def refused(self) -> None:
        """A write to the client's socket left bytes to its transport: the kernel holds what it
        takes unsent (:func:`~ssegate.bindings.tcp.send_queue.limit_unsent`, set by
        :meth:`~ssegate.contract.exchange.ResponseStream.direct_socket`), its window is shut. The
        client stalls now, not when the sweep finds it over the mark, and its source is told at
        once (:meth:`Subscription.pace`): a replay stops there."""
        if self.stalled_since is None and self._state == OPEN:
            server = self._server
            self._stall(server.sweep.clock(), server.resume_mark)

    def _drained(self) -> None:
        """The connection took what waited for it: a stalled client may read again; it is
        asked now rather than at the next sweep."""
        if self.stalled_since is not None and self._state == OPEN:
            self._dropped_as_slow(self._server.sweep.clock())

    def _stall(self, now: float, resume_at: int) -> None:
        """The client reads nothing since ``now``: tell its source, and time the stall, until
        its unsent bytes are down to ``resume_at``. A stall that begins within
        :data:`RESTALL_WINDOW` of the end of the last one is that stall going on: its clock keeps
        running from where it began (a client that trickles, its kernel taking a few bytes now
        and then, is not a client that reads)."""
        resumed_at, began = self._resumed
        since = began if now - resumed_at < RESTALL_WINDOW else now
        self.stalled_since = since
        self._resume_at = resume_at
        self._pace(True)
        timeout = self._server.slow_client_timeout
        self._time_stall(timeout, max(0.0, since + timeout - now))

    def _time_stall(self, timeout: float, delay: float) -> None:
        """Check again in ``delay`` s, when the stall's ``timeout`` is up (without a running
        loop, the sweep does, at its next tick)."""
        if timeout <= 0 or self._state == CLOSED:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._stall_timer = loop.call_later(delay, self._stall_ends, timeout)

    def _stall_ends(self, timeout: float) -> None:
        self._stall_timer = None
        # A crowd that stalled together times out together: dropped over several loop turns.
        self._server.turns.run(lambda: self._stall_is_up(timeout))

    def _stall_is_up(self, timeout: float) -> None:
        stalled_since = self.stalled_since
        if self._state == CLOSED or stalled_since is None:
            return
        # The loop's clock and the sweep's may differ by a millisecond: the timeout is up.
        self._dropped_as_slow(max(self._server.sweep.clock(), stalled_since + timeout))

    def _cancel_stall_timer(self) -> None:
        timer, self._stall_timer = self._stall_timer, None
        if timer is not None:
            timer.cancel()

    def _drop_slow(
        self, reason: str, unsent: int, stalled_for: float = 0.0, *, owed: int = 0
    ) -> None:
        """Too far behind: count it, release the source, and abort the response (its
        connection too when that is over ``max-buffered`` with what its source owes it, as it
        would be had those bytes been written)."""
        server = self._server
        server.slow_client(self, reason, unsent, stalled_for)
        server.metrics.inc("stream.errors.sent", server.name)
        stream = self._stream
        self._close()
        stream.abort(max(0, server.max_buffered - owed))
