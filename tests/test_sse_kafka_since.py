"""``?since=<time>`` end to end: a real broker's time index starts each partition at its first
record at or after the time.

Records are produced with explicit timestamps, rising with their offsets: per partition some
before a time ``T`` (an hour ago), one exactly at ``T``, some after. Streams that ask for
``since=T`` (epoch milliseconds or RFC 3339) get exactly the records at or after ``T``, in
partition order; a key-filtered stream on a compacted topic gets exactly that key's records from
``T``; the ids they carry resume exactly (a last event id wins over ``since``); a time before
what retention left says so with ``event:reset``; a time in the future starts live; a bad value
is a 400 with its reason. The same holds with ``start --workers 2``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from tests.support.sse_reads import read_events as read

from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration

CONFIG = """\
name: since
telemetry:
  exporters:
    logs:
      type: stdout
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {{host: 127.0.0.1, port: {port}}}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    routes:
      - exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    exit: north_sse_kafka_mapping
  north_sse_kafka_mapping:
    type: sse-kafka
    kind: proxy
    routes:
      - when:
          - path: /{{topic}}/key/{{key}}
        exit: north_kafka_cache_client
        with:
          topic: ${{params.topic}}
          filters:
            - key: ${{params.key}}
      - when:
          - path: /{{topic}}
        exit: north_kafka_cache_client
  north_kafka_cache_client:
    type: kafka
    kind: cache_client
    exit: south_kafka_cache_server
  south_kafka_cache_server:
    type: kafka
    kind: cache_server
    exit: south_kafka_client
  south_kafka_client:
    type: kafka
    kind: client
    options:
      servers: [{bootstrap}]
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
"""

T = (int(time.time()) - 3600) * 1000
"""The time streams start from: a whole second an hour ago."""
T_RFC3339 = (datetime.fromtimestamp(T / 1000, UTC) + timedelta(hours=1)).strftime(
    "%Y-%m-%dT%H:%M:%S+01:00"
)
BEFORE, AFTER = 4, 5
"""Records per partition before ``T``, and at or after it (the first of them exactly at T)."""


@dataclass(frozen=True)
class Topics:
    plain: str
    """2 partitions; record ``p<P>-<i>`` at ``T + (i - BEFORE) * 1000`` ms."""
    compacted: str
    """``cleanup.policy=compact``, 2 partitions: keys ``k0`` and ``k1`` before and after T."""
    retained: str
    """1 partition whose first offsets were deleted (as retention would)."""


def stamp(i: int) -> int:
    return T + (i - BEFORE) * 1000


def at_or_after_t(partition: int) -> list[str]:
    return [f"p{partition}-{i}" for i in range(BEFORE, BEFORE + AFTER)]


COMPACTED = [  # (partition, key, value, timestamp)
    (0, b"k0", "k0-old-1", T - 3000),
    (0, b"k1", "k1-old-1", T - 2500),
    (0, b"k0", "k0-old-2", T - 2000),
    (0, b"k1", "k1-new-1", T),
    (0, b"k0", "k0-new-1", T + 1000),
    (0, b"k1", "k1-new-2", T + 1500),
    (1, b"k2", "k2-old-1", T - 1000),
    (1, b"k0", "k0-new-2", T + 2000),
]


@pytest.fixture(scope="module")
def topics(kafka_broker: BrokerInfo) -> Topics:
    suffix = uuid.uuid4().hex[:8]
    names = Topics(f"since-{suffix}", f"since-compacted-{suffix}", f"since-retained-{suffix}")
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    created = admin.create_topics([
        NewTopic(names.plain, 2, 1),
        NewTopic(names.compacted, 2, 1, config={"cleanup.policy": "compact"}),
        NewTopic(names.retained, 1, 1),
    ])  # fmt: skip
    for future in created.values():
        future.result(30)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 0})
    for i in range(BEFORE + AFTER):
        for partition in (0, 1):
            producer.produce(names.plain, f"p{partition}-{i}".encode(), partition=partition,
                             timestamp=stamp(i))  # fmt: skip
    for partition, key, value, timestamp in COMPACTED:
        producer.produce(names.compacted, value.encode(), key=key, partition=partition,
                         timestamp=timestamp)  # fmt: skip
    for i in range(6):
        producer.produce(names.retained, f"r-{i}".encode(), partition=0, timestamp=stamp(i))
    assert producer.flush(30) == 0
    deleted = admin.delete_records([TopicPartition(names.retained, 0, 3)])
    for future in deleted.values():
        future.result(30)
    return names


def gateway_config(tmp: pytest.TempPathFactory, bootstrap: str) -> tuple[int, Path]:
    port = free_port()
    config = tmp.mktemp("since") / "zilla.yaml"
    config.write_text(CONFIG.format(port=port, bootstrap=bootstrap))
    return port, config


@pytest.fixture(scope="module")
def gateway(
    kafka_broker: BrokerInfo, topics: Topics, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    port, config = gateway_config(tmp_path_factory, kafka_broker.bootstrap)
    with GatewayProcess(config):
        yield port


def by_partition(events: list[SseEvent]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {0: [], 1: []}
    for event in events:
        found[int(event.data[1])].append(event.data)
    return found


def expect_since_t(port: int, topics: Topics, since: str) -> None:
    events = asyncio.run(read(port, f"/{topics.plain}?since={since}", 2 * AFTER))
    assert by_partition(events) == {0: at_or_after_t(0), 1: at_or_after_t(1)}


def expect_compacted_key(port: int, topics: Topics) -> None:
    events = asyncio.run(read(port, f"/{topics.compacted}/key/k0?since={T}", 2))
    assert sorted(e.data for e in events) == ["k0-new-1", "k0-new-2"]


def expect_resume(port: int, topics: Topics, before_reconnect: int) -> None:
    """A stream with ``since=T`` read in two connections, the second with the last id the first
    got (and ``since`` still in the URL): together exactly the records from T, once each."""
    path = f"/{topics.plain}?since={T}"

    async def scenario() -> list[SseEvent]:
        first = await read(port, path, before_reconnect)
        rest = await read(port, path, 2 * AFTER - before_reconnect, last_id=first[-1].id)
        return first + rest

    assert by_partition(asyncio.run(scenario())) == {0: at_or_after_t(0), 1: at_or_after_t(1)}


def test_since_epoch_milliseconds_gets_exactly_the_records_at_or_after_it(
    gateway: int, topics: Topics
) -> None:
    expect_since_t(gateway, topics, str(T))


def test_since_an_rfc3339_time_with_an_offset_gets_the_same_records(
    gateway: int, topics: Topics
) -> None:
    expect_since_t(gateway, topics, T_RFC3339.replace("+", "%2B"))


def test_a_key_filtered_stream_on_a_compacted_topic_gets_that_key_from_the_time(
    gateway: int, topics: Topics
) -> None:
    expect_compacted_key(gateway, topics)


def test_the_last_event_id_of_a_since_stream_resumes_exactly_and_wins_over_since(
    gateway: int, topics: Topics
) -> None:
    expect_resume(gateway, topics, 3)


def test_a_time_before_what_retention_left_says_so_and_starts_at_the_earliest(
    gateway: int, topics: Topics
) -> None:
    since = stamp(0) - 60_000
    events = asyncio.run(read(gateway, f"/{topics.retained}?since={since}", 4))
    assert events[0].type == "reset"
    assert json.loads(events[0].data) == {"partition": 0, "since": since, "earliest": 3}
    assert [e.data for e in events[1:]] == ["r-3", "r-4", "r-5"]


def test_a_time_in_the_future_starts_at_the_live_end(
    gateway: int, topics: Topics, kafka_broker: BrokerInfo
) -> None:
    asyncio.run(read(gateway, f"/{topics.retained}", 1))  # the topic's feed has started
    future = int(time.time() * 1000) + 3_600_000

    async def scenario() -> list[SseEvent]:
        parser = SseParser()
        events: list[SseEvent] = []
        url = f"http://127.0.0.1:{gateway}/{topics.retained}?since={future}"
        async with (
            httpx.AsyncClient(timeout=30) as client,
            client.stream("GET", url, headers={"accept": "text/event-stream"}) as response,
        ):
            # The headers come once the stream is attached at the live end: produce now.
            assert response.status_code == 200
            producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 0})
            producer.produce(topics.retained, b"r-live", partition=0)
            assert producer.flush(30) == 0
            async with asyncio.timeout(60):
                async for chunk in response.aiter_raw():
                    events += [e for e in parser.feed(chunk) if isinstance(e, SseEvent)]
                    if events:
                        return events
        return events

    assert [e.data for e in asyncio.run(scenario())] == ["r-live"]


@pytest.mark.parametrize(
    ("since", "reason"),
    [
        ("yesterday", "since: 'yesterday' is neither epoch milliseconds"),
        ("-1", "since: -1 is negative"),
        (f"{T}&since={T}", "since: given 2 times; give it once"),
        ("1" * 65, "since: is 65 bytes, longer than 64"),
        (str(T * 1000), "is more than a year after now"),
    ],
    ids=["not-a-time", "negative", "given-twice", "too-long", "microseconds"],
)
def test_a_bad_since_is_a_400_with_its_reason(
    gateway: int, topics: Topics, since: str, reason: str
) -> None:
    response = httpx.get(f"http://127.0.0.1:{gateway}/{topics.plain}?since={since}", timeout=30)
    assert response.status_code == 400
    assert reason in response.text


def test_since_on_a_topic_the_broker_does_not_know_is_a_404(gateway: int) -> None:
    response = httpx.get(f"http://127.0.0.1:{gateway}/since-missing-{uuid.uuid4().hex[:8]}?since={T}",
                         timeout=30)  # fmt: skip
    assert response.status_code == 404
    assert "does not exist" in response.text


def test_since_works_the_same_with_two_workers(
    kafka_broker: BrokerInfo, topics: Topics, tmp_path_factory: pytest.TempPathFactory
) -> None:
    port, config = gateway_config(tmp_path_factory, kafka_broker.bootstrap)
    with GatewayProcess(config, workers=2):
        for _ in range(2):  # connections land on either worker
            expect_since_t(port, topics, str(T))
            expect_compacted_key(port, topics)
        expect_resume(port, topics, 4)
