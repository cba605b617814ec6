"""The fetch thread's catch-up reader: history that the cache no longer holds.

The second consumer of :mod:`~.fetcher`, positioned by ``assign`` with explicit offsets and
never committing: it is assigned only the partitions some subscriber needs from before what the
cache holds, from the oldest such offset, until the loop says it is no longer needed
(:class:`~.fetch_events.CatchUp`, :class:`~.fetch_events.EndCatchUp`). An offset below the log
start is answered with :class:`~.fetch_events.CatchUpReset` and read from the log start; the
end of a partition with :class:`~.fetch_events.CatchUpAtEnd`. Each event carries the ticket of
the latest request applied before it was read, so the loop knows whom it is for.

Its batches are made like the shared fetch's (:mod:`~.fetch_records`), with repeat filters of
their own. Every worker of ``start --workers N`` keeps its own catch-up reader.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from ssegate.bindings.kafka.fetch_events import (
    CatchUp,
    CatchUpAtEnd,
    CatchUpReset,
    EndCatchUp,
    Event,
)
from ssegate.bindings.kafka.fetch_records import RecordBatches

REQUEST_TIMEOUT = 5.0
RETRY_WAIT = 0.01


class CatchUpReader:
    """The catch-up consumer and where it is in each partition it reads (fetch thread only)."""

    def __init__(
        self,
        config: Callable[[], dict[str, Any]],
        records: RecordBatches,
        emit: Callable[[Event], None],
        unavailable: Callable[[str], None],
        retry: Callable[[CatchUp], None],
    ) -> None:
        """``config`` makes the consumer's settings (once, at the first request); ``emit`` hands
        an event to the loop; ``unavailable`` reports the broker gone; ``retry`` queues a
        request again for a later pass."""
        self._config = config
        self._records = records
        self._emit = emit
        self._unavailable = unavailable
        self._retry = retry
        self.consumer: Consumer | None = None
        self._next: dict[tuple[str, int], int] = {}
        """Partitions read, and the next offset read in each."""
        self._ticket: dict[tuple[str, int], int] = {}

    @property
    def busy(self) -> bool:
        """Some partition is being read."""
        return bool(self._next)

    def ticket(self, key: tuple[str, int]) -> int:
        return self._ticket.get(key, 0)

    def start(self, command: CatchUp) -> None:
        if self.consumer is None:
            self.consumer = Consumer(self._config())
        key = (command.topic, command.partition)
        partition = TopicPartition(*key)
        try:
            low, _high = self.consumer.get_watermark_offsets(partition, timeout=REQUEST_TIMEOUT)
        except KafkaException as exc:
            self._unavailable(str(exc.args[0]) if exc.args else "unavailable")
            self._retry(command)  # tried again on a later pass
            time.sleep(RETRY_WAIT)
            return
        offset = command.offset
        self._ticket[key] = command.ticket
        if offset < low:
            self._emit(CatchUpReset(*key, offset, int(low), command.ticket))
            offset = int(low)
        position = self._next.get(key)
        if (
            position is not None
            and max(position, self._records.hands_over_from(True, key)) <= offset
        ):
            return  # already reading (and handing over) from before there
        if position is not None:
            self.consumer.incremental_unassign([partition])
        reading_from = self._records.reading_from(True, *key, offset, int(low))
        self.consumer.incremental_assign([TopicPartition(*key, reading_from)])
        self._next[key] = reading_from

    def end(self, command: EndCatchUp) -> None:
        key = (command.topic, command.partition)
        self._ticket.pop(key, None)
        self._records.forget(True, key)
        if self.consumer is not None and self._next.pop(key, None) is not None:
            self.consumer.incremental_unassign([TopicPartition(*key)])

    def read_to(self, key: tuple[str, int], next_offset: int) -> None:
        """A batch of partition ``key`` was read, up to ``next_offset``."""
        if key in self._next:
            self._next[key] = next_offset

    def at_end(self, key: tuple[str, int], offset: int) -> None:
        """The reader reached the end of partition ``key``, at ``offset``."""
        if key in self._next:
            self._emit(CatchUpAtEnd(key[0], key[1], offset, self._ticket.get(key, 0)))

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
