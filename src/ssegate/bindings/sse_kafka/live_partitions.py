"""Where one subscriber is live, and what that makes its progress: :class:`LivePartitions`.

A subscriber is live on a partition once the topic's shared fetch hands it that partition's
messages as they arrive (:meth:`~ssegate.kafka.topics.TopicListener.on_live`). Rules:

- A subscriber with filters declares their :class:`~ssegate.kafka.topics.Interest`: once live
  on a partition it is offered only the messages it may want, and is not called at all for a
  batch with none. Its progress on a live partition is the topic's shared
  :class:`~ssegate.kafka.topics.LivePositions`, read when an id is written (:meth:`follow`: the
  feed moves it once per batch for every subscriber; nobody advances it per subscriber per
  message).
- Where a subscription that goes on from a subscriber's progress starts (:meth:`start`): each
  partition it moved on, every live one at the topic's live end.
- A subscriber live on every partition of its topic (:attr:`everywhere`) may join a
  :class:`~.broadcast.Broadcast`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ssegate.bindings.sse_kafka.event_id import ProgressEncoder
from ssegate.kafka.topics import KafkaMessage, LivePositions


class LivePartitions:
    """The partitions of its topic one subscriber is live on, and the topic's live end."""

    __slots__ = ("known", "partitions", "positions")

    def __init__(self) -> None:
        self.positions: LivePositions | None = None
        """The topic's live end, once live on any partition."""
        self.partitions: tuple[int, ...] = ()
        self.known = 0
        """How many partitions the topic has, as last told (0: not subscribed now)."""

    def add(self, partition: int, positions: LivePositions) -> None:
        self.positions = positions
        if partition not in self.partitions:
            self.partitions = (*self.partitions, partition)

    @property
    def everywhere(self) -> bool:
        """Live on every partition of the topic."""
        return 0 < self.known <= len(self.partitions)

    def covers(self, messages: Sequence[KafkaMessage]) -> bool:
        """Every one of ``messages`` is on a live partition."""
        live = self.partitions
        return bool(live) and all(message.partition in live for message in messages)

    def follow(self, progress: ProgressEncoder) -> None:
        """Move ``progress`` on live partitions up to the topic's live end."""
        live = self.positions
        if live is None or not self.partitions:
            return
        offsets = live.offsets
        own = progress.offsets
        for partition in self.partitions:
            position = offsets.get(partition, 0)
            if position > own.get(partition, 0):
                progress.advance(partition, position)

    def start(self, progress: ProgressEncoder) -> dict[int, int]:
        """Where a subscription that goes on from ``progress`` starts (moved up first)."""
        self.follow(progress)
        start = dict(progress.offsets)
        live = self.positions
        if live is not None:
            for partition in self.partitions:
                start.setdefault(partition, live.offsets.get(partition, 0))
        return start

    def clear(self) -> None:
        """Not subscribed any more: live nowhere until told again."""
        self.partitions = ()
        self.known = 0
