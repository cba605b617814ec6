"""One downstream SSE stream fed by one Kafka topic subscription.

:class:`TopicSubscriber` is the :class:`~ssegate.kafka.topics.TopicListener` the proxy hands to
the Kafka cache and the :class:`~ssegate.bindings.sse.source.Subscription` it hands back to the
sse server. Per batch it moves its progress, asks its filter, and writes the SSE blocks
``id:<progress>`` + each message's shared block (:func:`~.batch_outcome.work_out`). It is
composed of :class:`~.live_partitions.LivePartitions` (where it is live, and what that makes
its progress) and :class:`~.resume_points.ResumePoints` (the ids it writes without an event:
keep-alives, id-only blocks, ``event:reset``). Rules:

- Messages arrive per partition in offset order and are written as they arrive: no partition
  waits for another.
- A batch is written with one ``write_encoded`` call. The ``event:``/``data:`` part of a
  message is encoded once per process (:class:`~.shared.EncodedMessages`) and shared by every
  subscriber. The ``id:`` lines depend on the subscriber's progress and shape: streams of one
  shape live on the topic are written as one broadcast (below), which works each batch out once.
- ``data:`` is the topic's value view applied to the value (the cache client's ``value`` model,
  e.g. an Avro record as JSON text), or the value as UTF-8 text for a topic without one. The
  view runs inside that shared encoding: once per message per process, never per subscriber.
  A view that fails on a value its model accepted is logged and counted
  (``ssegate.sse_kafka.view_failures``) and the event carries the UTF-8 text instead.
- A tombstone is ``event:delete`` with ``data:`` = base64url(key) (``data:`` for a null key).
- A stream whose sse server checks events (``requests[].content``: the sink's
  :attr:`~ssegate.bindings.sse.source.SseSink.check`) gets each message only if it passes that
  check, worked out and reported once per message with its shared encoding (never per
  subscriber, and not at all without a check); one that fails is written as its ``id:`` alone,
  so the client's cursor still moves past it. The check is part of the subscriber's shape.
- A client that asked for ``ext=timestamp`` gets ``timestamp:0x<hex>`` before each message's
  ``id:``; it is part of the subscriber's shape, so such clients share their bytes among
  themselves.
- Nothing is queued here. Bytes go straight to the sink, whose stream closes a client that
  falls more than ``max-buffered`` behind; the client reconnects with its last id and resumes.
  A subscriber that finds its sink closed cancels its topic subscription.
- A client that stops reading (:meth:`TopicSubscriber.pace`, the sse server's one backpressure
  signal) stops its subscriber: it leaves its broadcast or cancels its topic subscription, and
  keeps its progress (what its client was written, every live partition at the topic's live
  end). Once the client reads again it subscribes from there, exactly as a reconnect with its
  last event id would: from the partition cache, or from the broker once the cache let that go;
  then it goes live and joins its broadcast again. Nothing is kept for it meanwhile.
- A subscriber live on every partition of its topic joins the :class:`~.broadcast.Broadcast` of
  its shape (when its proxy keeps broadcasts): its own topic subscription ends, and the
  broadcast, a subscriber writing into a :class:`~ssegate.bindings.sse.fanout.SinkGroup`, writes
  each batch once for every member. A member only answers :meth:`TopicSubscriber.resume_id`
  (from the broadcast's progress) and leaves the broadcast when cancelled.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ssegate.bindings.sse.source import SseSink
from ssegate.bindings.sse_kafka.batch_outcome import work_out
from ssegate.bindings.sse_kafka.event_id import EventIdFormat, ProgressEncoder
from ssegate.bindings.sse_kafka.filters import MessageFilter
from ssegate.bindings.sse_kafka.live_partitions import LivePartitions
from ssegate.bindings.sse_kafka.resume_points import ResumePoints
from ssegate.bindings.sse_kafka.shared import EncodedMessages, Shapes, SubscriberShape
from ssegate.bindings.sse_kafka.traced_write import write_traced
from ssegate.kafka.topics import (
    DefaultOffset,
    KafkaMessage,
    LivePositions,
    TopicSource,
    TopicSubscription,
    UnknownTopic,
)
from ssegate.models.topics import ValueView
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.traces import DELIVERY


class BroadcastSeat(Protocol):
    """What a member asks of the broadcast that writes its stream
    (:class:`~.broadcast.Broadcast`)."""

    progress: ProgressEncoder
    live: LivePartitions

    def keep_alive_id(self, member: TopicSubscriber) -> str | None: ...

    def last_written(self, member: TopicSubscriber) -> str: ...

    def remove(self, member: TopicSubscriber) -> None: ...


class BroadcastOffers(Protocol):
    """Where a subscriber live on every partition offers itself to a broadcast
    (:class:`~.broadcast.Broadcasts`)."""

    def offer(self, subscriber: TopicSubscriber) -> None: ...


@dataclass(slots=True)
class SubscriberStats:
    """What a proxy counts over its subscribers (read by tests and telemetry)."""

    dropped: int = 0
    """Subscribers whose stream closed under them (slow client or gone)."""
    id_only: int = 0
    resets: int = 0


@dataclass(frozen=True, slots=True)
class Shares:
    """What every subscriber of one sse-kafka proxy shares: where it counts and logs, the
    messages' encodings, the interned shapes, and its clock."""

    binding: str
    metrics: Metrics
    stats: SubscriberStats
    encoded: EncodedMessages
    shapes: Shapes
    clock: Callable[[], float] = time.monotonic


