"""Producing test input to the real broker and reading a pipeline's output back."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer

from ssegate.kafka.topics import KafkaMessage


def unique(name: str) -> str:
    """A topic name no other test uses."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def reading(device: str | None, tenant: str, temperature: Any, second: float) -> bytes:
    """A sensor reading at ``second`` seconds past 2024-01-01T00:00:00Z."""
    whole, millis = divmod(round(second * 1000), 1000)
    minutes, seconds = divmod(whole, 60)
    ts = f"2024-01-01T00:{minutes:02d}:{seconds:02d}.{millis:03d}Z"
    record = {"tenant": tenant, "temperature": temperature, "ts": ts}
    if device is not None:
        record["device"] = device
    return json.dumps(record).encode()


def produce(bootstrap: str, topic: str, values: Sequence[bytes]) -> None:
    """``values`` in order (idempotent: a retried request cannot reorder them)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True}
    )
    for value in values:
        producer.produce(topic, value, key=b"raw")
    if producer.flush(30) != 0:
        raise AssertionError(f"could not produce to {topic}")


def consume(bootstrap: str, topic: str, timeout: float = 30.0) -> list[KafkaMessage]:
    """Every record of ``topic`` (one partition or more), oldest first per partition."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": unique("test"),
        "auto.offset.reset": "earliest", "enable.partition.eof": True,
        "enable.auto.commit": False,
    })  # fmt: skip
    consumer.subscribe([topic])
    messages: list[KafkaMessage] = []
    finished: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    finished.add(message.partition())
                    assigned = consumer.assignment()
                    if assigned and {p.partition for p in assigned} <= finished:
                        return messages
                    continue
                if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise AssertionError(f"consuming {topic}: {error}")
            messages.append(KafkaMessage(
                message.topic(), message.partition(), message.offset(), message.key(),
                message.value(), tuple((k, v or b"") for k, v in message.headers() or ()),
            ))  # fmt: skip
    finally:
        consumer.close()
    raise AssertionError(f"{topic} did not reach its end within {timeout} s")
