"""One downstream SSE stream fed by one Kafka topic subscription.

:class:`TopicSubscriber` is the :class:`~ssegate.kafka.topics.TopicListener` the proxy hands to
the Kafka cache and the :class:`~ssegate.bindings.sse.source.Subscription` it hands back to the
sse server. Per message it moves its progress, asks its filter, and writes the SSE block
``id:<progress>`` + the message's shared block. Rules:

- Messages arrive per partition in offset order and are written as they arrive: no partition
  waits for another.
- A batch is written with one ``write_encoded`` call. The ``event:``/``data:`` part of a
  message is encoded once per process (:class:`~.shared.EncodedMessages`) and shared by every
  subscriber. The ``id:`` lines depend on the subscriber's progress, filter and id format, so
  subscribers that meet a batch with all of those equal (every live subscriber of a route that
  started together) get the same bytes: :class:`~.shared.SharedBatches` works a batch out once
  per such group and the rest write the joined bytes and adopt the resulting progress.
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
- A client that asked for ``ext=timestamp`` gets ``timestamp:0x<hex>`` (the record's timestamp,
  milliseconds since the epoch) before each message's ``id:``; it is part of the subscriber's
  shape, so such clients share their bytes among themselves.
- A subscriber with filters declares their :class:`~ssegate.kafka.topics.Interest`: once live
  on a partition it is offered only the messages it may want, and is not called at all for a
  batch with none. Its progress on a live partition is the topic's shared
  :class:`~ssegate.kafka.topics.LivePositions`, read when an id is written (the feed moves it
  once per batch for every subscriber; nobody advances it per subscriber per message).
- The resume point of a quiet stream rides on its keep-alive (:meth:`TopicSubscriber.resume_id`,
  asked by the sse server each keep-alive interval): ``id:<progress>`` and a blank line instead
  of the ``:`` comment, when the progress moved since the last id written. One write per stream
  per interval at most, so a reconnect never rescans a filtered gap older than one interval.
- Before a partition is live (replay, catch-up), messages the filter drops and offsets the
  cache passed over move the progress without an event. Once :data:`ID_ONLY_AFTER_SKIPPED` of
  them pile up, or :data:`ID_ONLY_AFTER_SECONDS` after the last id written, an id-only block
  goes out, so a reconnect does not scan the gap again. Once a partition is live, messages the
  interest index offers that the filter still drops (the key matches, a header does not) move
  the progress the same way, and only the keep-alive carries it past them.
- A requested offset below the log start (retention) starts the partition at the earliest
  offset and says so: ``event:reset`` with ``data:{"partition":P,"requested":R,"earliest":E}``
  and the new id, before the messages that follow. A ``since`` time at or before the oldest
  record retention left is said the same way, ``since`` (ms) in place of ``requested``.
- Nothing is queued here. Bytes go straight to the sink, whose stream closes a client that
  falls more than ``max-buffered`` behind; the client reconnects with its last id and resumes.
  A subscriber that finds its sink closed cancels its topic subscription.
- A subscriber live on every partition of its topic joins the :class:`~.cohort.Cohort` of its
  shape (when its proxy keeps cohorts): its own topic subscription ends, and the cohort's
  leader, a subscriber writing into a :class:`~ssegate.bindings.sse.fanout.SinkGroup`, writes
  each batch once for every member. A member only answers :meth:`TopicSubscriber.resume_id`
  (from the cohort's progress) and leaves the cohort when cancelled.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ssegate.bindings.sse.source import SseSink
from ssegate.bindings.sse_kafka.event_id import EventIdFormat, ProgressEncoder, format_event_id
from ssegate.bindings.sse_kafka.filters import MessageFilter
from ssegate.bindings.sse_kafka.shared import BatchOutcome, EncodedMessages, SharedBatches
from ssegate.bindings.sse_kafka.traced_write import write_traced
from ssegate.kafka.topics import (
    Interest,
    KafkaMessage,
    LivePositions,
    TopicSource,
    TopicSubscription,
)
from ssegate.models.topics import ValueView
from ssegate.sse_codec.encoder import timestamp_line
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.traces import DELIVERY


class CohortSeat(Protocol):
    """What a member asks of the cohort that writes its stream (:class:`~.cohort.Cohort`)."""

    leader: TopicSubscriber

    def resume_id(self, member: TopicSubscriber) -> str | None: ...

    def remove(self, member: TopicSubscriber) -> None: ...

    def pace(self, member: TopicSubscriber, stalled: bool) -> None: ...


class CohortOffers(Protocol):
    """Where a subscriber live on every partition offers itself to a cohort
    (:class:`~.cohort.Cohorts`)."""

    def offer(self, subscriber: TopicSubscriber) -> None: ...


ID_ONLY_AFTER_SKIPPED = 1000
ID_ONLY_AFTER_SECONDS = 1.0


@dataclass(slots=True)
class SubscriberStats:
    """What a proxy counts over its subscribers (read by tests and telemetry)."""

    dropped: int = 0
    """Subscribers whose stream closed under them (slow client or gone)."""
    id_only: int = 0
    resets: int = 0


class TopicSubscriber:
    """Feeds one sink from one topic subscription (a TopicListener and a Subscription)."""

    __slots__ = (
        "_cancelled",
        "_clock",
        "_cohort",
        "_id_timer",
        "_last_id_at",
        "_last_token",
        "_live",
        "_live_partitions",
        "_partitions",
        "_skipped",
        "binding",
        "check",
        "cohorts",
        "encoded",
        "filter",
        "id_format",
        "interest",
        "metrics",
        "progress",
        "shape",
        "shared",
        "sink",
        "source",
        "stats",
        "topic",
        "topic_subscription",
        "view",
    )

    def __init__(
        self,
        sink: SseSink,
        *,
        topic: str,
        progress: ProgressEncoder,
        message_filter: MessageFilter | None,
        id_format: EventIdFormat,
        encoded: EncodedMessages,
        binding: str,
        metrics: Metrics,
        stats: SubscriberStats,
        view: ValueView | None = None,
        shared: SharedBatches | None = None,
        clock: Callable[[], float] = time.monotonic,
        cohorts: CohortOffers | None = None,
        source: TopicSource | None = None,
    ) -> None:
        self.sink = sink
        self.topic = topic
        self.progress = progress
        self.filter = message_filter
        self.id_format = id_format
        self.encoded = encoded
        self.binding = binding
        self.metrics = metrics
        self.stats = stats
        self.view = view
        self.shared = shared if shared is not None else SharedBatches()
        self.check = sink.check
        self.shape = self.shared.shape(message_filter, id_format, view, sink.timestamps, self.check)
        self.interest: Interest | None = (
            message_filter.interest() if message_filter is not None else None
        )
        self.topic_subscription: TopicSubscription | None = None
        self._live: LivePositions | None = None
        self._live_partitions: tuple[int, ...] = ()
        self._last_token = ""
        self._cancelled = False
        self._clock = clock
        self._skipped = 0
        self._last_id_at = clock()
        self._id_timer: asyncio.TimerHandle | None = None
        self.cohorts = cohorts if source is not None else None
        """Where this subscriber joins a cohort once live (with ``source``, which a cohort's
        leader subscribes to); ``None``: it stays alone."""
        self.source = source
        self._partitions = 0
        self._cohort: CohortSeat | None = None
        """The cohort this subscriber is (or was, once cancelled) a member of."""

    # -- TopicListener -----------------------------------------------------------------------

    def on_partitions(self, partitions: Sequence[int]) -> None:
        if self._gone():
            return
        self._partitions = len(partitions)
        self.sink.open()

    def on_live(self, partition: int, positions: LivePositions) -> None:
        self._live = positions
        if partition not in self._live_partitions:
            self._live_partitions = (*self._live_partitions, partition)
        if self.cohorts is not None and self._cohort is None and self.live_everywhere:
            self.cohorts.offer(self)

    def on_messages(self, messages: Sequence[KafkaMessage]) -> None:
        if self._gone():
            return
        if self._live_partitions:
            self._follow_live()
        progress = self.progress
        outcomes = self.shared.outcomes(messages)
        key = (self.shape, progress.token())
        outcome = outcomes.get(key)
        if outcome is None:
            outcome = outcomes[key] = self._work_out(messages)
        else:
            progress.adopt(outcome.progress)
        if outcome.data is None:
            self._skipped += outcome.skipped
        else:
            self._skipped = outcome.skipped
            self._last_id_at = self._clock()
            self._last_token = outcome.progress.token
            self._cancel_id_timer()
            if DELIVERY.current is None:
                self.sink.write_encoded(outcome.data)
            else:  # a batch with traced records fans out
                write_traced(DELIVERY.current, self.sink, outcome.data, messages,
                             self.filter.matches if self.filter is not None else None)  # fmt: skip
            if self.sink.closed:  # too far behind: the sse server closed it just now
                self._dropped()
                return
        if self._skipped and not self._all_live(messages):
            self._passed_over()  # a live partition's gap rides on the keep-alive (module doc)

    def _all_live(self, messages: Sequence[KafkaMessage]) -> bool:
        live = self._live_partitions
        return bool(live) and all(message.partition in live for message in messages)

    def _work_out(self, messages: Sequence[KafkaMessage]) -> BatchOutcome:
        """Move the progress through ``messages`` and encode what this shape writes."""
        progress = self.progress
        accepts = self.filter.matches if self.filter is not None else None
        get = self.encoded.get
        view = self.view
        check = self.check
        id_format = self.id_format
        timestamps = self.shape.timestamps
        out: list[bytes] = []
        skipped = 0
        for message in messages:
            progress.advance(message.partition, message.offset + 1)
            if accepts is not None and not accepts(message):
                skipped += 1
                continue
            skipped = 0
            shared = get(message, view, check)
            event_id = format_event_id(progress.token(), shared.etag, id_format, shared.key64)
            if timestamps:
                out.append(timestamp_line(message.timestamp_ms))
            out.append(b"id:" + event_id.encode() + b"\n" + shared.block)
        data = (b"".join(out) if len(out) > 1 else out[0]) if out else None
        return BatchOutcome(data, progress.snapshot(), skipped)

    def on_skipped(self, partition: int, next_offset: int) -> None:
        if self._gone():
            return
        if self.progress.advance(partition, next_offset):
            self._skipped += 1
            self._passed_over()

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
        log.warning(
            "sse_kafka.offset_reset",
            binding=self.binding,
            topic=self.topic,
            partition=partition,
            earliest=earliest,
            **{asked: value},
        )
        self.metrics.inc("ssegate.sse_kafka.resets", self.binding)
        self.stats.resets += 1
        data = json.dumps(
            {"partition": partition, asked: value, "earliest": earliest}, separators=(",", ":")
        )
        self._write_id(data, event="reset")

    def on_status(self, available: bool, reason: str = "") -> None:
        # The cache logs the broker's state once per topic; the stream stays open and resumes
        # when the broker is back, so a client needs nothing but the keep-alives.
        return

    # -- Subscription --------------------------------------------------------------------------

    def resume_id(self) -> str | None:
        """The id to carry on a keep-alive: the progress, when it moved past the last id
        written (the stream passed over messages its filter does not want); else ``None``."""
        if self._cancelled:
            return None
        if self._cohort is not None:
            return self._cohort.resume_id(self)
        if self._live_partitions:
            self._follow_live()
        token = self.progress.token()
        if token == self._last_token or not self.progress.offsets:
            return None
        self._last_token = token
        self._skipped = 0
        self._last_id_at = self._clock()
        self._cancel_id_timer()
        return format_event_id(token, None, self.id_format, None)

    def pace(self, stalled: bool) -> None:
        """The stream's client stopped reading (or reads again): it is not counted among the
        streams the topic's batches are spaced for (:meth:`TopicSubscription.carry`)."""
        if self._cancelled:
            return
        if self._cohort is not None:
            self._cohort.pace(self, stalled)
        elif self.topic_subscription is not None:
            self.topic_subscription.carry(0 if stalled else 1)

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self._cancel_id_timer()
        subscription, self.topic_subscription = self.topic_subscription, None
        if subscription is not None:
            subscription.cancel()
        if self._cohort is not None:
            self._cohort.remove(self)

    # -- cohorts (:mod:`~ssegate.bindings.sse_kafka.cohort`) -----------------------------------

    @property
    def live_everywhere(self) -> bool:
        """Not cancelled, and live on every partition of its topic."""
        return not self._cancelled and 0 < self._partitions <= len(self._live_partitions)

    @property
    def joinable(self) -> bool:
        """Alone, subscribed, and live on every partition of its topic."""
        return self._cohort is None and self.topic_subscription is not None and self.live_everywhere

    def live_token(self) -> str:
        """The progress token, its live partitions moved up to the topic's live end."""
        if self._live_partitions:
            self._follow_live()
        return self.progress.token()

    def lead(self, sink: SseSink) -> TopicSubscriber:
        """A subscriber like this one (same topic, shape and progress) writing into ``sink``:
        a cohort's leader, not yet subscribed."""
        leader = TopicSubscriber(
            sink,
            topic=self.topic,
            progress=ProgressEncoder(self.progress.offsets),
            message_filter=self.filter,
            id_format=self.id_format,
            encoded=self.encoded,
            binding=self.binding,
            metrics=self.metrics,
            stats=self.stats,
            view=self.view,
            shared=self.shared,
            clock=self._clock,
        )
        leader._last_token = self._last_token
        return leader

    def join(self, cohort: CohortSeat) -> None:
        """From now on ``cohort`` writes this subscriber's stream: its own subscription ends."""
        self._cohort = cohort
        self._cancel_id_timer()
        self._skipped = 0
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
        self.stats.dropped += 1
        self.metrics.inc("ssegate.sse_kafka.dropped_subscribers", self.binding)
        log.warning(
            "sse_kafka.subscriber_dropped",
            binding=self.binding,
            topic=self.topic,
            progress=(self if self._cohort is None else self._cohort.leader).progress.token(),
        )
        self.cancel()

    def _passed_over(self) -> None:
        """Progress moved without an id on the wire: send one now, or arm the timer for it."""
        due = self._last_id_at + ID_ONLY_AFTER_SECONDS
        if self._skipped >= ID_ONLY_AFTER_SKIPPED or self._clock() >= due:
            self.send_id_only()
            return
        if self._id_timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._id_timer = loop.call_later(max(0.0, due - self._clock()), self._id_timer_fired)

    def _id_timer_fired(self) -> None:
        self._id_timer = None
        if self._skipped and not self._gone():
            self.send_id_only()

    def send_id_only(self) -> None:
        """Write ``id:<progress>`` alone: the client's resume point moves, no event fires."""
        self.stats.id_only += 1
        self._write_id(None, event=None)

    def _write_id(self, data: str | None, *, event: str | None) -> None:
        self._skipped = 0
        self._last_id_at = self._clock()
        self._cancel_id_timer()
        if self._live_partitions:
            self._follow_live()
        token = self._last_token = self.progress.token()
        self.sink.event(data, event=event, id=format_event_id(token, None, self.id_format, None))

    def _follow_live(self) -> None:
        """Move the progress of live partitions up to the topic's live end (see module doc)."""
        live = self._live
        if live is None:
            return
        offsets = live.offsets
        progress = self.progress
        own = progress.offsets
        for partition in self._live_partitions:
            position = offsets.get(partition, 0)
            if position > own.get(partition, 0):
                progress.advance(partition, position)
                own = progress.offsets

    def _cancel_id_timer(self) -> None:
        timer, self._id_timer = self._id_timer, None
        if timer is not None:
            timer.cancel()
