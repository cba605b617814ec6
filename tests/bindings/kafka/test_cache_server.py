"""The kafka cache server against a real broker: shared fetch, history, offsets, compaction,
new partitions, retention resets and invalid messages."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from tests.bindings.kafka.support import RecordingListener, create_topic, produce, until

from ssegate.bindings.kafka.cache_server import CacheBounds, KafkaCacheServer
from ssegate.bindings.kafka.client import KafkaClient
from ssegate.catalogs import CatalogSet
from ssegate.kafka.topics import DefaultOffset, Interest, UnknownTopic
from ssegate.models.topics import build_topic_checks
from ssegate.telemetry.metrics import LAG_BUCKETS, Histogram, Metrics
from ssegate_lab.broker import BrokerInfo

pytestmark = pytest.mark.integration


def run_with_server(
    bootstrap: str,
    body: Callable[[KafkaCacheServer], Awaitable[None]],
    *,
    defaults: dict[str, DefaultOffset] | None = None,
    bounds: CacheBounds | None = None,
    topics: list[dict[str, object]] | None = None,
) -> KafkaCacheServer:
    server = KafkaCacheServer(
        "cache",
        KafkaClient("kafka", (bootstrap,)),
        default_offsets=defaults,
        bounds=bounds,
        checks=build_topic_checks(topics or [], "topics", CatalogSet()),
        metrics=Metrics(),
        metadata_interval=0.5,
    )

    async def main() -> None:
        server.start()
        try:
            await body(server)
        finally:
            await server.close()

    asyncio.run(main())
    return server


def test_two_subscribers_share_one_fetch_and_get_each_partition_in_order(
    kafka_broker: BrokerInfo,
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap, partitions=3)
    headers = [("trace", b"abc"), ("kind", b"demo")]
    produce(bootstrap, topic, [(f"k{n}".encode(), f"v{n}".encode(), n % 3) for n in range(30)],
            headers)  # fmt: skip
    first, second = RecordingListener(), RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, first)
        server.subscribe(topic, {}, second)
        await until(lambda: first.count() == 30 and second.count() == 30)
        produce(bootstrap, topic, [(f"k{n}".encode(), f"v{n}".encode(), n % 3)
                                   for n in range(30, 60)], headers)  # fmt: skip
        await until(lambda: first.count() == 60 and second.count() == 60)

    server = run_with_server(bootstrap, body)
    for listener in (first, second):
        assert listener.partitions[0] == [0, 1, 2]
        for partition in range(3):
            assert listener.offsets(partition) == list(range(20))
            message = listener.messages[partition][5]
            assert message.key == f"k{15 + partition}".encode()
            assert message.value == f"v{15 + partition}".encode()
            assert message.header("trace") == b"abc" and message.header("kind") == b"demo"
    assert server.fetch_assignments == 3
    assert server.metrics.counter("ssegate.kafka.fetch.assignments", "cache", topic=topic) == 3
    assert server.metrics.counter("ssegate.kafka.messages.received", "cache", topic=topic) == 60
    assert server.metrics.gauge_value("ssegate.kafka.subscribers", "cache", topic=topic) == 2


def test_a_late_subscriber_reads_history_from_the_cache(kafka_broker: BrokerInfo) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    produce(bootstrap, topic, [(None, f"v{n}".encode()) for n in range(20)])
    early, late = RecordingListener(), RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        subscription = server.subscribe(topic, {}, early)
        await until(lambda: early.count() == 20)
        subscription.cancel()
        server.subscribe(topic, {}, late)
        await until(lambda: late.count() == 20)
        produce(bootstrap, topic, [(None, b"new")])
        await until(lambda: late.count() == 21)

    server = run_with_server(bootstrap, body)
    assert late.offsets(0) == list(range(21))
    assert server.fetch_assignments == 1
    assert server.metrics.counter("ssegate.kafka.catch_up.requests", "cache", topic=topic) == 0
    assert server.metrics.gauge_value("ssegate.kafka.subscribers", "cache", topic=topic) == 1


def test_start_offsets_are_honoured_exactly_from_the_cache_and_from_before_it(
    kafka_broker: BrokerInfo,
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    produce(bootstrap, topic, [(None, b"x" * 100) for _ in range(50)])
    warm, in_cache, before_cache = RecordingListener(), RecordingListener(), RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, warm)
        await until(lambda: warm.count() == 50)
        server.subscribe(topic, {0: 45}, in_cache)  # the cache holds about the last 10
        server.subscribe(topic, {0: 7}, before_cache)
        await until(lambda: in_cache.count() == 5 and before_cache.count() == 43)
        produce(bootstrap, topic, [(None, b"y") for _ in range(5)])
        await until(lambda: before_cache.count() == 48 and in_cache.count() == 10)
        await asyncio.sleep(0.3)

    server = run_with_server(bootstrap, body, bounds=CacheBounds(max_bytes=3500))
    assert in_cache.offsets(0) == list(range(45, 55))
    assert before_cache.offsets(0) == list(range(7, 55))
    assert server.metrics.counter("ssegate.kafka.catch_up.requests", "cache", topic=topic) == 1
    assert server.metrics.counter("ssegate.kafka.cache.evictions", "cache", topic=topic) > 0
    assert server.fetch_assignments == 1


def test_a_live_topic_delivers_only_what_is_produced_after_it_started(
    kafka_broker: BrokerInfo,
) -> None:
    bootstrap = kafka_broker.bootstrap
    live_topic, historical_topic = create_topic(bootstrap), create_topic(bootstrap)
    for topic in (live_topic, historical_topic):
        produce(bootstrap, topic, [(None, b"old") for _ in range(5)])
    on_live_topic, asking_live = RecordingListener(), RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(live_topic, {}, on_live_topic)
        server.subscribe(historical_topic, {}, asking_live, default="live")
        await until(lambda: bool(on_live_topic.partitions and asking_live.partitions))
        # before anything new: asking live on a topic read from its start puts the
        # subscriber's progress at the end
        await until(lambda: (0, 5) in asking_live.skipped)
        for topic in (live_topic, historical_topic):
            produce(bootstrap, topic, [(None, b"new") for _ in range(3)])
        await until(lambda: on_live_topic.count() == 3 and asking_live.count() == 3)

    run_with_server(bootstrap, body, defaults={live_topic: "live"})
    assert on_live_topic.offsets(0) == [5, 6, 7] and asking_live.offsets(0) == [5, 6, 7]
    assert set(on_live_topic.values()) == {b"new"}


def test_a_stream_opened_later_on_a_live_topic_starts_at_the_live_end(
    kafka_broker: BrokerInfo,
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    first, late = RecordingListener(), RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, first)
        await until(lambda: bool(first.partitions))
        produce(bootstrap, topic, [(None, b"before") for _ in range(3)])
        await until(lambda: first.count() == 3)
        server.subscribe(topic, {}, late)  # no default given: the topic's own, live
        await until(lambda: bool(late.live))
        produce(bootstrap, topic, [(None, b"after")])
        await until(lambda: first.count() == 4 and late.count() == 1)

    run_with_server(bootstrap, body, defaults={topic: "live"})
    assert late.offsets(0) == [3] and late.values() == [b"after"]
    assert late.live == [(0, 3)]


def test_filtered_listeners_are_offered_only_the_keys_they_declared(
    kafka_broker: BrokerInfo,
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap, partitions=2)
    listeners = {}
    for key in (b"a", b"b", b"nobody"):
        listeners[key] = RecordingListener()
        listeners[key].interest = Interest(frozenset({key}))
    everything = RecordingListener()
    records = [(b"a", b"1", 0), (b"b", b"2", 1), (b"c", b"3", 0), (b"a", b"4", 1)]

    async def body(server: KafkaCacheServer) -> None:
        for listener in (*listeners.values(), everything):
            server.subscribe(topic, {}, listener)
        await until(lambda: len(everything.live) == 2)
        produce(bootstrap, topic, records)
        await until(lambda: everything.count() == 4 and listeners[b"a"].count() == 2)
        await asyncio.sleep(0.2)

    run_with_server(bootstrap, body)
    assert sorted(listeners[b"a"].values(0) + listeners[b"a"].values(1)) == [b"1", b"4"]
    assert listeners[b"b"].values(1) == [b"2"] and listeners[b"b"].count() == 1
    assert listeners[b"nobody"].calls == 0


def test_a_compacted_topic_keeps_the_latest_value_per_key(kafka_broker: BrokerInfo) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap, config={"cleanup.policy": "compact"})
    records = [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", None)]
    produce(bootstrap, topic, records)
    live, late = RecordingListener(), RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, live)
        await until(lambda: live.count() == 5)
        server.subscribe(topic, {}, late)
        await until(lambda: late.count() == 2)
        await asyncio.sleep(0.2)

    run_with_server(bootstrap, body)
    assert [(m.key, m.value) for m in live.messages[0]] == records
    assert [(m.key, m.value) for m in late.messages[0]] == [(b"a", b"2"), (b"c", b"1")]
    assert late.skipped == [(0, 5)]


def test_a_partition_added_later_is_picked_up(kafka_broker: BrokerInfo) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    listener = RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, listener)
        await until(lambda: bool(listener.partitions))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(15)
        await until(lambda: listener.partitions[-1] == [0, 1])
        produce(bootstrap, topic, [(None, b"p1", 1), (None, b"p0", 0)])
        await until(lambda: listener.count() == 2)

    server = run_with_server(bootstrap, body)
    assert listener.values(1) == [b"p1"] and listener.values(0) == [b"p0"]
    assert server.fetch_assignments == 2


def test_an_offset_below_the_log_start_is_reset_to_it(kafka_broker: BrokerInfo) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    produce(bootstrap, topic, [(None, f"v{n}".encode()) for n in range(10)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deleted = admin.delete_records([TopicPartition(topic, 0, 6)])
    for future in deleted.values():
        future.result(15)
    listener = RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {0: 2}, listener)
        await until(lambda: listener.count() == 4)

    server = run_with_server(bootstrap, body)
    assert listener.resets == [(0, 2, 6)]
    assert listener.offsets(0) == [6, 7, 8, 9]
    assert server.metrics.counter("ssegate.kafka.resets", "cache", topic=topic) == 1


def test_invalid_messages_are_skipped_logged_and_counted(kafka_broker: BrokerInfo) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    produce(bootstrap, topic, [(None, b'{"a":1}'), (None, b"{nope"), (None, b"[2]"), (None, b"}")])
    listener = RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, listener)
        # live: the trailing invalid message moves the partition's live position past it
        await until(lambda: listener.live_position(0) == 4)

    server = run_with_server(bootstrap, body, topics=[{"name": topic, "value": "json"}])
    assert listener.offsets(0) == [0, 2]
    assert server.metrics.counter("ssegate.kafka.invalid_messages", "cache", topic=topic) == 2


def test_an_unknown_topic_is_refused(kafka_broker: BrokerInfo) -> None:
    async def body(server: KafkaCacheServer) -> None:
        with pytest.raises(UnknownTopic):
            server.subscribe("no-such-topic", {}, RecordingListener())

    run_with_server(kafka_broker.bootstrap, body)


def test_batches_fetched_while_the_loop_is_busy_reach_a_subscriber_in_one_call(
    kafka_broker: BrokerInfo,
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    listener = RecordingListener()

    def produce_one_at_a_time() -> None:  # each its own fetch, while the loop is stalled
        for n in range(1, 21):
            produce(bootstrap, topic, [(None, b"v%d" % n)])
            time.sleep(0.02)

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, listener)
        produce(bootstrap, topic, [(None, b"v0")])
        await until(lambda: listener.count() == 1)
        calls = listener.calls
        producer = threading.Thread(target=produce_one_at_a_time)
        producer.start()
        producer.join()
        time.sleep(0.3)  # the loop stays blocked while the fetch thread hands over the rest
        await until(lambda: listener.count() == 21)
        assert listener.calls - calls == 1

    server = run_with_server(bootstrap, body)
    assert listener.values() == [b"v%d" % n for n in range(21)]
    assert server.metrics.counter("ssegate.kafka.fetch.batches_joined", "cache") > 0


def test_the_fanout_lag_of_a_live_batch_is_the_age_of_its_oldest_record(
    kafka_broker: BrokerInfo,
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    listener = RecordingListener()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})

    def produce_stamped(value: bytes, age_s: float) -> None:
        producer.produce(topic, value, timestamp=int((time.time() - age_s) * 1000))
        assert producer.flush(15) == 0

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, listener)
        await until(lambda: bool(listener.partitions))
        produce_stamped(b"a minute old", 60.0)
        await until(lambda: listener.count() == 1)
        produce_stamped(b"new", 0.0)
        await until(lambda: listener.count() == 2)

    server = run_with_server(bootstrap, body, defaults={topic: "live"})
    [lag] = [
        value
        for kind, name, labels, value in server.metrics.items()
        if name == "ssegate.kafka.fanout.lag" and ("topic", topic) in labels
    ]
    assert isinstance(lag, Histogram) and lag.buckets == LAG_BUCKETS
    assert lag.count == 2
    minute = LAG_BUCKETS.index(300.0)  # the bucket (30 s, 300 s]
    assert lag.counts[minute] == 1
    assert sum(lag.counts[: LAG_BUCKETS.index(5.0) + 1]) == 1  # the new one: under 5 s