class TopicSubscriber:
    """Feeds one sink from one topic subscription (a TopicListener and a Subscription)."""

    __slots__ = (
        "_behind_at",
        "_broadcast",
        "_cancelled",
        "_stopped_at",
        "broadcasts",
        "default",
        "interest",
        "live",
        "progress",
        "resume_points",
        "shape",
        "shares",
        "sink",
        "source",
        "topic",
        "topic_subscription",
    )

    def __init__(
        self,
        sink: SseSink,
        *,
        topic: str,
        progress: ProgressEncoder,
        message_filter: MessageFilter | None,
        id_format: EventIdFormat,
        shares: Shares,
        view: ValueView | None = None,
        broadcasts: BroadcastOffers | None = None,
        source: TopicSource | None = None,
        default: DefaultOffset | None = None,
    ) -> None:
        self.sink = sink
        self.topic = topic
        self.progress = progress
        self.shares = shares
        self.shape = shares.shapes.intern(
            SubscriberShape(message_filter, id_format, view, sink.timestamps, sink.check)
        )
        self.interest = message_filter.interest() if message_filter is not None else None
        self.topic_subscription: TopicSubscription | None = None
        self.live = LivePartitions()
        self.resume_points = ResumePoints(sink, id_format, shares.clock)
        self._cancelled = False
        self.broadcasts = broadcasts if source is not None else None
        """Where this subscriber joins a broadcast once live (with ``source``, which the
        broadcast subscribes to); ``None``: it stays alone."""
        self.source = source
        self.default = default
        """The topic's default offset this subscriber asked for: a resume asks for it again."""
        self._stopped_at: dict[int, int] | None = None
        """While its client reads nothing: where it goes on from (partition → next offset)."""
        self._behind_at: float | None = None
        """Since when the cache has not held where it goes on from (kept while it trickles)."""
        self._broadcast: BroadcastSeat | None = None
        """The broadcast this subscriber is (or was, once cancelled) a member of."""

    # -- TopicListener -----------------------------------------------------------------------

    def on_partitions(self, partitions: Sequence[int]) -> None:
        if self._gone():
            return
        self.live.known = len(partitions)
        self.sink.open()

    def on_live(self, partition: int, positions: LivePositions) -> None:
        self.live.add(partition, positions)
        if self.broadcasts is not None and self._broadcast is None and self.live_everywhere:
            self.broadcasts.offer(self)

    def on_messages(self, messages: Sequence[KafkaMessage]) -> None:
        if self._gone():
            return
        live, progress, points = self.live, self.progress, self.resume_points
        if live.partitions:
            live.follow(progress)
        outcome = work_out(messages, self.shape, progress, self.shares.encoded)
        if outcome.data is None:
            points.skipped += outcome.skipped
        else:
            points.written(outcome.token, outcome.skipped)
            if DELIVERY.current is None:
                self.sink.write_encoded(outcome.data)
            else:  # a batch with traced records fans out
                accepts = None if self.shape.filter is None else self.shape.filter.matches
                write_traced(DELIVERY.current, self.sink, outcome.data, messages, accepts)
            if self.sink.closed:  # too far behind: the sse server closed it just now
                self._dropped()
                return
        if points.skipped and not live.covers(messages):
            # a live partition's gap rides on the keep-alive (:mod:`~.resume_points`)
            points.passed_over(self.send_id_only, self._gone)

    def on_skipped(self, partition: int, next_offset: int) -> None:
        if self._gone():
            return
        if self.progress.advance(partition, next_offset):
            self.resume_points.skipped += 1
            self.resume_points.passed_over(self.send_id_only, self._gone)

    def on_reset(self, partition: int, requested: int, earliest: int) -> None:
        self._reset(partition, earliest, "requested", requested)

    def on_time_reset(self, partition: int, since: int, earliest: int) -> None:
        """The stream's ``since`` falls at or before ``partition``'s oldest record left after
        retention: the same ``event:reset``, with ``since`` (ms) in place of ``requested``."""
        self._reset(partition, earliest, "since", since)

    def _reset(self, partition: int, earliest: int, asked: str, value: int) -> None:
        if self._gone():
            return
        self.progress.advance(partition, earliest)
        report_reset(self.shares, self.topic, partition, earliest, asked, value)
        self.resume_points.reset(self.live_token(), partition, earliest, asked, value)

    def on_status(self, available: bool, reason: str = "") -> None:
        """Nothing to do: the cache logs the broker's state once per topic, and the stream stays
        open and resumes when the broker is back (its client needs only the keep-alives)."""

    # -- Subscription --------------------------------------------------------------------------

    def resume_id(self) -> str | None:
        """The id to carry on a keep-alive: the progress, when it moved past the last id
        written (the stream passed over messages its filter does not want); else ``None``."""
        if self._cancelled or self._stopped_at is not None:
            return None
        if self._broadcast is not None:
            return self._broadcast.keep_alive_id(self)
        token = self.live_token()
        return self.resume_points.keep_alive(token) if self.progress.offsets else None

    def pace(self, stalled: bool) -> None:
        """The stream's client stopped reading: stop; or it reads again: go on from where it
        stopped (see the module's doc)."""
        if self._cancelled:
            return
        if stalled:
            self._stop()
        else:
            self._resume()

    def behind_since(self, stalled_since: float, now: float) -> float | None:
        """``None`` while the partition cache holds every partition from where this stream
        stopped (resuming costs nothing but the replay); else since when it has been found
        behind the cache, through the stops and resumes of a client that trickles."""
        start = self._stopped_at
        if start is None or self.source is None:
            return stalled_since
        if self.source.holds(self.topic, start):
            self._behind_at = None
            return None
        if self._behind_at is None:
            self._behind_at = now
        return self._behind_at

    def _stop(self) -> None:
        if self._stopped_at is not None:
            return
        broadcast, self._broadcast = self._broadcast, None
        if broadcast is not None:  # what the broadcast wrote it is the broadcast's progress
            start = broadcast.live.start(broadcast.progress)
            self.resume_points.last_token = broadcast.last_written(self)
            broadcast.remove(self)
            self.progress = ProgressEncoder(start)
        else:
            start = self.live.start(self.progress)
            subscription, self.topic_subscription = self.topic_subscription, None
            if subscription is not None:
                subscription.cancel()
        self._stopped_at = start
        self.live.clear()
        self.resume_points.cancel_timer()

    def _resume(self) -> None:
        start, self._stopped_at = self._stopped_at, None
        if start is None or self.source is None:
            return
        try:
            self.topic_subscription = self.source.subscribe(
                self.topic, start, self, default=self.default
            )
        except UnknownTopic:  # deleted while the client read nothing
            log.warning("sse_kafka.topic_gone", binding=self.shares.binding, topic=self.topic)
            self.sink.end()
            self.cancel()
            return
        if self.sink.closed:
            self.cancel()

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self.resume_points.cancel_timer()
        subscription, self.topic_subscription = self.topic_subscription, None
        if subscription is not None:
            subscription.cancel()
        if self._broadcast is not None:
            self._broadcast.remove(self)

    # -- broadcasts (:mod:`~ssegate.bindings.sse_kafka.broadcast`) -----------------------------

    @property
    def live_everywhere(self) -> bool:
        """Not cancelled, and live on every partition of its topic."""
        return not self._cancelled and self.live.everywhere

    @property
    def joinable(self) -> bool:
        """Alone, subscribed, and live on every partition of its topic."""
        return not self._broadcast and self.topic_subscription is not None and self.live_everywhere

    def live_token(self) -> str:
        """The progress token, its live partitions moved up to the topic's live end."""
        self.live.follow(self.progress)
        return self.progress.token()

    def join(self, broadcast: BroadcastSeat) -> None:
        """From now on ``broadcast`` writes this subscriber's stream: its own subscription
        ends."""
        self._broadcast = broadcast
        self.resume_points.clear()
        subscription, self.topic_subscription = self.topic_subscription, None
        if subscription is not None:
            subscription.cancel()

    # -- inside --------------------------------------------------------------------------------

    def _gone(self) -> bool:
        if self._cancelled:
            return True
        if self.sink.closed:
            self._dropped()
            return True
        return False

    def _dropped(self) -> None:
        """The stream closed under a delivery: the client resumes from its last id."""
        writer = self if self._broadcast is None else self._broadcast
        report_dropped(self.shares, self.topic, writer.progress.token())
        self.cancel()

    def send_id_only(self) -> None:
        """Write ``id:<progress>`` alone: the client's resume point moves, no event fires."""
        self.shares.stats.id_only += 1
        self.resume_points.write(self.live_token())


def report_reset(
    shares: Shares, topic: str, partition: int, earliest: int, asked: str, value: int
) -> None:
    """Log and count that ``partition`` starts at ``earliest``, not where the client asked
    (``asked`` is ``requested``, an offset, or ``since``, a time in ms: ``value``)."""
    log.warning(
        "sse_kafka.offset_reset",
        binding=shares.binding,
        topic=topic,
        partition=partition,
        earliest=earliest,
        **{asked: value},
    )
    shares.metrics.inc("ssegate.sse_kafka.resets", shares.binding)
    shares.stats.resets += 1


def report_dropped(shares: Shares, topic: str, progress: str) -> None:
    """Log and count a subscriber whose stream closed under a delivery at ``progress``."""
    shares.stats.dropped += 1
    shares.metrics.inc("ssegate.sse_kafka.dropped_subscribers", shares.binding)
    log.warning(
        "sse_kafka.subscriber_dropped", binding=shares.binding, topic=topic, progress=progress
    )
