"""Filtered streams on the real topic feed: routed by the interest index, resumed exactly.

The sse-kafka proxy subscribes through :class:`FeedSource`, the Kafka cache's own
:class:`~ssegate.bindings.kafka.topic_feed.TopicFeed` driven with fetched batches by hand (its
fetch thread is the only part left out), and writes into :class:`WireSink`\\ s, read back
with the real SSE parser.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ssegate.bindings.kafka.fetch_events import Fetched
from ssegate.bindings.kafka.topic_feed import FeedHooks, TopicFeed
from ssegate.bindings.sse_kafka.event_id import decode_progress, encode_progress
from ssegate.bindings.sse_kafka.proxy import SseKafkaProxy, compile_route
from ssegate.config.model import Route
from ssegate.contract.exchange import Request
from ssegate.kafka.topics import DefaultOffset, KafkaMessage, TopicListener, TopicSubscription
from ssegate.sse_codec.parser import SseEvent, SseIdOnly
from ssegate.telemetry.metrics import Metrics

from .topic_log import WireSink

TOPIC = "events"


@dataclass
class FeedSource:
    """A TopicSource over one in-process TopicFeed; :meth:`pump` runs what the feed scheduled."""

    partitions: int
    scheduled: list[Callable[[], None]] = field(default_factory=list)
    offsets: dict[int, int] = field(default_factory=dict)
    log: dict[int, list[KafkaMessage]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        hooks = FeedHooks(
            schedule=self.scheduled.append,
            catch_up=lambda *args: None,
            end_catch_up=lambda *args: None,
            now=lambda: 0.0,
            on_fetched=lambda *args: None,
            subscribers_changed=lambda *args: None,
        )
        self.feed = TopicFeed(TOPIC, hooks, max_bytes=1 << 30, max_age=0)
        starts = dict.fromkeys(range(self.partitions), 0)
        self.feed.on_started(starts, starts, compacted=False)
        self.offsets = dict(starts)
        self.log = {p: [] for p in range(self.partitions)}

    def subscribe(
        self,
        topic: str,
        start: Mapping[int, int],
        listener: TopicListener,
        *,
        default: DefaultOffset | None = None,
    ) -> TopicSubscription:
        return self.feed.subscribe(listener, start, default or "historical")

    def holds(self, topic: str, start: Mapping[int, int]) -> bool:
        return self.feed.holds(start)

    def value_text(self, topic: str) -> None:
        return None

    def produce(self, partition: int, *records: tuple[bytes | None, dict[str, bytes]]) -> None:
        """One fetched batch of ``records`` (key, headers) on ``partition``."""
        messages = []
        for key, headers in records:
            offset = self.offsets[partition]
            self.offsets[partition] = offset + 1
            value = f"p{partition}-{offset}".encode()
            messages.append(
                KafkaMessage(TOPIC, partition, offset, key, value, tuple(headers.items()))
            )
        self.log[partition].extend(messages)
        self.feed.on_fetched(Fetched(TOPIC, partition, messages, self.offsets[partition], []))
        self.pump()

    def pump(self) -> None:
        while self.scheduled:
            self.scheduled.pop(0)()


def gateway(source: FeedSource, filters: list[dict[str, Any]]) -> SseKafkaProxy:
    config = Route(
        exit="cache",
        when=[{"path": "/events/{id}"}],
        with_={"topic": TOPIC, "filters": filters},
        path="bindings.p.routes[0]",
    )
    return SseKafkaProxy("p", [compile_route(config, source, config.path)], Metrics())


def open_stream(
    proxy: SseKafkaProxy, path: str, last_id: str | None = None
) -> tuple[WireSink, Any]:
    sink = WireSink()
    request = Request("GET", "https", "localhost", path, {}, identities={})
    subscription = proxy.subscribe(request, last_id, sink)
    return sink, subscription


KEY_FILTER = [{"key": "${params.id}"}]


def test_a_batch_is_written_only_to_the_streams_whose_key_it_carries() -> None:
    source = FeedSource(partitions=1)
    proxy = gateway(source, KEY_FILTER)
    streams = [open_stream(proxy, f"/events/k{n}")[0] for n in range(2_000)]
    source.produce(0, *[(f"k{n % 50}".encode(), {}) for n in range(100)], (b"k1999", {}))
    got = [len(sink.events()) for sink in streams]
    assert got[:50] == [2] * 50 and got[1999] == 1
    assert sum(got) == 101
    assert all(not sink.wire for sink in streams[50:1999])


def test_an_event_id_carries_the_live_end_of_the_partitions_it_passed_over() -> None:
    source = FeedSource(partitions=2)
    proxy = gateway(source, KEY_FILTER)
    sink, _ = open_stream(proxy, "/events/mine")
    source.produce(1, (b"other", {}), (b"other", {}))
    source.produce(0, (b"other", {}), (b"mine", {}), (b"other", {}))
    [event] = sink.events()
    assert decode_progress(event.id) == {0: 2, 1: 2}


def test_the_keep_alive_carries_the_resume_point_once_per_move() -> None:
    source = FeedSource(partitions=1)
    proxy = gateway(source, KEY_FILTER)
    sink, subscription = open_stream(proxy, "/events/mine")
    assert subscription.resume_id() is None  # nothing passed over yet
    source.produce(0, (b"other", {}), (b"other", {}))
    assert subscription.resume_id() == encode_progress({0: 2})
    assert subscription.resume_id() is None  # unchanged since the last id handed out
    source.produce(0, (b"mine", {}))
    assert [e.id for e in sink.events()] == [encode_progress({0: 3})]
    assert subscription.resume_id() is None


def test_header_filters_are_routed_like_key_filters() -> None:
    source = FeedSource(partitions=1)
    proxy = gateway(source, [{"headers": {"tenant": "${params.id}"}}])
    acme, _ = open_stream(proxy, "/events/acme")
    globex, _ = open_stream(proxy, "/events/globex")
    source.produce(
        0, (None, {"tenant": b"acme"}), (None, {"tenant": b"globex"}), (None, {"tenant": b"acme"})
    )
    assert [e.data for e in acme.events()] == ["p0-0", "p0-2"]
    assert [e.data for e in globex.events()] == ["p0-1"]


def test_an_and_filter_is_offered_its_key_and_still_checks_its_headers() -> None:
    source = FeedSource(partitions=1)
    proxy = gateway(source, [{"key": "${params.id}", "headers": {"tenant": "acme"}}])
    sink, _ = open_stream(proxy, "/events/k")
    source.produce(0, (b"k", {"tenant": b"globex"}), (b"k", {"tenant": b"acme"}))
    [event] = sink.events()
    assert (event.data, decode_progress(event.id)) == ("p0-1", {0: 2})


def test_opening_a_filtered_stream_replays_only_what_it_wants_from_the_cache() -> None:
    source = FeedSource(partitions=1)
    proxy = gateway(source, KEY_FILTER)
    source.produce(0, *[(f"k{n % 100}".encode(), {}) for n in range(1_000)])
    sink, subscription = open_stream(proxy, "/events/k7")
    source.pump()
    assert [e.data for e in sink.events()] == [f"p0-{n}" for n in range(7, 1000, 100)]
    source.produce(0, (b"x", {}))
    assert subscription.resume_id() == encode_progress({0: 1001})


def test_filtered_streams_resume_exactly_from_event_and_keep_alive_ids() -> None:
    """Random batches over three partitions; streams drop and reconnect at random with the
    last id they hold (from an event or a keep-alive). Each stream gets every message of its
    key once, in order per partition."""
    rng = random.Random(7)
    source = FeedSource(partitions=3)
    proxy = gateway(source, KEY_FILTER)
    keys = [f"k{n}".encode() for n in range(20)]
    streams: dict[bytes, list[Any]] = {}  # key → [sink, subscription, delivered, last id]
    for key in keys:
        sink, subscription = open_stream(proxy, f"/events/{key.decode()}")
        streams[key] = [sink, subscription, [], None]
    for _ in range(300):
        partition = rng.randrange(3)
        batch = [(rng.choice(keys), {}) for _ in range(rng.randrange(1, 8))]
        source.produce(partition, *batch)
        key = rng.choice(keys)
        sink, subscription, delivered, last_id = streams[key]
        if rng.random() < 0.5:
            keep_alive = subscription.resume_id()
            if keep_alive is not None:
                sink.wire += f"id:{keep_alive}\n\n".encode()
        if rng.random() < 0.3:
            parsed = sink.parsed()
            delivered.extend(e.data for e in parsed if isinstance(e, SseEvent))
            ids = [e.id for e in parsed if isinstance(e, (SseEvent, SseIdOnly))]
            last_id = ids[-1] if ids else last_id  # what an EventSource sends back
            subscription.cancel()
            sink, subscription = open_stream(proxy, f"/events/{key.decode()}", last_id)
            source.pump()
            streams[key] = [sink, subscription, delivered, last_id]
    for key, (sink, _, delivered, _) in streams.items():
        delivered.extend(e.data for e in sink.events())
        owed = [
            m.value.decode()
            for p in range(3)
            for m in source.log[p]
            if m.key == key and m.value is not None
        ]
        assert sorted(delivered) == sorted(owed), key  # none lost, none twice
        for p in range(3):
            mine = [v for v in delivered if v.startswith(f"p{p}-")]
            assert mine == [v for v in owed if v.startswith(f"p{p}-")]  # in order
