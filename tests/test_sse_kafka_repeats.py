"""Records written twice under one ``ssegate-id`` reach every SSE client once.

A real ``ssegate start`` process on ``examples/sse.kafka/zilla.yaml`` reads a real topic into
which some records were written again, as Spark's at-least-once Kafka sink writes them after a
failure: the same key, value and ``ssegate-id`` header, at a later offset. A plain stream and a
key-filtered one get every record once, in order, each with the event id of its first copy; a
stream resumed from an event id that lies between a first copy and its repeat does not get the
repeat. Each read ends with a last record produced after all the others, so a repeat the
gateway let through would have come before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from tests.test_sse_kafka import SSE, Gateway, Kafka, Stream, start_gateway

from ssegate.bindings.sse_kafka.event_id import decode_progress
from ssegate.kafka.topics import RECORD_ID_HEADER
from ssegate.sse_codec.parser import SseEvent
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration

RECORDS = [  # (key, value): a value names the first copy's offset, "again" marks a repeat
    ("a", "v0"),
    ("b", "v1"),
    ("a", "v2"),
    ("a", "v0 again"),
    ("b", "v1 again"),
    ("a", "v5"),
    ("b", "v6"),
    ("a", "v5 again"),
    ("a", "end"),
]
FIRST = {0: "v0", 1: "v1", 2: "v2", 5: "v5", 6: "v6", 8: "end"}
"""Offset → value of every first copy."""


@pytest.fixture(scope="module")
def topic_and_gateway(
    kafka_broker: BrokerInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Gateway]]:
    kafka = Kafka(kafka_broker.bootstrap)
    topic = kafka.topic(partitions=1)
    for offset, (key, value) in enumerate(RECORDS):
        first = value.removesuffix(" again")
        first_offset = next(o for o, v in FIRST.items() if v == first)
        record_id = f"copy@raw/0/{first_offset}"
        kafka.send(topic, 0, first, key=key, headers={"zone": "eu", RECORD_ID_HEADER: record_id})
        assert offset >= first_offset
    kafka.flush()
    process, gateway = start_gateway(tmp_path_factory.mktemp("gw"), kafka_broker.bootstrap)
    with process:
        yield topic, gateway


async def read(gateway: Gateway, path: str, count: int, last_id: str = "") -> list[SseEvent]:
    headers = SSE | ({"last-event-id": last_id} if last_id else {})
    async with (
        gateway.client() as client,
        client.stream("GET", gateway.url(path), headers=headers) as response,
    ):
        assert response.status_code == 200, await response.aread()
        return await Stream(response, last_id).read(count)


def offsets(events: list[SseEvent]) -> list[int]:
    """The offset each event was, from the progress its id carries."""
    return [decode_progress(event.id)[0] - 1 for event in events]


def test_a_stream_gets_every_record_once_with_the_id_of_its_first_copy(
    topic_and_gateway: tuple[str, Gateway],
) -> None:
    topic, gateway = topic_and_gateway
    events = asyncio.run(read(gateway, f"/{topic}", len(FIRST)))
    assert [e.data for e in events] == list(FIRST.values())
    assert offsets(events) == list(FIRST)


def test_a_key_filtered_stream_gets_every_record_of_its_key_once(
    topic_and_gateway: tuple[str, Gateway],
) -> None:
    topic, gateway = topic_and_gateway
    events = asyncio.run(read(gateway, f"/{topic}/key/a", 4))
    assert [e.data for e in events] == ["v0", "v2", "v5", "end"]
    zone = asyncio.run(read(gateway, f"/{topic}/zone/eu", len(FIRST)))
    assert [e.data for e in zone] == list(FIRST.values())


def test_a_stream_resumed_between_a_first_copy_and_its_repeat_gets_no_repeat(
    topic_and_gateway: tuple[str, Gateway],
) -> None:
    topic, gateway = topic_and_gateway

    async def scenario() -> tuple[list[SseEvent], list[SseEvent]]:
        first = await read(gateway, f"/{topic}", 3)  # v0 v1 v2: 3 and 4 repeat 0 and 1
        resumed = await read(gateway, f"/{topic}", 3, last_id=first[-1].id)
        keyed = await read(gateway, f"/{topic}/key/a", 1)  # v0
        keyed += await read(gateway, f"/{topic}/key/a", 3, last_id=keyed[-1].id)
        return resumed, keyed

    resumed, keyed = asyncio.run(scenario())
    assert [e.data for e in resumed] == ["v5", "v6", "end"]
    assert offsets(resumed) == [5, 6, 8]
    assert [e.data for e in keyed] == ["v0", "v2", "v5", "end"]
