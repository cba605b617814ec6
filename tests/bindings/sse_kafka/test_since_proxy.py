"""The sse-kafka proxy with ``?since=``: against an in-memory topic log whose time index answers
what the test tells it (the broker's own answers are asserted end to end in
tests/test_sse_kafka_since.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ssegate.bindings.sse_kafka.event_id import decode_progress, encode_progress
from ssegate.bindings.sse_kafka.proxy import SseKafkaProxy, compile_route
from ssegate.config.model import Route
from ssegate.contract.exchange import Request
from ssegate.kafka.times import PartitionTime, TimeLookupFailed
from ssegate.kafka.topics import UnknownTopic
from ssegate.telemetry.metrics import Metrics

from .topic_log import TopicLog, WireSink

T = 1_795_860_000_000


@dataclass
class TimedLog(TopicLog):
    """A topic log whose time index answers ``answers`` (or raises ``failure``)."""

    answers: dict[int, PartitionTime] = field(default_factory=dict)
    failure: Exception | None = None
    asked: list[tuple[str, int]] = field(default_factory=list)
    answered: asyncio.Event = field(default_factory=asyncio.Event)

    async def offsets_for_time(self, topic: str, time_ms: int) -> Mapping[int, PartitionTime]:
        self.asked.append((topic, time_ms))
        await self.answered.wait()
        if self.failure is not None:
            raise self.failure
        return self.answers


def proxy(log: TimedLog) -> SseKafkaProxy:
    config = Route(
        exit="cache",
        when=[{"path": "/{topic}"}],
        with_={"topic": "${params.topic}"},
        path="bindings.p.routes[0]",
    )
    return SseKafkaProxy("north_sse_kafka_mapping", [compile_route(config, log, config.path)],
                         Metrics())  # fmt: skip


def timed_log() -> TimedLog:
    log = TimedLog()
    log.create("events", 2)
    for n in range(4):
        log.append("events", 0, None, f"p0-{n}".encode())
        log.append("events", 1, None, f"p1-{n}".encode())
    return log


async def subscribe(p: SseKafkaProxy, target: str, last_id: str | None = None) -> WireSink:
    sink = WireSink()
    p.subscribe(Request("GET", "https", "localhost", target, {}), last_id, sink)
    await asyncio.sleep(0)
    return sink


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_since_starts_each_partition_where_the_time_index_says() -> None:
    async def scenario() -> tuple[TimedLog, WireSink]:
        log = timed_log()
        log.answers = {0: PartitionTime(2, 0, -1), 1: PartitionTime(-1, -1, 4)}
        sink = await subscribe(proxy(log), f"/events?since={T}")
        assert not sink.opened  # the headers wait for the lookup
        log.answered.set()
        await settle()
        return log, sink

    log, sink = asyncio.run(scenario())
    assert log.asked == [("events", T)]
    assert log.starts == [{0: 2, 1: 4}]
    assert [e.data for e in sink.events()] == ["p0-2", "p0-3"]
    assert decode_progress(sink.events()[-1].id) == {0: 4, 1: 4}


def test_a_last_event_id_wins_over_since() -> None:
    async def scenario() -> tuple[TimedLog, WireSink]:
        log = timed_log()
        sink = await subscribe(proxy(log), f"/events?since={T}", encode_progress({0: 3, 1: 3}))
        return log, sink

    log, sink = asyncio.run(scenario())
    assert log.asked == []
    assert log.starts == [{0: 3, 1: 3}]
    assert [e.data for e in sink.events()] == ["p0-3", "p1-3"]


def test_a_bad_since_is_a_400_with_the_reason_even_with_a_last_event_id() -> None:
    async def scenario() -> tuple[SseKafkaProxy, WireSink, WireSink]:
        p = proxy(timed_log())
        plain = await subscribe(p, "/events?since=yesterday")
        resumed = await subscribe(p, f"/events?since=-1&since={T}", encode_progress({0: 1}))
        return p, plain, resumed

    p, plain, resumed = asyncio.run(scenario())
    assert plain.failed is not None and plain.failed[0] == 400
    assert plain.failed[1].startswith("since: 'yesterday' is neither epoch milliseconds")
    assert resumed.failed == (400, "since: given 2 times; give it once")
    assert p.metrics.counter("ssegate.sse_kafka.bad_since", p.name) == 2


def test_a_time_index_that_does_not_answer_is_a_503_with_the_reason() -> None:
    async def scenario() -> tuple[SseKafkaProxy, WireSink]:
        log = timed_log()
        log.failure = TimeLookupFailed("the broker did not answer the time lookup within 5 s")
        p = proxy(log)
        sink = await subscribe(p, f"/events?since={T}")
        log.answered.set()
        await settle()
        return p, sink

    p, sink = asyncio.run(scenario())
    assert sink.failed == (503, "since: the broker did not answer the time lookup within 5 s")
    assert p.metrics.counter("ssegate.sse_kafka.since_lookups_failed", p.name) == 1


def test_a_topic_the_time_index_does_not_know_is_a_404() -> None:
    async def scenario() -> WireSink:
        log = timed_log()
        log.failure = UnknownTopic("events")
        sink = await subscribe(proxy(log), f"/events?since={T}")
        log.answered.set()
        await settle()
        return sink

    assert asyncio.run(scenario()).failed == (404, "topic 'events' does not exist")


def test_a_time_before_retention_is_said_with_a_reset_event_before_the_records() -> None:
    async def scenario() -> WireSink:
        log = timed_log()
        log.answers = {0: PartitionTime(2, 2, -1), 1: PartitionTime(-1, -1, 4)}
        sink = await subscribe(proxy(log), f"/events?since={T}")
        log.answered.set()
        await settle()
        return sink

    events = asyncio.run(scenario()).events()
    assert events[0].type == "reset"
    assert json.loads(events[0].data) == {"partition": 0, "since": T, "earliest": 2}
    assert decode_progress(events[0].id) == {0: 2, 1: 4}
    assert [e.data for e in events[1:]] == ["p0-2", "p0-3"]


def test_a_time_in_the_future_starts_live_without_a_lookup() -> None:
    async def scenario() -> tuple[TimedLog, WireSink]:
        log = timed_log()
        future = int(time.time() * 1000) + 3_600_000
        sink = await subscribe(proxy(log), f"/events?since={future}")
        log.append("events", 1, None, b"new")
        return log, sink

    log, sink = asyncio.run(scenario())
    assert log.asked == []
    assert [e.data for e in sink.events()] == ["new"]


def test_a_stream_closed_during_the_lookup_never_subscribes() -> None:
    async def scenario() -> TimedLog:
        log = timed_log()
        sink = WireSink()
        subscription: Any = proxy(log).subscribe(
            Request("GET", "https", "localhost", f"/events?since={T}", {}), None, sink
        )
        await asyncio.sleep(0)
        subscription.cancel()
        log.answered.set()
        await settle()
        return log

    log = asyncio.run(scenario())
    assert log.asked == [("events", T)]
    assert log.starts == []
