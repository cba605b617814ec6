"""The topic feed driven with fetched batches by hand: what live subscribers are handed."""

from __future__ import annotations

from tests.bindings.kafka.support import RecordingListener

from ssegate.bindings.kafka.fetch_events import Fetched
from ssegate.bindings.kafka.topic_feed import FeedHooks, TopicFeed
from ssegate.kafka.topics import Interest, KafkaMessage

TOPIC = "events"


def feed() -> TopicFeed:
    hooks = FeedHooks(
        schedule=lambda step: step(),
        catch_up=lambda *args: None,
        end_catch_up=lambda *args: None,
        now=lambda: 0.0,
        on_fetched=lambda *args: None,
        subscribers_changed=lambda *args: None,
    )
    topic = TopicFeed(TOPIC, hooks, max_bytes=1 << 30, max_age=0)
    topic.on_started({0: 0}, {0: 0}, compacted=False)
    return topic


def batch(first: int, last: int) -> Fetched:
    """Offsets ``first`` ... ``last`` of partition 0, keys alternating ``a`` and ``b``."""
    messages = [
        KafkaMessage(TOPIC, 0, n, b"ab"[n % 2 : n % 2 + 1], b"v%d" % n, ())
        for n in range(first, last + 1)
    ]
    return Fetched(TOPIC, 0, messages, last + 1)


def test_a_batch_fetched_again_from_an_earlier_offset_reaches_live_subscribers_once() -> None:
    topic = feed()
    every, only_a = RecordingListener(), RecordingListener()
    only_a.interest = Interest(frozenset({b"a"}))
    topic.subscribe(every, {}, "historical")
    topic.subscribe(only_a, {}, "historical")

    topic.on_fetched(batch(0, 4))
    topic.on_fetched(batch(2, 7))  # the fetch went back to offset 2 (a rewound consumer)

    assert every.offsets(0) == list(range(8))
    assert only_a.offsets(0) == [0, 2, 4, 6]


def test_a_batch_holding_only_what_was_handed_over_already_reaches_nobody() -> None:
    topic = feed()
    listener = RecordingListener()
    topic.subscribe(listener, {}, "historical")
    topic.on_fetched(batch(0, 4))
    calls = listener.calls

    topic.on_fetched(batch(1, 3))

    assert listener.calls == calls
    assert listener.offsets(0) == list(range(5))
