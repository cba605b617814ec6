"""Live streams of one topic and shape, fed as one broadcast: who joins, what each stream gets,
and how the broadcast ends. The real topic feed (:class:`FeedSource`), proxy and subscribers on a
running event loop (joins happen in a loop callback), sinks that keep the wire."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop

from ssegate.bindings.kafka.fetch_events import Fetched
from ssegate.bindings.sse_kafka.event_id import decode_progress, encode_progress
from ssegate.bindings.sse_kafka.proxy import SseKafkaProxy, compile_route
from ssegate.bindings.sse_kafka.subscriber import TopicSubscriber
from ssegate.config.model import Route
from ssegate.contract.exchange import Request
from ssegate.kafka.topics import KafkaMessage
from ssegate.telemetry.metrics import Metrics

from .test_filtered_fanout import TOPIC, FeedSource
from .topic_log import WireSink


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), 10)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(bounded())


def proxy_of(source: FeedSource) -> SseKafkaProxy:
    config = Route(exit="cache", when=[{"path": "/{topic}"}], path="bindings.p.routes[0]")
    return SseKafkaProxy("p", [compile_route(config, source, config.path)], Metrics())


def open_stream(
    proxy: SseKafkaProxy, last_id: str | None = None, sink: WireSink | None = None
) -> tuple[WireSink, TopicSubscriber]:
    sink = sink or WireSink()
    request = Request("GET", "http", "localhost", f"/{TOPIC}", {})
    subscriber = proxy.subscribe(request, last_id, sink)
    assert isinstance(subscriber, TopicSubscriber)
    return sink, subscriber


async def settled(source: FeedSource) -> None:
    """Let the joins offered so far run (and whatever the feed scheduled)."""
    for _ in range(3):
        source.pump()
        await asyncio.sleep(0)


def expected(source: FeedSource, start: dict[int, int] | None = None) -> list[tuple[str, str]]:
    """Every message after ``start`` in the order produced, as ``(data, id)``; partitions are
    produced one batch at a time, so that order is each batch in turn."""
    return [(e.data, e.id) for e in source.events if e.offset >= (start or {}).get(e.partition, 0)]


class Recorded(FeedSource):
    """A :class:`FeedSource` that also keeps each produced message's data and id, and how many
    listeners each batch was handed to."""

    def __init__(self, partitions: int) -> None:
        super().__init__(partitions)
        self.events: list[Any] = []
        self.listeners_per_batch: list[int] = []

    def produce(self, partition: int, *records: tuple[bytes | None, dict[str, bytes]]) -> None:
        live = len(self.feed.partitions[partition].live)
        first = self.offsets[partition]
        super().produce(partition, *records)
        self.listeners_per_batch.append(live)
        progress = dict(self.offsets)
        for offset in range(first, self.offsets[partition]):
            at = {**progress, partition: offset + 1}
            moved = {p: o for p, o in at.items() if o > 0}
            self.events.append(
                _Event(f"p{partition}-{offset}", encode_progress(moved), partition, offset)
            )


class _Event:
    def __init__(self, data: str, id: str, partition: int, offset: int) -> None:
        self.data, self.id, self.partition, self.offset = data, id, partition, offset


def got(sink: WireSink) -> list[tuple[str, str]]:
    return [(e.data, e.id) for e in sink.events()]


def test_live_streams_of_one_shape_join_one_broadcast_and_a_batch_is_handed_over_once() -> None:
    async def scenario() -> None:
        source = Recorded(partitions=1)
        proxy = proxy_of(source)
        streams = [open_stream(proxy) for _ in range(50)]
        await settled(source)
        assert (len(proxy.broadcasts), proxy.broadcasts.members()) == (1, 50)
        [subscription] = source.feed.subscriptions
        assert subscription.streams == 50  # the cache server still counts every stream
        source.produce(0, (None, {}), (None, {}))
        source.produce(0, (None, {}))
        assert source.listeners_per_batch == [1, 1]
        for sink, _ in streams:
            assert got(sink) == expected(source)
        assert proxy.metrics.gauge_value("ssegate.sse_kafka.broadcast.streams", "p") == 50

    run(scenario)


def test_every_partition_is_followed_and_ids_carry_the_live_end_of_all() -> None:
    async def scenario() -> None:
        source = Recorded(partitions=3)
        proxy = proxy_of(source)
        streams = [open_stream(proxy) for _ in range(5)]
        await settled(source)
        assert proxy.broadcasts.members() == 5
        for partition in (0, 2, 1, 0):
            source.produce(partition, (None, {}), (None, {}))
        events = got(streams[0][0])
        assert [data for data, _ in events] == [e.data for e in source.events]
        assert decode_progress(events[-1][1]) == {0: 4, 1: 2, 2: 2}
        assert all(got(sink) == events for sink, _ in streams)

    run(scenario)


def test_a_stream_resuming_behind_replays_alone_then_joins_with_no_gap_or_repeat() -> None:
    async def scenario() -> None:
        source = Recorded(partitions=1)
        proxy = proxy_of(source)
        first, _ = open_stream(proxy)
        await settled(source)
        for _ in range(10):
            source.produce(0, (None, {}))
        late, _ = open_stream(proxy, encode_progress({0: 3}))
        await settled(source)
        assert proxy.broadcasts.members() == 2
        source.produce(0, (None, {}), (None, {}))
        assert got(late) == expected(source, {0: 3})
        assert got(first) == expected(source)

    run(scenario)


def test_a_member_keep_alive_carries_the_broadcast_progress_once_it_moved() -> None:
    async def scenario() -> None:
        source = Recorded(partitions=1)
        proxy = proxy_of(source)
        sink, member = open_stream(proxy)
        await settled(source)
        source.produce(0, (None, {}))
        assert member.resume_id() is None  # its last id is the broadcast's progress
        # offsets 1-2 were invalid and passed over: the live end moves without an event
        message = KafkaMessage(TOPIC, 0, 3, None, b"p0-3")
        source.feed.on_fetched(Fetched(TOPIC, 0, [], 3, []))
        assert member.resume_id() == encode_progress({0: 3})
        assert member.resume_id() is None
        source.feed.on_fetched(Fetched(TOPIC, 0, [message], 4, []))
        assert member.resume_id() is None
        assert [e.id for e in sink.events()][-1] == encode_progress({0: 4})

    run(scenario)


def test_the_last_stream_leaving_ends_the_broadcast_and_its_subscription() -> None:
    async def scenario() -> None:
        source = Recorded(partitions=1)
        proxy = proxy_of(source)
        streams = [open_stream(proxy) for _ in range(3)]
        await settled(source)
        [subscription] = source.feed.subscriptions
        streams[0][1].cancel()
        assert subscription.streams == 2
        source.produce(0, (None, {}))
        assert not streams[0][0].wire
        for _, subscriber in streams[1:]:
            subscriber.cancel()
        assert (len(proxy.broadcasts), list(source.feed.subscriptions)) == (0, [])
        assert proxy.metrics.gauge_value("ssegate.sse_kafka.broadcast.streams", "p") == 0

    run(scenario)


def test_a_member_whose_client_stops_reading_leaves_and_goes_on_from_the_cache() -> None:
    async def scenario() -> None:
        source = Recorded(partitions=1)
        proxy = proxy_of(source)
        streams = [open_stream(proxy) for _ in range(3)]
        await settled(source)
        [subscription] = source.feed.subscriptions
        stopped_sink, stopped = streams[0]
        stopped.pace(True)  # it leaves the broadcast; nothing is kept for it
        assert (subscription.streams, proxy.broadcasts.members()) == (2, 2)
        source.produce(0, (None, {}), (None, {}))
        assert got(stopped_sink) == []
        assert all(got(sink) == expected(source) for sink, _ in streams[1:])
        stopped.pace(False)  # from where it stopped: the cache replays what it missed
        await settled(source)
        assert got(stopped_sink) == expected(source)
        assert proxy.broadcasts.members() == 3  # live again, in step: back in its broadcast
        source.produce(0, (None, {}))
        assert all(got(sink) == expected(source) for sink, _ in streams)  # once each, in order

    run(scenario)


def test_a_stream_alone_whose_client_stops_reading_goes_on_from_where_it_stopped() -> None:
    async def scenario() -> None:
        source = Recorded(partitions=2)
        proxy = proxy_of(source)
        sink, subscriber = open_stream(proxy)  # not yet joined: no loop turn since
        source.produce(0, (None, {}))
        subscriber.pace(True)
        assert list(source.feed.subscriptions) == []  # it stops: no subscriber is carried
        source.produce(1, (None, {}))
        source.produce(0, (None, {}))
        assert len(got(sink)) == 1
        subscriber.pace(False)
        await settled(source)
        events = sink.events()
        # Each partition in order, each message once; partitions replay one after the other.
        assert sorted(e.data for e in events) == ["p0-0", "p0-1", "p1-0"]
        assert [e.data for e in events if e.data.startswith("p0")] == ["p0-0", "p0-1"]
        assert decode_progress(events[-1].id) == {0: 2, 1: 1}
        subscriber.pace(False)  # told twice: nothing more
        await settled(source)
        assert len(sink.events()) == 3

    run(scenario)


def test_a_stopped_stream_is_behind_only_once_the_cache_lets_its_place_go() -> None:
    async def scenario() -> None:
        source = Recorded(partitions=1)
        proxy = proxy_of(source)
        _, subscriber = open_stream(proxy)
        source.produce(0, (None, {}), (None, {}))
        subscriber.pace(True)  # stopped at offset 2
        source.produce(0, (None, {}))
        assert subscriber.behind_since(5.0, 15.0) is None  # the cache holds offset 2 on
        source.feed.partitions[0].cache.max_bytes = 0  # the next append lets all but it go
        source.produce(0, (None, {}))
        assert source.feed.partitions[0].cache.start_offset > 2
        assert subscriber.behind_since(5.0, 25.0) == 25.0  # found behind now
        assert subscriber.behind_since(5.0, 35.0) == 25.0  # and behind since then
        subscriber.pace(False)  # it reads a little (from the broker) and stops again, behind
        subscriber.pace(True)
        assert subscriber.behind_since(40.0, 45.0) == 25.0  # behind since it was first found so
        subscriber.pace(False)
        assert subscriber.behind_since(5.0, 55.0) == 5.0  # not stopped: nothing kept for it

    run(scenario)


def test_streams_of_another_shape_form_a_broadcast_of_their_own() -> None:
    class Stamped(WireSink):
        timestamps = True

    async def scenario() -> None:
        source = Recorded(partitions=1)
        proxy = proxy_of(source)
        plain = [open_stream(proxy) for _ in range(2)]
        stamped = [open_stream(proxy, sink=Stamped()) for _ in range(2)]
        await settled(source)
        assert (len(proxy.broadcasts), proxy.broadcasts.members()) == (2, 4)
        message = KafkaMessage(TOPIC, 0, 0, None, b"v", timestamp_ms=0x1000)
        source.feed.on_fetched(Fetched(TOPIC, 0, [message], 1, []))
        assert all(sink.wire.startswith(b"id:") for sink, _ in plain)
        assert all(sink.wire.startswith(b"timestamp:0x1000\nid:") for sink, _ in stamped)

    run(scenario)


def test_without_a_running_loop_every_stream_stays_alone() -> None:
    source = Recorded(partitions=1)
    proxy = proxy_of(source)
    streams = [open_stream(proxy) for _ in range(3)]
    source.produce(0, (None, {}))
    assert len(proxy.broadcasts) == 0
    assert source.listeners_per_batch == [3]
    assert all(got(sink) == expected(source) for sink, _ in streams)


def test_a_stream_out_of_step_with_the_broadcast_stays_alone_and_misses_nothing() -> None:
    async def scenario() -> None:
        source = Recorded(partitions=2)
        proxy = proxy_of(source)
        fresh, _ = open_stream(proxy)
        await settled(source)
        # its id names both partitions at offset 0: the same position, another progress token
        named, subscriber = open_stream(proxy, encode_progress({0: 0, 1: 0}))
        await settled(source)
        assert proxy.broadcasts.members() == 1
        assert subscriber.topic_subscription is not None  # still fed by the topic itself
        source.produce(1, (None, {}))
        source.produce(0, (None, {}), (None, {}))
        assert [e.data for e in named.events()] == [e.data for e in fresh.events()]
        assert len(fresh.events()) == 3

    run(scenario)
