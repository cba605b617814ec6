"""Who a topic feed serves and how far each has got, and how their listeners are called.

A :class:`Subscription` is one ``subscribe`` call on a :class:`~.topic_feed.TopicFeed`; per
partition it has a :class:`PartitionCursor`, the next offset it is owed, whose :class:`Stage`
says how that offset is served. A :class:`PartitionFeed` is one partition's cache and the sets
of cursors served from it. Both the feed and its catch-up (:mod:`~.feed_catch_up`) move
cursors, so these live below both of them.

Listeners are called only through :meth:`Subscription.call`: a listener that raises loses its
subscription, and delivery to the others goes on. A cursor offered messages
(:meth:`PartitionCursor.offer`) is given those at or after its offset that its subscription's
:class:`~ssegate.kafka.topics.Interest` may want, so catch-up and ahead deliveries are narrowed
to the interest as live and replayed ones are.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from ssegate.bindings.kafka.fetch_events import Fetched
from ssegate.bindings.kafka.interest_index import InterestIndex
from ssegate.bindings.kafka.partition_cache import PartitionCache
from ssegate.kafka.topics import DefaultOffset, Interest, KafkaMessage, TopicListener
from ssegate.telemetry import log


class Stage(Enum):
    WAITING = "waiting"
    REPLAY = "replay"
    LIVE = "live"
    CATCH_UP = "catch-up"
    AHEAD = "ahead"


@dataclass(slots=True)
class FeedHooks:
    """What a feed needs from the cache server around it."""

    schedule: Callable[[Callable[[], None]], None]
    catch_up: Callable[[str, int, int, int], None]
    end_catch_up: Callable[[str, int], None]
    now: Callable[[], float]
    on_fetched: Callable[[str, Fetched, int, int], None]
    """``(topic, batch, evicted messages, cache bytes delta)``, for metrics."""
    subscribers_changed: Callable[[str, int], None]


class Feed(Protocol):
    """What a subscription needs of the feed that holds it (a :class:`~.topic_feed.TopicFeed`)."""

    topic: str
    hooks: FeedHooks

    def remove(self, subscription: Subscription) -> None: ...


@dataclass(slots=True, eq=False)
class PartitionCursor:
    """What one subscriber is owed of one partition."""

    subscription: Subscription
    partition: int
    cursor: int
    """The next offset owed, while waiting, replaying, catching up or ahead. Not moved once
    :attr:`Stage.LIVE`: the topic's :class:`~ssegate.kafka.topics.LivePositions` is the
    progress of every live cursor then."""
    reported: int
    """The progress the listener knows of (its start, or one past what it was given)."""
    fresh: bool
    """Started from scratch: a replay from the cache's start passes over tombstones."""
    stage: Stage = Stage.WAITING
    ticket: int = 0

    def offer(self, messages: list[KafkaMessage]) -> bool:
        """Deliver what of ``messages`` is at or after the cursor and the subscriber's interest
        may want; ``False`` when the subscription is gone."""
        owed: Sequence[KafkaMessage] = from_offset(messages, self.cursor)
        interest = self.subscription.interest
        if interest is not None:
            owed = [message for message in owed if interest.may_want(message)]
        if not owed:
            return not self.subscription.cancelled
        return self.deliver(owed)

    def deliver(self, messages: Sequence[KafkaMessage]) -> bool:
        if not self.subscription.call(self.subscription.listener.on_messages, messages):
            return False
        self.reported = messages[-1].offset + 1
        return True

    def skipped(self, next_offset: int) -> None:
        if self.reported < next_offset:
            self.reported = next_offset
            self.subscription.call(
                self.subscription.listener.on_skipped, self.partition, next_offset
            )


@dataclass(slots=True, eq=False)
class Subscription:
    """One ``subscribe`` call; :meth:`cancel` ends it."""

    feed: Feed
    listener: TopicListener
    start: Mapping[int, int]
    default: DefaultOffset
    interest: Interest | None
    cursors: dict[int, PartitionCursor] = field(default_factory=dict)
    cancelled: bool = False
    streams: int = 1
    """Downstream streams the listener delivers to, counted as the topic's subscribers."""

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.feed.remove(self)

    def carry(self, streams: int) -> None:
        """The listener delivers to ``streams`` streams now (a broadcast to them)."""
        if not self.cancelled and streams != self.streams:
            self.feed.hooks.subscribers_changed(self.feed.topic, streams - self.streams)
            self.streams = streams

    def call(self, method: Callable[..., None], *args: object) -> bool:
        """Call a method of the listener; a listener that raises loses its subscription."""
        if self.cancelled:
            return False
        try:
            method(*args)
        except Exception as exc:  # a listener bug must not stop delivery to the others
            log.error(
                "kafka.listener_failed",
                topic=self.feed.topic,
                call=method.__name__,
                error=repr(exc),
            )
            self.cancel()
            return False
        return True


class PartitionFeed:
    def __init__(self, cache: PartitionCache, live_from: int) -> None:
        self.cache = cache
        self.live_from = live_from
        """The partition's end when its fetch started: ``live`` starts there at the earliest."""
        self.live: dict[PartitionCursor, None] = {}
        """Live subscribers without an interest: every batch goes to each."""
        self.index: InterestIndex[PartitionCursor] = InterestIndex()
        """Live subscribers with an interest."""
        self.catching_up: dict[PartitionCursor, None] = {}
        self.ahead: dict[PartitionCursor, None] = {}
        self.tickets = 0
        self.counted_bytes = 0
        """The cache's size as last reported to the metrics (it also grows between batches,
        when a replay first asks its index for a header name)."""

    def recount(self) -> int:
        """How much the cache grew (or, negative, shrank) since it was last reported."""
        delta = self.cache.bytes - self.counted_bytes
        self.counted_bytes += delta
        return delta


def from_offset(messages: list[KafkaMessage], offset: int) -> list[KafkaMessage]:
    """The messages at or after ``offset`` (``messages`` itself when that is all of them)."""
    if not messages or messages[0].offset >= offset:
        return messages
    return messages[bisect.bisect_left(messages, offset, key=lambda m: m.offset) :]
