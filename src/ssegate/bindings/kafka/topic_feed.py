"""One topic's subscribers and caches, on the event loop: who gets which fetched batch.

A :class:`TopicFeed` holds a :class:`~.partition_cache.PartitionCache` per partition and, per
subscriber and partition, a :class:`PartitionCursor`: the next offset that subscriber is owed.
Where that offset lies decides how it is served:

- equal to the cache's ``next_offset``: **live**. Every batch the shared fetch hands over is
  appended to the cache. A live subscriber without an interest gets the batch, as the same
  list as every other such subscriber; one with an :class:`~ssegate.kafka.topics.Interest`
  sits in the partition's :class:`~.interest_index.InterestIndex` and gets only the messages
  it may want, or no call at all. Live subscribers are not visited per batch otherwise: their
  progress over what they were not given is the topic's shared
  :class:`~ssegate.kafka.topics.LivePositions`, moved once per batch. A batch costs
  O(messages + deliveries), not O(subscribers).
- inside the cache: **replay**. The subscriber reads from the cache in chunks, one chunk per
  loop iteration (so a large history never stalls the loop), then joins the live set. A chunk
  is at most :data:`REPLAY_CHUNK` messages and :data:`REPLAY_CHUNK_BYTES` of keys and values.
  A subscriber whose client stops reading cancels its subscription and subscribes again from
  its progress once the client reads again (:meth:`~ssegate.bindings.sse.source.Subscription.pace`),
  so the history is not copied into a client that does not read: what it is written is the
  chunk its socket refused. A replay from scratch (the ``historical`` default) whose start the
  cache let go before its first chunk starts at the oldest the cache holds then, which is what
  it asked for, rather than catching up. Each chunk is deferrable work
  (:mod:`ssegate.host.turns`): a thousand clients that open a replay at once take turns with
  the live batches. A subscriber with an interest replays through the cache's index of keys and
  header values (:meth:`~.partition_cache.PartitionCache.read_wanted`), at the cost of what it
  receives; catch-up and ahead deliveries are narrowed to its interest too.
- below the cache's ``start_offset``: **catch-up**, from the broker, by the feed's
  :class:`~.feed_catch_up.FeedCatchUp`; once caught up, it replays from the cache, then goes
  live.
- beyond ``next_offset`` (a resume from the future): **ahead**, given what reaches its offset.

Batches come without the records the topic's models refuse and without repeats (a record
under the ``ssegate-id`` of one shortly before it, :mod:`~.repeats`): the fetch thread leaves
both out, so no stage here sees them, and their offsets are passed over like any gap.

Subscriptions, their cursors and each partition's sets of them are defined in
:mod:`~.feed_cursors`, which also calls the listeners; their names are importable from here.

Nothing here does I/O: the feed asks for catch-up reads through the callables it is given and
is driven by the fetch events the cache server passes on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ssegate.bindings.kafka.feed_catch_up import FeedCatchUp
from ssegate.bindings.kafka.feed_cursors import (
    FeedHooks,
    PartitionCursor,
    PartitionFeed,
    Stage,
    Subscription,
    from_offset,
)
from ssegate.bindings.kafka.fetch_events import Fetched
from ssegate.bindings.kafka.partition_cache import PartitionCache
from ssegate.host.turns import shared_turns
from ssegate.kafka.topics import DefaultOffset, LivePositions, TopicListener
from ssegate.telemetry import log

__all__ = [
    "REPLAY_CHUNK",
    "REPLAY_CHUNK_BYTES",
    "FeedHooks",
    "PartitionCursor",
    "PartitionFeed",
    "Stage",
    "Subscription",
    "TopicFeed",
]

REPLAY_CHUNK = 4096
REPLAY_CHUNK_BYTES = 16 * 1024
"""Keys and values one replay chunk holds at most: about what a client's socket takes before
a write to it is refused, so a client that reads nothing is written little past that."""


class TopicFeed:
    def __init__(self, topic: str, hooks: FeedHooks, *, max_bytes: int, max_age: float) -> None:
        self.topic = topic
        self.hooks = hooks
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.started = False
        self.compacted = False
        self.partitions: dict[int, PartitionFeed] = {}
        self.subscriptions: dict[Subscription, None] = {}
        self.positions = LivePositions()
        self.available = True
        self.status_reason = ""
        self.catch_up = FeedCatchUp(topic, hooks, self.partitions, self._route)

    # -- subscribers ---------------------------------------------------------------------------

    def subscribe(
        self, listener: TopicListener, start: Mapping[int, int], default: DefaultOffset
    ) -> Subscription:
        subscription = Subscription(self, listener, dict(start), default, listener.interest)
        self.subscriptions[subscription] = None
        if not self.available:
            listener.on_status(False, self.status_reason)
        if self.started:
            self._attach(subscription, sorted(self.partitions), first=True)
        return subscription

    def holds(self, start: Mapping[int, int]) -> bool:
        """Every partition of ``start`` is cached from its offset on (see
        :meth:`ssegate.kafka.topics.TopicSource.holds`)."""
        partitions = self.partitions
        return all(
            partition in partitions and offset >= partitions[partition].cache.start_offset
            for partition, offset in start.items()
        )

    def remove(self, subscription: Subscription) -> None:
        if self.subscriptions.pop(subscription, 0) is None:
            self.hooks.subscribers_changed(self.topic, -subscription.streams)
        for cursor in subscription.cursors.values():
            feed = self.partitions[cursor.partition]
            feed.live.pop(cursor, None)
            feed.index.discard(cursor)
            feed.ahead.pop(cursor, None)
            self.catch_up.drop(feed, cursor)
        subscription.cursors.clear()

    def _attach(self, subscription: Subscription, partitions: Sequence[int], first: bool) -> None:
        if not subscription.call(subscription.listener.on_partitions, sorted(self.partitions)):
            return
        for partition in partitions:
            cache = self.partitions[partition].cache
            requested = subscription.start.get(partition)
            if requested is not None:
                cursor = PartitionCursor(subscription, partition, requested, requested, False)
            elif subscription.default == "live" and first:
                offset = max(cache.next_offset, self.partitions[partition].live_from)
                cursor = PartitionCursor(subscription, partition, offset, -1, False)
            else:
                cursor = PartitionCursor(subscription, partition, cache.start_offset, -1, True)
            subscription.cursors[partition] = cursor
            self._route(cursor)

    def _route(self, cursor: PartitionCursor) -> None:
        """Put ``cursor`` where its offset says it belongs."""
        feed = self.partitions[cursor.partition]
        cache = feed.cache
        if cursor.cursor > cache.next_offset:
            cursor.stage = Stage.AHEAD
            feed.ahead[cursor] = None
        elif cursor.cursor == cache.next_offset:
            self._join_live(feed, cursor)
        elif cursor.cursor >= cache.start_offset:
            cursor.stage = Stage.REPLAY
            self.replay(cursor)
        else:
            self.catch_up.start(feed, cursor)

    def _join_live(self, feed: PartitionFeed, cursor: PartitionCursor) -> None:
        cursor.stage = Stage.LIVE
        interest = cursor.subscription.interest
        if interest is None:
            feed.live[cursor] = None
        else:
            feed.index.add(cursor, interest)
        if cursor.reported < cursor.cursor and cursor.cursor > 0:
            cursor.skipped(cursor.cursor)
        cursor.subscription.call(
            cursor.subscription.listener.on_live, cursor.partition, self.positions
        )

    def replay(self, cursor: PartitionCursor) -> None:
        """Read ``cursor``'s next chunk from the cache at the loop's next turn, within the
        turn's budget for deferrable work (:mod:`ssegate.host.turns`): a crowd that replays
        at once takes turns with the batches of the live streams, not whole turns from them."""
        turns = shared_turns()

        def step() -> None:
            turns.run(lambda: self._replay(cursor))

        self.hooks.schedule(step)

    def _replay(self, cursor: PartitionCursor) -> None:
        subscription = cursor.subscription
        if subscription.cancelled or cursor.stage is not Stage.REPLAY:
            return
        cache = self.partitions[cursor.partition].cache
        if cursor.fresh and cursor.reported < 0 and cursor.cursor < cache.start_offset:
            cursor.cursor = cache.start_offset  # "the oldest held" moved on before it began
        if cursor.cursor < cache.start_offset or cursor.cursor >= cache.next_offset:
            self._route(cursor)  # evicted meanwhile (catch up), or reached the end (go live)
            return
        interest = cursor.subscription.interest
        if interest is None:
            messages, after = cache.read_from(
                cursor.cursor,
                limit=REPLAY_CHUNK,
                max_bytes=REPLAY_CHUNK_BYTES,
                skip_tombstones=cursor.fresh,
            )
        else:  # through the cache's index: the cost of what this subscriber receives
            messages, after = cache.read_wanted(
                cursor.cursor,
                interest,
                limit=REPLAY_CHUNK,
                max_bytes=REPLAY_CHUNK_BYTES,
                skip_tombstones=cursor.fresh,
            )
        cursor.cursor = after
        if messages and not cursor.deliver(messages):
            return
        if cursor.subscription.cancelled:
            return
        if after >= cache.next_offset:
            self._route(cursor)
        else:
            self.replay(cursor)

    # -- fetch events --------------------------------------------------------------------------

    def on_started(
        self, starts: Mapping[int, int], ends: Mapping[int, int], compacted: bool
    ) -> None:
        self.started = True
        self.compacted = compacted
        self._add_partitions(starts, ends)
        for subscription in list(self.subscriptions):
            self._attach(subscription, sorted(starts), first=True)

    def on_partitions_added(self, starts: Mapping[int, int]) -> None:
        self._add_partitions(starts, starts)
        for subscription in list(self.subscriptions):
            self._attach(subscription, sorted(starts), first=False)

    def _add_partitions(self, starts: Mapping[int, int], ends: Mapping[int, int]) -> None:
        for partition, offset in starts.items():
            cache = PartitionCache(
                partition, offset, max_age=self.max_age, compacted=self.compacted
            )
            self.partitions[partition] = PartitionFeed(cache, ends.get(partition, offset))
            self.positions.offsets[partition] = offset
        share = max(1, self.max_bytes // max(1, len(self.partitions)))
        for feed in self.partitions.values():
            feed.cache.max_bytes = share

    def on_fetched(self, batch: Fetched) -> None:
        feed = self.partitions.get(batch.partition)
        if feed is None:
            return
        if batch.catch_up:
            self.catch_up.on_fetched(feed, batch)
            return
        cache = feed.cache
        # What was handed over already is not handed over again: a fetch that went back (its
        # consumer reset after an unclean leader election, say) repeats offsets.
        messages = from_offset(batch.messages, cache.next_offset)
        if len(messages) < len(batch.messages):
            log.warning("kafka.fetch_repeated", topic=self.topic, partition=batch.partition,
                        offset=batch.messages[0].offset, expected=cache.next_offset)  # fmt: skip
        evicted = cache.append(messages, self.hooks.now())
        cache.skip_to(batch.next_offset)
        # Moved before anyone runs: a live subscriber never reads a position behind what it
        # was given (inside this delivery its ids carry the message's own offsets).
        self.positions.offsets[batch.partition] = cache.next_offset
        self.hooks.on_fetched(self.topic, batch, evicted.messages, feed.recount())
        if messages:
            for cursor in list(feed.live):
                cursor.deliver(messages)
            if feed.index:
                for group in feed.index.route(messages):
                    offered = group.offered
                    for cursor in list(group.members):
                        cursor.deliver(offered)
        if feed.ahead:
            for cursor in list(feed.ahead):
                if cursor.cursor > batch.next_offset:
                    continue
                del feed.ahead[cursor]
                if not cursor.offer(messages):
                    continue
                cursor.cursor = batch.next_offset
                self._join_live(feed, cursor)

    def evict(self) -> tuple[int, int]:
        """Apply the age bound to idle partitions too: ``(messages, bytes)`` let go (the bytes
        net of what the caches grew by since last counted)."""
        now = self.hooks.now()
        messages = freed = 0
        for feed in self.partitions.values():
            messages += feed.cache.evict(now).messages
            freed -= feed.recount()
        return messages, freed

    def on_status(self, available: bool, reason: str) -> None:
        self.available = available
        self.status_reason = reason
        for subscription in list(self.subscriptions):
            subscription.call(subscription.listener.on_status, available, reason)
