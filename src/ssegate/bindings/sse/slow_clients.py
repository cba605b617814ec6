"""Slow clients of the sse server: when a stream stalls, reads again, or is dropped.

:class:`SlowClientPolicy` is the half of :class:`~ssegate.bindings.sse.server.DownstreamStream`
that decides "slow": nothing else in the sse server does, and a source hears of it only through
:meth:`~ssegate.bindings.sse.source.Subscription.pace`.

A stream's unsent bytes are what ssegate buffers for it and what the kernel holds
unsent for its connection (:attr:`ResponseStream.unsent`). A client stalls at once when a write to
it is refused: its own write left the stream not :attr:`~ResponseStream.writable` (what lies below
did not take it whole), or a group's direct write to its socket came back short
(:meth:`DownstreamStream.refused`). That is the one backpressure signal, the same for every kind of
stream: a chunked HTTP/1.1 response, cleartext or TLS, whose socket takes only half of
:data:`~ssegate.bindings.tcp.send_queue.SEND_LOW_WATER` unsent from its head on (without the limit,
a loopback socket's kernel takes megabytes), so that a write left to its transport means the
client's window is shut; an HTTP/2 stream whose flow-control window keeps its data back, or whose
connection's transport is paused. As a backstop, a client also stalls when the sweep finds its
unsent bytes over :data:`STALL_MARK` (or half of ``max-buffered``, when that is less): a response
whose socket is not limited (HTTP/1.0, and HTTP/2, whose connections are left unlimited because a
limit costs each about an eighth more CPU: a peer that grants wide windows and reads nothing fills
its kernel's queue first), or a connection whose transport holds bytes without pausing.

A stall ends once the stream is writable again and its unsent bytes are at or under a mark: asked
at each sweep, and at once when the stream may be writable again (its ``on_drain``: the transport
took what it held, a window opened). The mark of a stall a refused write found is
:data:`RESUME_MARK` where the stream has a cleartext socket of its own, whose kernel takes writes
again there; the stall mark everywhere else, since an HTTP/2 stream's unsent bytes are its whole
connection's (shared by all its streams) and over TLS the TLS layer holds bytes the count does not
see, so that being writable again is what says the client reads. The stall mark is also the mark
of a stall found at a sweep. A client is dropped when its unsent bytes pass ``max-buffered``
(reason ``bytes``: ssegate's buffer is checked on every write, the total on every sweep) or when it
has been stalled for ``slow-client-timeout`` seconds and behind what its source keeps for it for as
long (reason ``time``; :meth:`Subscription.behind_since`): a source that keeps a stopped stream's
place at no cost (the sse-kafka proxy, while the partition cache holds it) lets it wait however
long, and one that keeps nothing (the SSE proxy, whose log counts toward ``max-buffered``) is
behind from the stall's start. Only streams written since the
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
"""Unsent bytes at or under which a client with a cleartext socket of its own that a refused
write stalled reads again: under what makes its kernel refuse
(:data:`~ssegate.bindings.tcp.send_queue.SEND_LOW_WATER`)."""

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
        """While stalled: the unsent bytes at or under which, writable again, it reads again
        (see the module doc)."""
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
        elif unsent <= self._resume_at and self._stream.writable:
            self._resumed = (now, stalled_since)
            self.stalled_since = None
            self._cancel_stall_timer()
            self._pace(False)
        elif 0 < server.slow_client_timeout <= now - stalled_since:
            self._timed_out(now, stalled_since, unsent)
        return self._state == CLOSED

    def _timed_out(self, now: float, stalled_since: float, unsent: int) -> None:
        """Stalled for the timeout: dropped once it has also been behind what its source keeps
        for it for the timeout (:meth:`Subscription.behind_since`), else asked again then, or
        at each sweep while its source keeps its place."""
        timeout = self._server.slow_client_timeout
        subscription = self.subscription
        behind = (
            stalled_since if subscription is None else subscription.behind_since(stalled_since, now)
        )
        if behind is None:
            return
        if timeout <= now - behind:
            self._drop_slow("time", unsent, now - stalled_since)
        elif self._stall_timer is None:
            self._time_stall(behind + timeout, now)

    def refused(self) -> None:
        """A write to the client was not taken whole: the stream is not writable, or a group's
        direct write to its socket came back short. The client stalls now, not when the sweep
        finds it over the mark, and its source is told at once (:meth:`Subscription.pace`): a
        replay stops there."""
        if self.stalled_since is None and self._state == OPEN:
            server = self._server
            direct = self._stream.direct_socket()
            own_socket = direct is not None and not direct.sealed
            self._stall(
                server.sweep.clock(), server.resume_mark if own_socket else server.stall_mark
            )

    def _drained(self) -> None:
        """The stream may be writable again (its transport took what it held, a window
        opened): a stalled client may read again; it is asked now rather than at the next
        sweep."""
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
        if timeout > 0:
            self._time_stall(since + timeout, now)

    def _time_stall(self, due: float, now: float) -> None:
        """Check again at ``due`` on the sweep's clock, when a timeout is up (without a running
        loop, the sweep does, at its next tick)."""
        if self._state == CLOSED:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._stall_timer = loop.call_later(max(0.0, due - now), self._stall_ends, due)

    def _stall_ends(self, due: float) -> None:
        self._stall_timer = None
        # A crowd that stalled together times out together: dropped over several loop turns.
        self._server.turns.run(lambda: self._stall_is_up(due))

    def _stall_is_up(self, due: float) -> None:
        if self._state == CLOSED or self.stalled_since is None:
            return
        # The loop's clock and the sweep's may differ by a millisecond: the timeout is up.
        self._dropped_as_slow(max(self._server.sweep.clock(), due))

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
