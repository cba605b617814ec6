"""Records written twice under one ``ssegate-id``, against a real broker: no subscriber gets a
repeat, live, replayed, filtered, caught up, or on a cache that started later than the first
copy; a repeat beyond the horizon is a record of its own."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from confluent_kafka import Producer
from tests.bindings.kafka.support import RecordingListener, create_topic, until
from tests.bindings.kafka.test_cache_server import run_with_server

from ssegate.bindings.kafka.cache_server import CacheBounds, KafkaCacheServer
from ssegate.kafka.topics import RECORD_ID_HEADER, Interest
from ssegate_lab.broker import BrokerInfo

pytestmark = pytest.mark.integration

Row = tuple[bytes, bytes, str]
"""``(key, value, id)`` of a record."""


def produce_with_ids(bootstrap: str, topic: str, rows: Sequence[Row]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value, record_id in rows:
        headers = [("tenant", b"acme"), (RECORD_ID_HEADER, record_id.encode())]
        producer.produce(topic, value, key, partition=0, headers=headers)
    assert producer.flush(15) == 0


def rows(first: int, last: int, key: bytes = b"k") -> list[Row]:
    """Records ``first`` ... ``last``: value ``v<n>``, id ``copy@raw/0/<n>``."""
    return [(key, b"v%d" % n, f"copy@raw/0/{n}") for n in range(first, last + 1)]


def again(row: Row) -> Row:
    """The same record, written again (under the same id)."""
    return row


def ids(listener: RecordingListener) -> list[str]:
    return [(m.header(RECORD_ID_HEADER) or b"").decode() for m in listener.messages[0]]


def test_no_subscriber_gets_a_repeat_live_replayed_or_filtered(kafka_broker: BrokerInfo) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    a, b = rows(0, 2, b"a"), rows(3, 5, b"b")
    # offsets 0-5 first copies; 6: a repeat of 1 (key a), 7: of 4 (key b); 8 new; 9: of 8
    history = [*a, *b, again(a[1]), again(b[1])]
    live, only_a = RecordingListener(), RecordingListener()
    only_a.interest = Interest(frozenset({b"a"}))
    late, late_a, resumed = RecordingListener(), RecordingListener(), RecordingListener()
    late_a.interest = Interest(frozenset({b"a"}))

    async def body(server: KafkaCacheServer) -> None:
        produce_with_ids(bootstrap, topic, history)
        server.subscribe(topic, {}, live)
        server.subscribe(topic, {}, only_a)
        await until(lambda: live.count() == 6 and only_a.count() == 3)
        new = rows(8, 8, b"a")
        produce_with_ids(bootstrap, topic, [*new, *new])  # offsets 8 and 9
        await until(lambda: live.count() == 7 and only_a.count() == 4)
        server.subscribe(topic, {}, late)
        server.subscribe(topic, {}, late_a)
        server.subscribe(topic, {0: 2}, resumed)  # between the first copy of 1 and its repeat
        produce_with_ids(bootstrap, topic, rows(10, 10, b"a"))
        await until(lambda: late.count() == 8 and late_a.count() == 5 and resumed.count() == 6)

    server = run_with_server(bootstrap, body)
    first_copies = [0, 1, 2, 3, 4, 5, 8, 10]
    assert live.offsets(0) == late.offsets(0) == first_copies
    assert ids(live) == [f"copy@raw/0/{n}" for n in (0, 1, 2, 3, 4, 5, 8, 10)]
    assert only_a.offsets(0) == late_a.offsets(0) == [0, 1, 2, 8, 10]
    assert resumed.offsets(0) == [2, 3, 4, 5, 8, 10]
    assert server.metrics.counter("ssegate.kafka.repeats_skipped", "cache", topic=topic) == 3
    assert server.metrics.counter("ssegate.kafka.messages.received", "cache", topic=topic) == 11


def test_a_cache_started_at_the_live_end_knows_the_ids_just_before_it(
    kafka_broker: BrokerInfo,
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    before = rows(0, 9)
    produce_with_ids(bootstrap, topic, before)
    listener = RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, listener)
        await until(lambda: bool(listener.live))
        # the producer is restarted: the end of its last batch (7-9) is written again
        produce_with_ids(bootstrap, topic, [*before[7:], *rows(10, 11)])
        await until(lambda: listener.count() == 2)

    server = run_with_server(bootstrap, body, defaults={topic: "live"})
    assert listener.offsets(0) == [13, 14]
    assert ids(listener) == ["copy@raw/0/10", "copy@raw/0/11"]
    assert listener.live_position(0) == 15
    assert server.metrics.counter("ssegate.kafka.repeats_skipped", "cache", topic=topic) == 3


def test_a_catch_up_below_the_cache_knows_the_ids_just_before_where_it_resumes(
    kafka_broker: BrokerInfo,
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    big = [(key, value * 100, record_id) for key, value, record_id in rows(0, 39)]
    # offset 10 repeats offset 5; the cache holds only the last few records
    produce_with_ids(bootstrap, topic, [*big[:10], again(big[5]), *big[10:]])
    warm, resumed = RecordingListener(), RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, warm)
        await until(lambda: warm.count() == 40)
        server.subscribe(topic, {0: 7}, resumed)  # after the first copy, before its repeat
        await until(lambda: resumed.count() == 33)

    server = run_with_server(bootstrap, body, bounds=CacheBounds(max_bytes=6000))
    assert server.metrics.counter("ssegate.kafka.catch_up.requests", "cache", topic=topic) == 1
    assert resumed.offsets(0) == [7, 8, 9, *range(11, 41)]
    assert ids(resumed) == [f"copy@raw/0/{n}" for n in range(7, 40)]


def test_the_horizon_bounds_how_far_back_a_first_copy_makes_a_repeat(
    kafka_broker: BrokerInfo,
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap)
    first = rows(0, 5)
    # 6 repeats 3 (3 back: within a horizon of 3), 7 repeats 0 (7 back: beyond it)
    produce_with_ids(bootstrap, topic, [*first, again(first[3]), again(first[0])])
    within, none_skipped = RecordingListener(), RecordingListener()

    async def body(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, within)
        await until(lambda: within.count() == 7)

    async def body_without(server: KafkaCacheServer) -> None:
        server.subscribe(topic, {}, none_skipped)
        await until(lambda: none_skipped.count() == 8)

    run_with_server(bootstrap, body, bounds=CacheBounds(repeat_horizon=3))
    run_with_server(bootstrap, body_without, bounds=CacheBounds(repeat_horizon=0))
    assert within.offsets(0) == [0, 1, 2, 3, 4, 5, 7]
    assert none_skipped.offsets(0) == list(range(8))
