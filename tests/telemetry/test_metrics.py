"""The metrics registry: counters, gauges and histograms by name and binding."""

from __future__ import annotations

from ssegate.telemetry.metrics import Metrics


def test_counters_add_up_per_binding_and_in_total() -> None:
    metrics = Metrics()
    metrics.inc("stream.opens.received", "a")
    metrics.inc("stream.opens.received", "a")
    metrics.inc("stream.opens.received", "b", 3)
    assert metrics.counter("stream.opens.received", "a") == 2
    assert metrics.counter("stream.opens.received", "b") == 3
    assert metrics.total("stream.opens.received") == 5
    assert metrics.counter("never") == 0


def test_gauges_move_both_ways() -> None:
    metrics = Metrics()
    metrics.gauge("http.active.requests", "h")
    metrics.gauge("http.active.requests", "h")
    metrics.gauge("http.active.requests", "h", -1)
    assert metrics.gauge_value("http.active.requests", "h") == 1


def test_histograms_count_values_into_buckets() -> None:
    metrics = Metrics()
    for value in (0.0005, 0.003, 0.003, 100.0, 1000.0):
        metrics.observe("http.duration", value, "h")
    kinds = {(kind, name): value for kind, name, _, value in metrics.items()}
    hist = kinds[("histogram", "http.duration")]
    assert not isinstance(hist, float)
    assert hist.count == 5
    assert hist.counts[0] == 1  # ≤ 1 ms
    assert hist.counts[1] == 2  # ≤ 5 ms
    assert hist.counts[-1] == 1  # over the last bucket
