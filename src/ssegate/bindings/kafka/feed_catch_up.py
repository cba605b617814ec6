"""A topic feed's cursors below what its caches hold, served from the broker's catch-up reader.

A :class:`~.feed_cursors.PartitionCursor` whose offset is below its partition cache's
``start_offset`` is **catching up**: the fetch thread's catch-up reader (:mod:`~.catch_up`) is
asked, through :attr:`~.feed_cursors.FeedHooks.catch_up`, to read the partition from that
offset, and reads it from the oldest offset owed. Each request takes a ticket; a cursor takes
of the catch-up events only those answering its request or a later one, and of a batch only
what is at or after its offset. An offset below the log start is reported with ``on_reset`` and
moved to the log start; the reader reaching the partition's end moves the cursor there, as
skipped. Once a cursor reaches what the cache holds it leaves catch-up and the feed routes it
again: it replays from the cache, then goes live. When the last cursor of a partition leaves,
the reader is told it is no longer needed (:attr:`~.feed_cursors.FeedHooks.end_catch_up`).

It extends :class:`~.topic_feed.TopicFeed`, which holds one as its ``catch_up`` and passes it
the catch-up batches; the cache server's dispatch (:mod:`~.feed_dispatch`) hands it the resets
and ends. Like the feed, it does no I/O and runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from ssegate.bindings.kafka.feed_cursors import FeedHooks, PartitionCursor, PartitionFeed, Stage
from ssegate.bindings.kafka.fetch_events import CatchUpAtEnd, CatchUpReset, Fetched


class FeedCatchUp:
    """The catching-up cursors of one topic's partitions (each :class:`PartitionFeed`'s
    ``catching_up``); ``route`` puts a cursor that has caught up where its offset belongs."""

    def __init__(
        self,
        topic: str,
        hooks: FeedHooks,
        partitions: Mapping[int, PartitionFeed],
        route: Callable[[PartitionCursor], None],
    ) -> None:
        self.topic = topic
        self.hooks = hooks
        self.partitions = partitions
        self.route = route

    def start(self, feed: PartitionFeed, cursor: PartitionCursor) -> None:
        """Catch ``cursor`` up from the broker, from its offset."""
        cursor.stage = Stage.CATCH_UP
        feed.tickets += 1
        cursor.ticket = feed.tickets
        feed.catching_up[cursor] = None
        self.hooks.catch_up(self.topic, cursor.partition, cursor.cursor, cursor.ticket)

    def drop(self, feed: PartitionFeed, cursor: PartitionCursor) -> None:
        """``cursor``'s subscription ended: it no longer waits for catch-up batches."""
        if feed.catching_up.pop(cursor, None) is not None and not feed.catching_up:
            self.hooks.end_catch_up(self.topic, cursor.partition)

    def on_fetched(self, feed: PartitionFeed, batch: Fetched) -> None:
        for cursor in list(feed.catching_up):
            if cursor.ticket > batch.ticket or batch.next_offset <= cursor.cursor:
                continue
            if not cursor.offer(batch.messages):
                continue
            cursor.cursor = batch.next_offset
            if cursor.reported < batch.next_offset:
                cursor.skipped(batch.next_offset)
            self._after_step(feed, cursor)

    def on_reset(self, event: CatchUpReset) -> None:
        for feed, cursor in self._answered(event.partition, event.ticket, event.earliest):
            requested = cursor.cursor
            cursor.cursor = event.earliest
            cursor.reported = event.earliest
            cursor.subscription.call(
                cursor.subscription.listener.on_reset, event.partition, requested, event.earliest
            )
            self._after_step(feed, cursor)

    def on_at_end(self, event: CatchUpAtEnd) -> None:
        for feed, cursor in self._answered(event.partition, event.ticket, event.offset):
            cursor.cursor = event.offset
            cursor.skipped(event.offset)
            self._after_step(feed, cursor)

    def _answered(
        self, partition: int, ticket: int, offset: int
    ) -> Iterator[tuple[PartitionFeed, PartitionCursor]]:
        """The catching-up cursors of ``partition`` that an answer to request ``ticket`` moves
        on to ``offset``: those that asked no later and are still behind it."""
        feed = self.partitions.get(partition)
        if feed is not None:
            for cursor in list(feed.catching_up):
                if cursor.ticket <= ticket and cursor.cursor < offset:
                    yield feed, cursor

    def _after_step(self, feed: PartitionFeed, cursor: PartitionCursor) -> None:
        if cursor.subscription.cancelled or cursor.cursor < feed.cache.start_offset:
            return
        del feed.catching_up[cursor]
        if not feed.catching_up:
            self.hooks.end_catch_up(self.topic, cursor.partition)
        self.route(cursor)
