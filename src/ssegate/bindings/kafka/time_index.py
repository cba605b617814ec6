"""The broker's time index, asked for the ``since`` of an sse-kafka stream
(:class:`~ssegate.kafka.times.TopicTimes`).

Why not the fetch thread: its consumers sit in ``consume`` and serve every stream of the
process; a lookup there would hold the shared fetch up for a round trip, and a lookup on the
loop would block every stream. So each lookup opens one short-lived consumer of its own
(:meth:`~.client.KafkaClient.consumer_config`: assigned nothing, committing nothing), in a
small thread pool of its own, asks the topic's partitions, ``offsets_for_times`` at the time
and, where needed, at the log start (``-2``) and at the end (``-1``), and closes it. A lookup
takes a few broker round trips; streams asking for the same topic and time at once share one.

Every lookup is bounded by ``timeout`` seconds, waiting for a free thread included: a broker
that does not answer in time is a :class:`~ssegate.kafka.times.TimeLookupFailed` (the proxy
answers 503), never a stream left waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Consumer, KafkaException, TopicPartition

from ssegate.bindings.kafka.client import KafkaClient
from ssegate.kafka.times import PartitionTime, TimeLookupFailed
from ssegate.kafka.topics import UnknownTopic

DEFAULT_TIMEOUT = 5.0
LOOKUP_THREADS = 2
_EARLIEST = -2
_LATEST = -1


class TimeIndex:
    """Looks times up in a Kafka cluster's time index, off the event loop."""

    def __init__(self, client: KafkaClient, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.client = client
        self.timeout = timeout
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[tuple[str, int], asyncio.Future[dict[int, PartitionTime]]] = {}

    async def offsets_for_time(self, topic: str, time_ms: int) -> Mapping[int, PartitionTime]:
        """See :meth:`~ssegate.kafka.times.TopicTimes.offsets_for_time`."""
        key = (topic, time_ms)
        pending = self._pending.get(key)
        if pending is None:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(LOOKUP_THREADS, "kafka-time-index")
            deadline = time.monotonic() + self.timeout
            loop = asyncio.get_running_loop()
            pending = asyncio.ensure_future(
                loop.run_in_executor(self._pool, self._lookup, topic, time_ms, deadline)
            )
            self._pending[key] = pending
            pending.add_done_callback(lambda done: self._done(key, done))
        try:
            async with asyncio.timeout(self.timeout):
                return await asyncio.shield(pending)
        except TimeoutError:
            raise TimeLookupFailed(
                f"the broker did not answer the time lookup within {self.timeout:g} s"
            ) from None

    def _done(self, key: tuple[str, int], done: asyncio.Future[dict[int, PartitionTime]]) -> None:
        self._pending.pop(key, None)
        if not done.cancelled():
            done.exception()  # retrieved: every stream that waited for it may have gone

    def _lookup(self, topic: str, time_ms: int, deadline: float) -> dict[int, PartitionTime]:
        """In a pool thread: one consumer, opened and closed for this lookup."""
        if time.monotonic() >= deadline:
            raise TimeLookupFailed("the time lookup waited too long for a free thread")
        consumer: Consumer | None = None
        try:
            consumer = Consumer(self.client.consumer_config("time-index"))
            return _times(consumer, topic, time_ms, deadline)
        except KafkaException as exc:
            reason = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
            raise TimeLookupFailed(f"the broker did not answer the time lookup: {reason}") from None
        finally:
            if consumer is not None:
                consumer.close()

    def close(self) -> None:
        """Stop the pool; a lookup under way ends at its timeout."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _times(
    consumer: Consumer, topic: str, time_ms: int, deadline: float
) -> dict[int, PartitionTime]:
    def left() -> float:
        return max(0.1, deadline - time.monotonic())

    metadata = consumer.list_topics(topic, timeout=left())
    found = metadata.topics.get(topic)
    if found is None or not found.partitions:
        raise UnknownTopic(topic)
    if found.error is not None:
        raise KafkaException(found.error)
    partitions = sorted(found.partitions)

    def offsets(at: int, which: list[int]) -> dict[int, int]:
        if not which:
            return {}
        asked = [TopicPartition(topic, p, at) for p in which]
        answered = consumer.offsets_for_times(asked, timeout=left())
        for answer in answered:
            if answer.error is not None:
                raise KafkaException(answer.error)
        return {answer.partition: int(answer.offset) for answer in answered}

    at_time = offsets(time_ms, partitions)
    earliest = offsets(_EARLIEST, [p for p in partitions if at_time.get(p, -1) > 0])
    ends = offsets(_LATEST, [p for p in partitions if at_time.get(p, -1) < 0])
    return {
        p: PartitionTime(at_time.get(p, -1), earliest.get(p, -1), ends.get(p, -1))
        for p in partitions
    }
