"""The topic feed driven with fetched batches by hand: what live subscribers are handed."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tests.bindings.kafka.support import RecordingListener

from ssegate.bindings.kafka.fetch_events import Fetched
from ssegate.bindings.kafka.topic_feed import REPLAY_CHUNK_BYTES, FeedHooks, Subscription, TopicFeed
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


class Steps:
    """The loop's next turns, run by hand."""

    def __init__(self) -> None:
        self.waiting: list[Callable[[], None]] = []

    def schedule(self, step: Callable[[], None]) -> None:
        self.waiting.append(step)

    def run(self) -> None:
        while self.waiting:
            self.waiting.pop(0)()


def paced_feed(max_bytes: int = 1 << 30) -> tuple[TopicFeed, Steps, list[tuple[int, int]]]:
    """A feed whose steps wait for :meth:`Steps.run`, and the catch-up reads it asks for."""
    steps, catch_ups = Steps(), []
    hooks = FeedHooks(
        schedule=steps.schedule,
        catch_up=lambda topic, partition, offset, ticket: catch_ups.append((partition, offset)),
        end_catch_up=lambda *args: None,
        now=lambda: 0.0,
        on_fetched=lambda *args: None,
        subscribers_changed=lambda *args: None,
    )
    topic = TopicFeed(TOPIC, hooks, max_bytes=max_bytes, max_age=0)
    topic.on_started({0: 0}, {0: 0}, compacted=False)
    return topic, steps, catch_ups


def large(first: int, last: int) -> Fetched:
    """Offsets ``first`` ... ``last`` of partition 0, each value a quarter of a replay chunk."""
    messages = [
        KafkaMessage(TOPIC, 0, n, None, b"%08d" % n + bytes(REPLAY_CHUNK_BYTES // 4 - 8))
        for n in range(first, last + 1)
    ]
    return Fetched(TOPIC, 0, messages, last + 1)


def test_a_replay_reads_chunks_of_a_bounded_size() -> None:
    topic, steps, _ = paced_feed()
    topic.on_fetched(large(0, 99))
    listener = RecordingListener()
    topic.subscribe(listener, {}, "historical")
    steps.run()
    assert listener.offsets(0) == list(range(100))
    assert listener.calls == 25  # four messages a chunk


class StallingListener(RecordingListener):
    """A listener whose client stops reading at its ``stall_after``-th delivery: as a
    subscriber does, it cancels its subscription inside the write, and subscribes again from
    its progress once its client reads again (:meth:`resume`)."""

    def __init__(self, stall_after: int) -> None:
        super().__init__()
        self.stall_after = stall_after
        self.subscription: Subscription | None = None

    def on_messages(self, messages: Sequence[KafkaMessage]) -> None:
        super().on_messages(messages)
        if self.calls == self.stall_after and self.subscription is not None:
            self.subscription.cancel()

    def resume(self, topic: TopicFeed) -> Subscription:
        self.subscription = topic.subscribe(self, {0: self.offsets(0)[-1] + 1}, "historical")
        return self.subscription


def test_a_replay_to_a_client_that_reads_nothing_stops_and_goes_on_from_there() -> None:
    topic, steps, _ = paced_feed()
    topic.on_fetched(large(0, 99))
    listener = StallingListener(stall_after=2)
    listener.subscription = topic.subscribe(listener, {}, "historical")
    steps.run()
    assert listener.offsets(0) == list(range(8))  # two chunks, then nothing more is read
    assert not steps.waiting and not topic.subscriptions

    listener.resume(topic)  # it reads again
    steps.run()
    assert listener.offsets(0) == list(range(100))  # the rest, in order, once each
    assert listener.live == [(0, 100)]


def test_a_stopped_replay_whose_history_the_cache_let_go_catches_up_from_the_broker() -> None:
    topic, steps, catch_ups = paced_feed(max_bytes=40 * (REPLAY_CHUNK_BYTES // 4 + 300))
    topic.on_fetched(large(0, 39))
    listener = StallingListener(stall_after=1)
    listener.subscription = topic.subscribe(listener, {}, "historical")
    steps.run()
    assert listener.offsets(0) == [0, 1, 2, 3]
    topic.on_fetched(large(40, 59))  # the cache lets offsets 0-19 go
    assert topic.partitions[0].cache.start_offset > 4

    listener.resume(topic)
    steps.run()
    assert catch_ups == [(0, 4)]  # from where it stopped, not from the cache's start
    assert listener.offsets(0) == [0, 1, 2, 3]


def test_the_feed_holds_a_place_until_its_cache_lets_that_offset_go() -> None:
    topic, _, _ = paced_feed(max_bytes=40 * (REPLAY_CHUNK_BYTES // 4 + 300))
    topic.on_fetched(large(0, 39))
    assert topic.holds({0: 4}) and topic.holds({0: 40}) and topic.holds({})
    assert not topic.holds({1: 0})  # a partition the topic does not have
    topic.on_fetched(large(40, 59))  # the cache lets the oldest go
    start = topic.partitions[0].cache.start_offset
    assert start > 4
    assert not topic.holds({0: 4}) and not topic.holds({0: start - 1})
    assert topic.holds({0: start})


def test_a_replay_from_scratch_whose_start_went_before_it_began_starts_at_the_oldest_held() -> None:
    topic, steps, catch_ups = paced_feed(max_bytes=40 * (REPLAY_CHUNK_BYTES // 4 + 300))
    topic.on_fetched(large(0, 39))
    listener = RecordingListener()
    topic.subscribe(listener, {}, "historical")  # its first chunk waits for the loop
    topic.on_fetched(large(40, 59))  # meanwhile the cache lets the oldest go
    start = topic.partitions[0].cache.start_offset
    assert start > 0
    steps.run()
    assert catch_ups == []  # nothing it asked for was let go: "the oldest held" moved on
    assert listener.offsets(0) == list(range(start, 60))
