"""The contract between the ``sse-kafka`` proxy and the ``kafka`` cache that feeds it.

The ``kafka`` ``cache_client`` binding (what an ``sse-kafka`` route exits to) implements
:class:`TopicSource`. A subscriber asks for a topic with a start position per partition; the
cache delivers, per partition and in offset order, first what it holds from that position (or
what it fetches for it), then live messages, through the subscriber's :class:`TopicListener`.
One fetch per topic partition per process is shared by every subscriber.

A listener with filters declares its :class:`Interest`, so that the cache offers it, once it
is live, only the messages it may want; its progress over the others is the topic's
:class:`LivePositions`, which it reads when it writes an id instead of being told of every
message it passes over.

Everything here is called on the event loop thread; listeners must not block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

DefaultOffset = Literal["historical", "live"]

RECORD_ID_HEADER = "ssegate-id"
"""The header by which a record written twice is known: its value depends on what the record
was made from alone, so a repeat carries the same one (the pipeline writes it on every record;
the cache skips a repeat, :mod:`ssegate.bindings.kafka.repeats`)."""


@dataclass(frozen=True, slots=True)
class KafkaMessage:
    """One record of a topic partition, as the broker stored it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    """``None`` is a tombstone."""
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp_ms: int = 0

    def header(self, name: str) -> bytes | None:
        """The last value of header ``name``, or ``None``."""
        found = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found


@dataclass(frozen=True, slots=True)
class Interest:
    """The messages a listener may want: those whose key is one of :attr:`keys`, or that carry
    one of the header ``(name, value)`` pairs of :attr:`headers`. It may be wider than what the
    listener finally accepts (it applies its own filter to what it is offered), never narrower.
    """

    keys: frozenset[bytes] = frozenset()
    headers: frozenset[tuple[str, bytes]] = frozenset()

    def may_want(self, message: KafkaMessage) -> bool:
        if message.key is not None and message.key in self.keys:
            return True
        return any(header in self.headers for header in message.headers)


class LivePositions:
    """A topic's live end: partition → the next offset its shared fetch hands over.

    One object per topic, shared with every live listener. When a listener is live on a
    partition it has been given, by the time it runs again, every message it wants below that
    partition's position, so its resume point there is the position itself.
    """

    __slots__ = ("offsets",)

    def __init__(self) -> None:
        self.offsets: dict[int, int] = {}


class TopicListener(Protocol):
    @property
    def interest(self) -> Interest | None:
        """What to offer this listener once it is live; ``None``: every message."""

    def on_partitions(self, partitions: Sequence[int]) -> None:
        """The topic's partitions as known now (first, and again when partitions are added)."""

    def on_messages(self, messages: Sequence[KafkaMessage]) -> None:
        """Messages of one partition in offset order, each delivered once per subscription."""

    def on_live(self, partition: int, positions: LivePositions) -> None:
        """From now on ``partition`` is delivered live: messages outside the listener's
        interest are passed over without a call, and ``positions.offsets[partition]`` is how
        far it has been served there whenever it is not inside a delivery of that partition."""

    def on_skipped(self, partition: int, next_offset: int) -> None:
        """Offsets up to ``next_offset`` on ``partition`` were passed over (invalid messages,
        compaction gaps): progress may move there without an event."""

    def on_reset(self, partition: int, requested: int, earliest: int) -> None:
        """``requested`` is below the partition's log start (retention): delivery starts at
        ``earliest`` instead. Tells the subscriber, which tells the client."""

    def on_status(self, available: bool, reason: str = "") -> None:
        """The broker went away (``False``) or came back (``True``); the subscription stays."""


class TopicSubscription(Protocol):
    def cancel(self) -> None: ...

    def carry(self, streams: int) -> None:
        """The listener writes each batch to ``streams`` downstream streams (1 unless told: a
        broadcast writes its members'): the source counts each as a subscriber."""


class TopicSource(Protocol):
    def subscribe(
        self,
        topic: str,
        start: Mapping[int, int],
        listener: TopicListener,
        *,
        default: DefaultOffset | None = None,
    ) -> TopicSubscription:
        """Deliver ``topic`` to ``listener``: partition ``p`` from offset ``start[p]`` (the next
        offset to deliver), partitions not in ``start`` from ``default`` (``historical``: the
        oldest the cache holds, on a compacted topic the latest value per key; ``live``: only
        messages produced from now on; ``None``: the topic's configured ``defaultOffset``).
        Raises ``UnknownTopic`` for a topic that does not exist (the proxy answers 404)."""

    def holds(self, topic: str, start: Mapping[int, int]) -> bool:
        """The cache holds ``topic`` from ``start`` on (partition → next offset) in every
        partition ``start`` names: a subscription from there replays from the cache, where
        one from further back catches up from the broker."""


class UnknownTopic(LookupError):
    """The broker does not know this topic."""
