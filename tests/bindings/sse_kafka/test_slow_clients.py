"""A subscriber too slow for its topic is closed by the sse server and stops being fed."""

from __future__ import annotations

from ssegate.bindings.sse.server import SseRoute, SseServer
from ssegate.bindings.sse_kafka.proxy import SseKafkaProxy, compile_route
from ssegate.config.model import Route
from ssegate.contract.exchange import Request
from ssegate.telemetry.metrics import Metrics

from .topic_log import StuckStream, TopicLog


def test_a_client_past_max_buffered_is_dropped_and_its_subscription_released() -> None:
    log = TopicLog()
    log.create("events", 1)
    metrics = Metrics()
    config = Route(exit="cache", when=[{"path": "/{topic}"}], path="r")
    proxy = SseKafkaProxy("mapping", [compile_route(config, log, "r")], metrics)
    server = SseServer("sse", [SseRoute(None, proxy)], metrics, keepalive=0, max_buffered=500)
    stuck, healthy = StuckStream(), StuckStream()
    for stream in (stuck, healthy):
        server.handle(Request("GET", "http", "localhost", "/events", {}), b"", stream)
    assert len(log.subscriptions) == 2
    healthy.body = b""  # this one keeps reading
    for _ in range(20):
        log.append("events", 0, None, b"x" * 40)
        healthy.body = b""
    assert stuck.was_reset
    assert not healthy.was_reset
    assert len(log.subscriptions) == 1
    assert proxy.stats.dropped == 1
    assert metrics.counter("ssegate.sse.slow_clients", "sse", reason="bytes") == 1
    assert metrics.counter("ssegate.sse_kafka.dropped_subscribers", "mapping") == 1
