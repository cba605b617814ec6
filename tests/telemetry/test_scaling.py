"""The process's scaling gauges: open SSE streams over every sse server, and the process id."""

from __future__ import annotations

import os

from ssegate.telemetry import scaling
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.prometheus import render
from ssegate.telemetry.selection import MetricSelection


def test_open_streams_sum_every_sse_servers_active_streams_without_a_binding_label() -> None:
    metrics = Metrics()
    scaling.install(metrics)
    assert "ssegate_sse_streams_open 0\n" in render(metrics)
    metrics.gauge("stream.active.sent", "north_sse", 3)
    metrics.gauge("stream.active.sent", "south_sse", 2)
    metrics.gauge("http.active.requests", "north_http", 7)  # not streams
    assert "ssegate_sse_streams_open 5\n" in render(metrics)
    metrics.gauge("stream.active.sent", "north_sse", -3)
    assert metrics.gauge_value(scaling.STREAMS_OPEN) == 2.0


def test_the_scaling_gauges_export_whatever_telemetry_metrics_selects() -> None:
    metrics = Metrics()
    scaling.install(metrics)
    metrics.gauge("stream.active.sent", "north_sse", 4)
    selection = MetricSelection.of({"metrics": ["http.request.size"]}, {})
    text = render(metrics, selection)
    assert "stream_active_sent" not in text
    assert "ssegate_sse_streams_open 4\n" in text
    assert f"ssegate_process_pid {os.getpid()}\n" in text


def test_a_sampled_gauge_is_read_at_each_export_and_a_later_sampler_replaces_it() -> None:
    metrics = Metrics()
    reads = []

    def read() -> list[tuple[dict[str, str], float]]:
        reads.append(1)
        return [({"queue": "a"}, 2)]

    metrics.sample("ssegate.test.depth", read, "b")
    assert reads == []
    assert 'ssegate_test_depth{binding="b",queue="a"} 2\n' in render(metrics)
    assert len(reads) == 1
    metrics.sample("ssegate.test.depth", lambda: [({"queue": "a"}, 3.5)], "b")
    assert metrics.gauge_value("ssegate.test.depth", "b", queue="a") == 3.5
