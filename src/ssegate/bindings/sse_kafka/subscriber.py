"""One downstream SSE stream fed by one Kafka topic subscription.

:class:`TopicSubscriber` is the :class:`~ssegate.kafka.topics.TopicListener` the proxy hands to
the Kafka cache and the :class:`~ssegate.bindings.sse.source.Subscription` it hands back to the
sse server. Per message it moves its progress, asks its filter, and writes the SSE block
``id:<progress>`` + the message's shared block. Rules:

- Messages arrive per partition in offset order and are written as they arrive: no partition
  waits for another.
- A batch is written with one ``write_encoded`` call. The ``event:``/``data:`` part of a
  message is encoded once per process (:class:`EncodedMessages`) and shared by every
  subscriber. The ``id:`` lines depend on the subscriber's progress, filter and id format, so
  subscribers that meet a batch with all of those equal (every live subscriber of a route that
  started together) get the same bytes: :class:`SharedBatches` works a batch out once per
  such group and the rest write the joined bytes and adopt the resulting progress.
- ``data:`` is the topic's value view applied to the value (the cache client's ``value`` model,
  e.g. an Avro record as JSON text), or the value as UTF-8 text for a topic without one. The
  view runs inside that shared encoding: once per message per process, never per subscriber.
  A view that fails on a value its model accepted is logged and counted
  (``ssegate.sse_kafka.view_failures``) and the event carries the UTF-8 text instead.
- A tombstone is ``event:delete`` with ``data:`` = base64url(key) (``data:`` for a null key).
- Messages the filter drops (and offsets the cache passed over) move the progress without an
  event. Once :data:`ID_ONLY_AFTER_SKIPPED` of them pile up, or :data:`ID_ONLY_AFTER_SECONDS`
  after the last id written, an id-only block ``id:<progress>`` goes out, so a reconnect does
  not scan the gap again.
- A requested offset below the log start (retention) starts the partition at the earliest
  offset and says so: ``event:reset`` with ``data:{"partition":P,"requested":R,"earliest":E}``
  and the new id, before the messages that follow.
- Nothing is queued here. Bytes go straight to the sink, whose stream closes a client that
  falls more than ``max-buffered`` behind; the client reconnects with its last id and resumes.
  A subscriber that finds its sink closed cancels its topic subscription.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ssegate.bindings.sse.source import SseSink
from ssegate.bindings.sse_kafka.event_id import (
    EventIdFormat,
    ProgressEncoder,
    ProgressSnapshot,
    encode_key,
    etag_text,
    format_event_id,
)
from ssegate.bindings.sse_kafka.filters import MessageFilter
from ssegate.kafka.topics import KafkaMessage, TopicSubscription
from ssegate.models.topics import ValueView
from ssegate.sse.encoder import encode_event
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

ID_ONLY_AFTER_SKIPPED = 1000
ID_ONLY_AFTER_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class EncodedMessage:
    """What every subscriber shares about one message."""

    block: bytes
    """``event:``/``data:`` lines and the blank line; a subscriber writes its ``id:`` first."""
    key64: str | None
    etag: str | None


class EncodedMessages:
    """A small per-process cache of :class:`EncodedMessage`, by topic, partition and offset.

    The cache delivers one message object to every subscriber in turn, so a few thousand
    entries make every subscriber after the first a hit; the oldest entries are evicted first.
    An entry is reused only for the same message object seen through the same value view.
    """

    __slots__ = ("_entries", "binding", "capacity", "hits", "metrics", "misses")

    def __init__(
        self, capacity: int = 4096, *, binding: str = "", metrics: Metrics | None = None
    ) -> None:
        self.capacity = capacity
        self.binding = binding
        self.metrics = metrics
        self._entries: dict[
            tuple[str, int, int], tuple[KafkaMessage, ValueView | None, EncodedMessage]
        ] = {}
        self.hits = 0
        self.misses = 0

    def get(self, message: KafkaMessage, view: ValueView | None = None) -> EncodedMessage:
        where = (message.topic, message.partition, message.offset)
        entry = self._entries.get(where)
        if entry is not None and entry[0] is message and entry[1] == view:
            self.hits += 1
            return entry[2]
        self.misses += 1
        encoded = encode_message(message, view, binding=self.binding, metrics=self.metrics)
        entries = self._entries
        entries[where] = (message, view, encoded)
        if len(entries) > self.capacity:
            del entries[next(iter(entries))]
        return encoded


def encode_message(
    message: KafkaMessage,
    view: ValueView | None = None,
    *,
    binding: str = "",
    metrics: Metrics | None = None,
) -> EncodedMessage:
    """The shared part of ``message``'s SSE block; ``view`` turns its value into ``data:``."""
    key64 = encode_key(message.key)
    if message.value is None:
        block = encode_event(key64 or "", event="delete")
    else:
        block = encode_event(value_text(message, message.value, view, binding, metrics))
    return EncodedMessage(block, key64, etag_text(message.header("etag")))


def value_text(
    message: KafkaMessage,
    value: bytes,
    view: ValueView | None,
    binding: str,
    metrics: Metrics | None,
) -> str:
    if view is not None:
        try:
            return view(value)
        except Exception as exc:  # a model bug must not stop the stream of every subscriber
            log.warning(
                "sse_kafka.view_failed",
                binding=binding,
                topic=message.topic,
                partition=message.partition,
                offset=message.offset,
                reason=f"{type(exc).__name__}: {exc}"[:200],
            )
            if metrics is not None:
                metrics.inc("ssegate.sse_kafka.view_failures", binding, topic=message.topic)
    return value.decode("utf-8", "replace")


