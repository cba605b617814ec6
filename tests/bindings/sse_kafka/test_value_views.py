"""A topic's value view on the sse-kafka path, against an in-memory topic log that has views:
it makes the ``data:`` text, once per message per process, and leaves tombstones alone."""

from __future__ import annotations

from dataclasses import dataclass, field

from ssegate.bindings.sse_kafka.proxy import SseKafkaProxy, compile_route
from ssegate.config.model import Route
from ssegate.contract.exchange import Request
from ssegate.models.topics import ValueView
from ssegate.telemetry.metrics import Metrics

from .topic_log import TopicLog, WireSink


@dataclass
class ViewedTopicLog(TopicLog):
    """A topic log whose ``shouting`` topic shows values upper-cased, counting each call."""

    calls: list[bytes] = field(default_factory=list)

    def value_text(self, topic: str) -> ValueView | None:
        return self.shout if topic == "shouting" else None

    def shout(self, value: bytes) -> str:
        self.calls.append(value)
        if value == b"bad":
            raise ValueError("cannot show this value")
        return value.decode().upper()


def proxy(log: TopicLog, metrics: Metrics | None = None) -> SseKafkaProxy:
    config = Route(
        exit="cache",
        when=[{"path": "/{topic}"}],
        with_={"topic": "${params.topic}"},
        path="bindings.p.routes[0]",
    )
    route = compile_route(config, log, config.path)
    return SseKafkaProxy("north_sse_kafka_mapping", [route], metrics or Metrics())


def subscribe(p: SseKafkaProxy, path: str) -> WireSink:
    sink = WireSink()
    p.subscribe(Request("GET", "https", "localhost", path, {}), None, sink)
    return sink


def viewed_log() -> ViewedTopicLog:
    log = ViewedTopicLog()
    log.create("shouting", 1)
    log.create("plain", 1)
    return log


def test_the_view_makes_the_data_once_per_message_for_every_subscriber() -> None:
    log = viewed_log()
    p = proxy(log)
    sinks = [subscribe(p, "/shouting") for _ in range(20)]
    log.append("shouting", 0, b"k", b"hello")
    assert all([e.data for e in s.events()] == ["HELLO"] for s in sinks)
    assert log.calls == [b"hello"]


def test_a_topic_without_a_view_sends_its_value_as_utf8_text() -> None:
    log = viewed_log()
    sink = subscribe(proxy(log), "/plain")
    log.append("plain", 0, None, b"caf\xc3\xa9")
    assert [e.data for e in sink.events()] == ["café"]
    assert log.calls == []


def test_a_tombstone_is_a_delete_event_and_never_viewed() -> None:
    log = viewed_log()
    sink = subscribe(proxy(log), "/shouting")
    log.append("shouting", 0, b"k", None)
    assert [(e.type, e.data) for e in sink.events()] == [("delete", "aw==")]
    assert log.calls == []


def test_a_view_that_fails_is_counted_and_the_event_carries_the_utf8_text() -> None:
    log = viewed_log()
    metrics = Metrics()
    sink = subscribe(proxy(log, metrics), "/shouting")
    log.append("shouting", 0, None, b"bad")
    log.append("shouting", 0, None, b"good")
    assert [e.data for e in sink.events()] == ["bad", "GOOD"]
    failures = metrics.counter(
        "ssegate.sse_kafka.view_failures", "north_sse_kafka_mapping", topic="shouting"
    )
    assert failures == 1
