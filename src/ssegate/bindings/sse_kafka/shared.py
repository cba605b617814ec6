"""What the subscribers of an sse-kafka proxy share, so that per-subscriber work stays small.

- :class:`EncodedMessages`: the ``event:``/``data:`` block of each message, encoded once per
  process through the topic's value view, by topic, partition and offset; and, for streams
  whose sse server checks events (``requests[].content``, an
  :class:`~ssegate.bindings.sse.source.EventCheck`), the verdict of each check on it, worked
  out and reported once per message (while it is cached), not once per stream. A message
  that fails its check is shared as an empty block, so the stream gets its ``id:`` alone (the
  cursor moves, no event fires). A tombstone carries the key, not a value: it is not checked.
- :class:`Shapes`: what, besides its progress, decides the bytes a subscriber writes
  (:class:`SubscriberShape`: filter, id format, view, timestamps, check), interned per proxy.
  Streams of one shape that are live on the same topic are written as one broadcast
  (:mod:`~.broadcast`): a batch is worked out once per broadcast, and once per stream alone.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ssegate.bindings.sse.source import EventCheck
from ssegate.bindings.sse_kafka.event_id import (
    EventIdFormat,
    encode_key,
    etag_text,
)
from ssegate.bindings.sse_kafka.filters import MessageFilter
from ssegate.kafka.topics import KafkaMessage
from ssegate.models.topics import ValueView
from ssegate.sse_codec.encoder import encode_event
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics


@dataclass(frozen=True, slots=True)
class EncodedMessage:
    """What every subscriber shares about one message."""

    block: bytes
    """``event:``/``data:`` lines and the blank line; a subscriber writes its ``id:`` first."""
    key64: str | None
    etag: str | None


REFUSED_BLOCK = b"\n"
"""The shared block of a message that failed its check: after ``id:``, the blank line alone."""


@dataclass(slots=True, eq=False)
class _Entry:
    """One cached message: its shared encoding and, per check asked, what that check made of it."""

    message: KafkaMessage
    view: ValueView | None
    encoded: EncodedMessage
    verdicts: dict[EventCheck, EncodedMessage] | None = None


class EncodedMessages:
    """A small per-process cache of :class:`EncodedMessage`, by topic, partition and offset.

    The cache delivers one message object to every subscriber in turn, so a few thousand
    entries make every subscriber after the first a hit; the oldest entries are evicted first
    (an ``OrderedDict``: a plain dict's oldest key is found by skipping the slots its earlier
    evictions left, which made a replay longer than the cache pay a scan per message).
    An entry is reused only for the same message object seen through the same value view.
    With a ``check``, :meth:`get` answers the message as that check lets it through: itself,
    or (having reported the failure once) its ids with :data:`REFUSED_BLOCK`.
    """

    __slots__ = ("_entries", "binding", "capacity", "hits", "metrics", "misses")

    def __init__(
        self, capacity: int = 4096, *, binding: str = "", metrics: Metrics | None = None
    ) -> None:
        self.capacity = capacity
        self.binding = binding
        self.metrics = metrics
        self._entries: OrderedDict[tuple[str, int, int], _Entry] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(
        self,
        message: KafkaMessage,
        view: ValueView | None = None,
        check: EventCheck | None = None,
    ) -> EncodedMessage:
        where = (message.topic, message.partition, message.offset)
        entry = self._entries.get(where)
        if entry is not None and entry.message is message and entry.view == view:
            self.hits += 1
            if check is None:
                return entry.encoded
            return self._checked(entry, check, None)
        self.misses += 1
        value = message.value
        text = (
            None if value is None else value_text(message, value, view, self.binding, self.metrics)
        )
        entry = _Entry(message, view, _encode(message, text))
        entries = self._entries
        entries[where] = entry
        if len(entries) > self.capacity:
            entries.popitem(last=False)
        return entry.encoded if check is None else self._checked(entry, check, text)

    def _checked(self, entry: _Entry, check: EventCheck, text: str | None) -> EncodedMessage:
        """``entry`` as ``check`` lets it through (``text``: its value's text, if at hand)."""
        message = entry.message
        if message.value is None:
            return entry.encoded
        verdicts = entry.verdicts
        if verdicts is None:
            verdicts = entry.verdicts = {}
        verdict = verdicts.get(check)
        if verdict is None:
            if text is None:
                text = value_text(message, message.value, entry.view, self.binding, self.metrics)
            verdict = verdicts[check] = self._judge(message, entry.encoded, text, check)
        return verdict

    @staticmethod
    def _judge(
        message: KafkaMessage, encoded: EncodedMessage, text: str, check: EventCheck
    ) -> EncodedMessage:
        """``encoded`` when ``text`` passes ``check``; else report it and answer the ids
        with :data:`REFUSED_BLOCK`."""
        reason = check(text)
        if reason is None:
            return encoded
        check.refused(
            reason, topic=message.topic, partition=message.partition, offset=message.offset
        )
        return EncodedMessage(REFUSED_BLOCK, encoded.key64, encoded.etag)


def encode_message(
    message: KafkaMessage,
    view: ValueView | None = None,
    *,
    binding: str = "",
    metrics: Metrics | None = None,
) -> EncodedMessage:
    """The shared part of ``message``'s SSE block; ``view`` turns its value into ``data:``."""
    value = message.value
    return _encode(
        message, None if value is None else value_text(message, value, view, binding, metrics)
    )


def _encode(message: KafkaMessage, text: str | None) -> EncodedMessage:
    """``message``'s shared block with ``text`` (its value's text; ``None``: a tombstone)."""
    key64 = encode_key(message.key)
    block = encode_event(key64 or "", event="delete") if text is None else encode_event(text)
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


@dataclass(frozen=True, slots=True)
class SubscriberShape:
    """What, besides its progress, decides the bytes a subscriber writes for a batch."""

    filter: MessageFilter | None
    id_format: EventIdFormat
    view: ValueView | None
    timestamps: bool = False
    """The client asked for ``ext=timestamp``: each event starts with ``timestamp:``."""
    check: EventCheck | None = None
    """The check the stream's events must pass (its sse server's ``requests[].content``)."""


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What one batch does to a subscriber of a given shape (:func:`~.batch_outcome.work_out`)."""

    data: bytes | None
    """The SSE blocks to write; ``None`` when the filter dropped every message."""
    token: str
    """The progress token after the batch."""
    skipped: int
    """Messages dropped after the last one written (every message when ``data`` is None)."""


class Shapes:
    """The shapes of one proxy's subscribers, interned up to :attr:`max_shapes`, so that equal
    shapes are usually one object and a broadcast's key compares by identity."""

    __slots__ = ("_shapes", "max_shapes")

    def __init__(self, max_shapes: int = 4096) -> None:
        self.max_shapes = max_shapes
        self._shapes: dict[SubscriberShape, SubscriberShape] = {}

    def intern(self, shape: SubscriberShape) -> SubscriberShape:
        """The proxy's object equal to ``shape`` (``shape`` itself when it is the first)."""
        found = self._shapes.get(shape)
        if found is not None:
            return found
        if len(self._shapes) < self.max_shapes:
            self._shapes[shape] = shape
        return shape