class SubscriberShape:
    """What, besides its progress, decides the bytes a subscriber writes for a batch."""

    __slots__ = ("_hash", "filter", "id_format", "view")

    def __init__(
        self, message_filter: MessageFilter | None, id_format: EventIdFormat, view: ValueView | None
    ) -> None:
        self.filter = message_filter
        self.id_format = id_format
        self.view = view
        self._hash = hash((message_filter, id_format, view))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SubscriberShape)
            and self.filter == other.filter
            and self.id_format is other.id_format
            and self.view == other.view
        )


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What one batch does to a subscriber of a given shape starting from a given progress."""

    data: bytes | None
    """The SSE blocks to write; ``None`` when the filter dropped every message."""
    progress: ProgressSnapshot
    skipped: int
    """Messages dropped after the last one written (every message when ``data`` is None)."""


class SharedBatches:
    """Per process: the outcomes of the latest batches, by subscriber shape and progress.

    The cache hands one batch object to every subscriber of a partition in turn, so keeping
    the outcomes of the last few batch objects makes every subscriber after the first in its
    group a dictionary hit. A batch is known by identity and held until evicted, so its
    ``id()`` cannot be reused meanwhile. Shapes are interned up to :attr:`max_shapes` so that
    equal shapes are usually the same object and compare by identity.
    """

    __slots__ = ("_batches", "_shapes", "max_batches", "max_shapes")

    def __init__(self, max_batches: int = 16, max_shapes: int = 4096) -> None:
        self.max_batches = max_batches
        self.max_shapes = max_shapes
        self._batches: dict[
            int, tuple[Sequence[KafkaMessage], dict[tuple[SubscriberShape, str], BatchOutcome]]
        ] = {}
        self._shapes: dict[SubscriberShape, SubscriberShape] = {}

    def shape(
        self, message_filter: MessageFilter | None, id_format: EventIdFormat, view: ValueView | None
    ) -> SubscriberShape:
        shape = SubscriberShape(message_filter, id_format, view)
        found = self._shapes.get(shape)
        if found is not None:
            return found
        if len(self._shapes) < self.max_shapes:
            self._shapes[shape] = shape
        return shape

    def outcomes(
        self, messages: Sequence[KafkaMessage]
    ) -> dict[tuple[SubscriberShape, str], BatchOutcome]:
        """The outcomes recorded so far for ``messages`` (a dict to read and fill)."""
        batches = self._batches
        entry = batches.get(id(messages))
        if entry is None or entry[0] is not messages:
            entry = batches[id(messages)] = (messages, {})
            if len(batches) > self.max_batches:
                del batches[next(iter(batches))]
        return entry[1]


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
        "_id_timer",
        "_last_id_at",
        "_skipped",
        "binding",
        "encoded",
        "filter",
        "id_format",
        "metrics",
        "progress",
        "shape",
        "shared",
        "sink",
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
        self.shape = self.shared.shape(message_filter, id_format, view)
        self.topic_subscription: TopicSubscription | None = None
        self._cancelled = False
        self._clock = clock
        self._skipped = 0
        self._last_id_at = clock()
        self._id_timer: asyncio.TimerHandle | None = None

    # -- TopicListener -----------------------------------------------------------------------

    def on_partitions(self, partitions: Sequence[int]) -> None:
        if self._gone():
            return
        self.sink.open()

    def on_messages(self, messages: Sequence[KafkaMessage]) -> None:
        if self._gone():
            return
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
            self._cancel_id_timer()
            self.sink.write_encoded(outcome.data)
            if self.sink.closed:  # too far behind: the sse server closed it just now
                self._dropped()
                return
        if self._skipped:
            self._passed_over()

    def _work_out(self, messages: Sequence[KafkaMessage]) -> BatchOutcome:
        """Move the progress through ``messages`` and encode what this shape writes."""
        progress = self.progress
        accepts = self.filter.matches if self.filter is not None else None
        get = self.encoded.get
        view = self.view
        id_format = self.id_format
        out: list[bytes] = []
        skipped = 0
        for message in messages:
            progress.advance(message.partition, message.offset + 1)
            if accepts is not None and not accepts(message):
                skipped += 1
                continue
            skipped = 0
            shared = get(message, view)
            event_id = format_event_id(progress.token(), shared.etag, id_format, shared.key64)
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
        if self._gone():
            return
        self.progress.advance(partition, earliest)
        log.warning(
            "sse_kafka.offset_reset",
            binding=self.binding,
            topic=self.topic,
            partition=partition,
            requested=requested,
            earliest=earliest,
        )
        self.metrics.inc("ssegate.sse_kafka.resets", self.binding)
        self.stats.resets += 1
        data = json.dumps(
            {"partition": partition, "requested": requested, "earliest": earliest},
            separators=(",", ":"),
        )
        self._write_id(data, event="reset")

    def on_status(self, available: bool, reason: str = "") -> None:
        # The cache logs the broker's state once per topic; the stream stays open and resumes
        # when the broker is back, so a client needs nothing but the keep-alives.
        return

    # -- Subscription --------------------------------------------------------------------------

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self._cancel_id_timer()
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
            progress=self.progress.token(),
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
        event_id = format_event_id(self.progress.token(), None, self.id_format, None)
        self.sink.event(data, event=event, id=event_id)

    def _cancel_id_timer(self) -> None:
        timer, self._id_timer = self._id_timer, None
        if timer is not None:
            timer.cancel()
