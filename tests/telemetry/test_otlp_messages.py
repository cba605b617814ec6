"""Metrics and log events turned into OTLP requests: exact messages, no network."""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AGGREGATION_TEMPORALITY_CUMULATIVE, Metric

from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.otlp_messages import (
    LogEvent,
    LogRecordBuffer,
    log_record,
    logs_request,
    metrics_request,
    resource,
    severity_number,
)
from ssegate.telemetry.selection import MetricSelection

START, NOW = 1_000, 2_000


def attributes(pairs: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        kind = pair.value.WhichOneof("value")
        found[pair.key] = getattr(pair.value, kind) if kind else None
    return found


def exported(metrics: Metrics, selection: MetricSelection | None = None) -> dict[str, Metric]:
    request = metrics_request(
        metrics, resource({}, 7), start_ns=START, now_ns=NOW, selection=selection
    )
    (owner,) = request.resource_metrics
    (scope,) = owner.scope_metrics
    assert scope.scope.name == "ssegate"
    return {metric.name: metric for metric in scope.metrics}


def test_a_counter_is_a_monotonic_cumulative_sum_with_its_labels_as_attributes() -> None:
    metrics = Metrics()
    metrics.inc("stream.opens.received", "north_sse_server")
    metrics.inc("stream.opens.received", "north_sse_server")
    metrics.inc("stream.opens.received", "other")
    metric = exported(metrics)["stream.opens.received"]
    assert metric.WhichOneof("data") == "sum"
    assert metric.sum.is_monotonic
    assert metric.sum.aggregation_temporality == AGGREGATION_TEMPORALITY_CUMULATIVE
    points = [(attributes(p.attributes), p.as_double) for p in metric.sum.data_points]
    assert points == [({"binding": "north_sse_server"}, 2.0), ({"binding": "other"}, 1.0)]
    assert {(p.start_time_unix_nano, p.time_unix_nano) for p in metric.sum.data_points} == {
        (START, NOW)
    }


def test_a_gauge_is_a_gauge_and_extra_labels_ride_beside_the_binding() -> None:
    metrics = Metrics()
    metrics.gauge("stream.active.received", "north_sse_server", 3)
    metrics.gauge("ssegate.kafka.fanout.lag", "k", 0.5, topic="events")
    found = exported(metrics)
    (active,) = found["stream.active.received"].gauge.data_points
    assert active.as_double == 3.0
    (lag,) = found["ssegate.kafka.fanout.lag"].gauge.data_points
    assert attributes(lag.attributes) == {"binding": "k", "topic": "events"}


def test_a_histogram_carries_its_bounds_and_per_bucket_counts() -> None:
    metrics = Metrics()
    metrics.observe("http.duration", 0.002, "h", buckets=(0.001, 0.01))
    metrics.observe("http.duration", 0.5, "h", buckets=(0.001, 0.01))
    metric = exported(metrics)["http.duration"]
    assert metric.histogram.aggregation_temporality == AGGREGATION_TEMPORALITY_CUMULATIVE
    (point,) = metric.histogram.data_points
    assert list(point.explicit_bounds) == [0.001, 0.01]
    assert list(point.bucket_counts) == [0, 1, 1]
    assert (point.count, point.sum) == (2, 0.502)


def test_telemetry_metrics_choose_the_zilla_series_and_ssegates_own_always_go() -> None:
    metrics = Metrics()
    metrics.inc("stream.opens.received", "wanted")
    metrics.inc("stream.opens.received", "unwanted")
    metrics.inc("http.request.size", "wanted")
    metrics.inc("ssegate.tls.handshake.failures", "unwanted")
    selection = MetricSelection.of(
        {"metrics": ["stream.*"]}, {"wanted": {"metrics": ["stream.*"]}, "unwanted": {}}
    )
    found = exported(metrics, selection)
    assert sorted(found) == ["ssegate.tls.handshake.failures", "stream.opens.received"]
    (point,) = found["stream.opens.received"].sum.data_points
    assert attributes(point.attributes) == {"binding": "wanted"}


def test_the_resource_names_the_service_the_process_and_the_telemetry_attributes() -> None:
    plain = resource({"service.namespace": "example"}, 42)
    assert attributes(plain.attributes) == {
        "service.name": "ssegate",
        "service.namespace": "example",
        "process.pid": 42,
    }
    named = resource({"service.name": "north"}, 42)
    assert attributes(named.attributes)["service.name"] == "north"


def test_a_log_event_keeps_its_time_severity_line_name_and_binding() -> None:
    line = "sse.refused [north_sse_server] status=404 reason=no route"
    record = log_record(LogEvent(123, logging.WARNING, line))
    assert record.time_unix_nano == 123
    assert (record.severity_number, record.severity_text) == (13, "WARNING")
    assert record.body == AnyValue(string_value=line)
    assert record.event_name == "sse.refused"
    assert attributes(record.attributes) == {
        "event.name": "sse.refused",
        "binding": "north_sse_server",
    }


def test_a_log_event_without_a_binding_has_only_its_name() -> None:
    record = log_record(LogEvent(1, logging.INFO, "tcp.listen host=0.0.0.0 port=7114"))
    assert attributes(record.attributes) == {"event.name": "tcp.listen"}


def test_logging_levels_map_to_otlp_severity_numbers() -> None:
    levels = [logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL]
    assert [severity_number(level) for level in levels] == [5, 9, 13, 17, 21]


def test_logs_request_keeps_the_events_in_order_under_one_resource() -> None:
    events = [LogEvent(n, logging.INFO, f"e{n}") for n in range(3)]
    request = logs_request(events, resource({}, 1))
    (owner,) = request.resource_logs
    assert attributes(owner.resource.attributes)["process.pid"] == 1
    (scope,) = owner.scope_logs
    assert [r.body.string_value for r in scope.log_records] == ["e0", "e1", "e2"]


def test_the_buffer_holds_its_capacity_then_drops_and_counts() -> None:
    buffer = LogRecordBuffer(2)
    for n in range(5):
        buffer.append(LogEvent(n, logging.INFO, f"e{n}"))
    assert len(buffer) == 2
    assert [event.line for event in buffer.take()] == ["e0", "e1"]
    assert len(buffer) == 0
    assert buffer.take_dropped() == 3
    assert buffer.take_dropped() == 0
