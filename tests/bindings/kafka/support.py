"""A recording listener, topic set-up and producing, for the kafka binding tests."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from ssegate.kafka.topics import Interest, KafkaMessage, LivePositions


class RecordingListener:
    """Keeps everything the cache told it, per partition."""

    def __init__(self) -> None:
        self.messages: dict[int, list[KafkaMessage]] = defaultdict(list)
        self.partitions: list[list[int]] = []
        self.skipped: list[tuple[int, int]] = []
        self.resets: list[tuple[int, int, int]] = []
        self.statuses: list[tuple[bool, str]] = []
        self.live: list[tuple[int, int]] = []
        """``(partition, live position)`` when the cache went live on a partition."""
        self.positions: LivePositions | None = None
        self.calls = 0
        self.interest: Interest | None = None

    def on_partitions(self, partitions: Sequence[int]) -> None:
        self.partitions.append(list(partitions))

    def on_messages(self, messages: Sequence[KafkaMessage]) -> None:
        self.calls += 1
        self.messages[messages[0].partition].extend(messages)

    def on_live(self, partition: int, positions: LivePositions) -> None:
        self.live.append((partition, positions.offsets[partition]))
        self.positions = positions

    def live_position(self, partition: int) -> int | None:
        """How far the listener has been served on a live ``partition`` (``None``: not live)."""
        if self.positions is None or all(p != partition for p, _ in self.live):
            return None
        return self.positions.offsets[partition]

    def on_skipped(self, partition: int, next_offset: int) -> None:
        self.skipped.append((partition, next_offset))

    def on_reset(self, partition: int, requested: int, earliest: int) -> None:
        self.resets.append((partition, requested, earliest))

    def on_status(self, available: bool, reason: str = "") -> None:
        self.statuses.append((available, reason))

    def offsets(self, partition: int) -> list[int]:
        return [m.offset for m in self.messages[partition]]

    def values(self, partition: int = 0) -> list[bytes | None]:
        return [m.value for m in self.messages[partition]]

    def count(self) -> int:
        return sum(len(v) for v in self.messages.values())


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


def create_topic(bootstrap: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
    topic = f"t-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(15)
    return topic


Record = tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, int]


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Record],
    headers: list[tuple[str, bytes]] | None = None,
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for record in records:
        partition = record[2] if len(record) == 3 else 0
        producer.produce(topic, record[1], record[0], partition=partition, headers=headers)
    assert producer.flush(15) == 0
