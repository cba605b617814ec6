"""The contract between the ``sse`` server and what it exits to.

The sse server owns the downstream response: its headers, the wire format, keep-alives, the
slow-client policy and the check of its ``requests[].content`` model. What it exits to (the
``sse`` client that proxies an upstream SSE server, the ``sse-kafka`` proxy) is an
:class:`SseSource` (:data:`SSE_SOURCE`, checked when the graph is built): given a request and
the resume position it starts delivering events into an :class:`SseSink` until the
:class:`Subscription` is cancelled.

Rules both sides keep:

- Everything is synchronous and non-blocking: a source calls the sink from its own callbacks
  or tasks; the sink queues bytes and returns at once. A source never awaits the sink.
- The downstream response headers are held back until the source calls :meth:`SseSink.open`
  or delivers the first event, so a source that cannot reach its upstream can still answer
  with an HTTP error through :meth:`SseSink.fail`.
- After :meth:`SseSink.end` or :meth:`SseSink.fail` the sink ignores further calls, and once
  ``sink.closed`` is true (the client went away, was too slow, or the stream ended) the source
  should stop; the server also cancels the subscription then.
- ``subscribe`` may call ``sink.fail`` before it returns (an immediate refusal).
- Events must pass the sink's :attr:`SseSink.check` when it has one. :meth:`SseSink.event`
  applies it itself. Bytes given to :meth:`SseSink.write_encoded` are written as they are, so a
  source that encodes once for many sinks checks each event once (not once per sink), writes
  the id-only block ``id:<id>`` and a blank line in place of an event that failed (its id still
  moves the client's cursor, as :meth:`SseSink.event` does), and reports the failure once
  through :meth:`EventCheck.refused`. Sinks with different checks never share bytes.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ssegate.contract.exchange import Request
from ssegate.engine.context import ExitKind


class EventCheck(Protocol):
    """A check every event's data must pass before it reaches a client (an sse server's
    ``requests[].content`` model). Compared by identity: sinks on the same path share one."""

    def __call__(self, data: str) -> str | None:
        """``None`` when ``data`` is valid, else the reason it is not."""

    def refused(self, reason: str, **context: object) -> None:
        """Log and count one event that failed (``context``: where it came from, for the
        log line). Called once per event, not once per client."""


class SseSink(Protocol):
    """One downstream SSE stream, as a source sees it."""

    def open(self) -> None:
        """The source is live: send the ``200`` headers now even if no event is ready yet."""

    def event(
        self,
        data: str | None,
        *,
        event: str | None = None,
        id: str | None = None,
        timestamp: int = 0,
    ) -> None:
        """Send one event; ``data=None`` sends only ``id`` (moves the client's resume cursor).

        ``event=None`` writes no ``event:`` line (the type ``message``); ``id=None`` leaves the
        client's last event id as it is, ``id=""`` resets it. ``timestamp`` is when the event
        happened, in milliseconds since the epoch (0: unknown), written only for a client that
        asked for it (:attr:`timestamps`).
        """

    def write_encoded(self, data: bytes) -> None:
        """Send bytes already encoded as whole SSE blocks (shared by many subscribers), as
        they are: every event in them passed :attr:`check` (see the module's rules)."""

    @property
    def check(self) -> EventCheck | None:
        """The check events must pass before they reach this client; ``None``: none."""

    @property
    def timestamps(self) -> bool:
        """The client asked for ``ext=timestamp``: bytes for :meth:`write_encoded` must carry a
        ``timestamp:`` line before each event that has one."""

    def comment(self, text: str = "") -> None:
        """Send a comment line (``:text``) and a blank line."""

    def end(self) -> None:
        """The source finished for good: end the response normally."""

    def fail(self, status: int, reason: str) -> None:
        """Before anything was sent: answer ``status`` with ``reason``; after: abort the stream."""

    @property
    def closed(self) -> bool:
        """True once the stream ended, failed, or the client went away."""


class Subscription(Protocol):
    """A running delivery from a source into one sink."""

    def cancel(self) -> None:
        """Stop delivering and release what the subscription holds (upstream connection)."""

    def resume_id(self) -> str | None:
        """Asked when the stream is due a keep-alive: an id to send instead of the ``:``
        comment (``id:<it>`` and a blank line, which fires no event but moves the client's
        resume point), or ``None``. A source whose resume point moves without events (passed
        over by a filter) returns it here once per move."""

    def pace(self, stalled: bool) -> None:
        """The one backpressure signal: the client stopped reading (``True``), or reads again
        (``False``). A source that can wait writes nothing more until then, and then goes on
        from where it stopped (the sse-kafka proxy resumes from the partition cache as a
        reconnect with the last event id would: nothing is kept for the client meanwhile). A
        source that cannot wait writes on; its bytes wait in the client's connection, which
        the sse server closes past ``max-buffered``."""

    def behind_since(self, stalled_since: float, now: float) -> float | None:
        """Asked of a stream stalled since ``stalled_since`` once it has been so for
        ``slow-client-timeout`` (``now``: the sweep's clock): since when it has been behind
        what its source keeps for it, or ``None`` while its source still keeps its place and
        it may wait at no cost (the sse-kafka proxy: while the partition cache holds every
        partition from where it stopped). The sse server drops it as too slow once it has been
        behind for the timeout. A source that keeps nothing answers ``stalled_since``."""


@runtime_checkable
class SseSource(Protocol):
    """What an sse server route exits to."""

    def subscribe(self, request: Request, last_event_id: str | None, sink: SseSink) -> Subscription:
        """Start delivering events for ``request`` after ``last_event_id`` into ``sink``."""


SSE_SOURCE: ExitKind[SseSource] = ExitKind(
    SseSource, "an sse source (an sse client or an sse-kafka proxy)"
)
