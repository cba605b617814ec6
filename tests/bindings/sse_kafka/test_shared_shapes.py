"""Subscribers at the same position write the same bytes, and stay independent after; equal
shapes are one object."""

from __future__ import annotations

import pytest

from ssegate.bindings.sse_kafka import resume_points
from ssegate.bindings.sse_kafka.event_id import EventIdFormat, encode_progress
from ssegate.bindings.sse_kafka.filters import FilterEntry, MessageFilter
from ssegate.bindings.sse_kafka.proxy import SseKafkaProxy
from ssegate.bindings.sse_kafka.shared import Shapes, SubscriberShape
from ssegate.sse_codec.parser import SseIdOnly

from .test_proxy import proxy, route, subscribe
from .topic_log import TopicLog, WireSink


@pytest.fixture
def log() -> TopicLog:
    topics = TopicLog()
    topics.create("events", 2)
    return topics


def ids_and_data(sink: WireSink) -> list[tuple[str | None, str]]:
    return [(e.id, e.data) for e in sink.events()]


def test_subscribers_at_the_same_position_write_the_same_bytes(
    log: TopicLog,
) -> None:
    p = proxy(route(log))
    sinks = [subscribe(p, "/events") for _ in range(20)]
    log.append_batch("events", 0, [(None, b"a"), (None, b"b"), (None, b"c")])
    assert ids_and_data(sinks[0]) == [
        (encode_progress({0: 1}), "a"),
        (encode_progress({0: 2}), "b"),
        (encode_progress({0: 3}), "c"),
    ]
    assert all(sink.wire == sinks[0].wire for sink in sinks)


def test_a_subscriber_whose_progress_differs_works_its_own_batch_out(log: TopicLog) -> None:
    log.append_batch("events", 1, [(None, b"old")])
    p = proxy(route(log))
    fresh = subscribe(p, "/events")  # replays "old": progress {1: 1}
    resumed = subscribe(p, "/events", encode_progress({0: 0, 1: 1}))  # progress {0: 0, 1: 1}
    log.append_batch("events", 0, [(None, b"new")])
    assert ids_and_data(fresh)[-1] == (encode_progress({0: 1, 1: 1}), "new")
    assert ids_and_data(resumed) == [(encode_progress({0: 1, 1: 1}), "new")]


def test_subscribers_with_different_filters_get_only_their_messages(log: TopicLog) -> None:
    p = proxy(route(log, "/{key}", {"topic": "events", "filters": [{"key": "${params.key}"}]}))
    mine = [subscribe(p, "/mine") for _ in range(3)]
    theirs = subscribe(p, "/theirs")
    log.append_batch("events", 0, [(b"mine", b"1"), (b"theirs", b"2"), (b"mine", b"3")])
    for sink in mine:
        assert ids_and_data(sink) == [
            (encode_progress({0: 1}), "1"),
            (encode_progress({0: 3}), "3"),
        ]
    assert ids_and_data(theirs) == [(encode_progress({0: 2}), "2")]


def test_a_progress_is_not_moved_by_another_subscriber_moving_alone(
    log: TopicLog,
) -> None:
    p = proxy(route(log))
    first, second = subscribe(p, "/events"), subscribe(p, "/events")
    log.append_batch("events", 0, [(None, b"a")])
    log.subscriptions[1].listener.on_skipped(1, 5)  # only the second one passes offsets over
    log.append_batch("events", 0, [(None, b"b")])
    assert ids_and_data(first)[-1] == (encode_progress({0: 2}), "b")
    assert ids_and_data(second)[-1] == (encode_progress({0: 2, 1: 5}), "b")


def test_a_batch_the_filter_drops_whole_still_counts_toward_the_id_only_block(
    log: TopicLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resume_points, "ID_ONLY_AFTER_SKIPPED", 4)
    p = proxy(route(log, "/{key}", {"topic": "events", "filters": [{"key": "${params.key}"}]}))
    sinks = [subscribe(p, "/mine") for _ in range(3)]
    log.append_batch("events", 0, [(b"other", b"x")] * 2)
    assert all(not sink.parsed() for sink in sinks)
    log.append_batch("events", 0, [(b"other", b"x")] * 2)
    for sink in sinks:
        assert sink.parsed() == [SseIdOnly(encode_progress({0: 4}))]


def test_equal_filters_rendered_apart_share_one_shape() -> None:
    shared = Shapes()

    def rendered() -> MessageFilter:
        return MessageFilter((FilterEntry(b"k", (("tenant", b"acme"),)),))

    first = shared.intern(SubscriberShape(rendered(), EventIdFormat.ETAG, None))
    assert shared.intern(SubscriberShape(rendered(), EventIdFormat.ETAG, None)) is first
    assert shared.intern(SubscriberShape(rendered(), EventIdFormat.KEY_AND_ETAG, None)) is not first


def test_the_proxy_hands_one_shape_table_to_its_subscribers() -> None:
    p = SseKafkaProxy("p", [], proxy().metrics)
    assert isinstance(p.shapes, Shapes) and p.shares.shapes is p.shapes
