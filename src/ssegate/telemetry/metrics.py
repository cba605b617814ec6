"""Counters, gauges and histograms, keyed by metric name and binding.

Zilla's names are used where Zilla has one (``stream.opens.received``, ``http.duration``);
ssegate's own carry the ``ssegate.`` prefix. Recording is a dict lookup and an add: cheap enough
for the hot path: the series key of a call without extra labels is built once and cached.
Exporters read :meth:`Metrics.items`.

A gauge whose value is cheaper to read than to keep up to date (a queue's length, a lag) is
*sampled* instead: :meth:`Metrics.sample` registers a function that :meth:`Metrics.items` calls
once per export (a scrape, an OTLP post) for that gauge's series; nothing runs per event.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

Labels = tuple[tuple[str, str], ...]
Sampler = Callable[[], Iterable[tuple[Mapping[str, str], float]]]
"""What a sampled gauge reads when exported: ``(labels, value)`` for each of its series."""

# Histogram buckets in seconds (durations) or bytes (sizes): a handful, log-spaced.
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 300.0)
SIZE_BUCKETS = (64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0)
# Seconds a live event has waited: finer around the 50 ms a live stream aims for.
LAG_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 5.0, 30.0, 300.0)


@dataclass(slots=True)
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1


class Metrics:
    """The metrics of one process."""

    def __init__(self) -> None:
        self.counters: dict[tuple[str, Labels], float] = {}
        self.gauges: dict[tuple[str, Labels], float] = {}
        self.histograms: dict[tuple[str, Labels], Histogram] = {}
        self._keys: dict[tuple[str, str], tuple[str, Labels]] = {}
        """``(name, binding)`` → series key, for the calls without extra labels (the hot path)."""
        self._samplers: dict[tuple[str, str], Sampler] = {}
        """``(name, binding)`` → the function read for that sampled gauge's series."""

    def sample(self, name: str, read: Sampler, binding: str = "") -> None:
        """Gauge ``name`` (of ``binding``) is read from ``read`` at each export; a later call
        for the same name and binding replaces the earlier one."""
        self._samplers[(name, binding)] = read

    def sampled(self) -> dict[tuple[str, Labels], float]:
        """Every sampled gauge series, read now."""
        found: dict[tuple[str, Labels], float] = {}
        for (name, binding), read in list(self._samplers.items()):
            for labels, value in read():
                found[(name, _labels(binding, dict(labels)))] = float(value)
        return found

    def _key(self, name: str, binding: str, labels: dict[str, str]) -> tuple[str, Labels]:
        if labels:
            return (name, _labels(binding, labels))
        key = self._keys.get((name, binding))
        if key is None:
            key = self._keys[(name, binding)] = (name, _labels(binding, labels))
        return key

    def inc(self, name: str, binding: str = "", value: float = 1.0, **labels: str) -> None:
        key = self._keys.get((name, binding)) if not labels else None
        if key is None:
            key = self._key(name, binding, labels)
        counters = self.counters
        counters[key] = counters.get(key, 0.0) + value

    def gauge(self, name: str, binding: str = "", delta: float = 1.0, **labels: str) -> None:
        """Move gauge ``name`` by ``delta`` (``-1`` when a stream closes)."""
        key = self._keys.get((name, binding)) if not labels else None
        if key is None:
            key = self._key(name, binding, labels)
        self.gauges[key] = self.gauges.get(key, 0.0) + delta

    def observe(
        self,
        name: str,
        value: float,
        binding: str = "",
        buckets: tuple[float, ...] = DURATION_BUCKETS,
        **labels: str,
    ) -> None:
        key = self._keys.get((name, binding)) if not labels else None
        if key is None:
            key = self._key(name, binding, labels)
        hist = self.histograms.get(key)
        if hist is None:
            hist = self.histograms[key] = Histogram(buckets)
        hist.observe(value)

    def counter(self, name: str, binding: str = "", **labels: str) -> float:
        """The current value of a counter (0 when never incremented)."""
        return self.counters.get((name, _labels(binding, labels)), 0.0)

    def gauge_value(self, name: str, binding: str = "", **labels: str) -> float:
        """The current value of a gauge, kept or sampled (0 when it has no such series)."""
        key = (name, _labels(binding, labels))
        if key in self.gauges:
            return self.gauges[key]
        return self.sampled().get(key, 0.0) if self._samplers else 0.0

    def total(self, name: str) -> float:
        """A counter summed over every binding and label."""
        return sum(v for (n, _), v in self.counters.items() if n == name)

    def gauge_total(self, name: str) -> float:
        """A gauge summed over every binding and label."""
        return sum(v for (n, _), v in self.gauges.items() if n == name)

    def items(self) -> Iterator[tuple[str, str, Labels, float | Histogram]]:
        """``(kind, name, labels, value)`` for every series; kind is counter, gauge, histogram."""
        for (name, labels), value in sorted(self.counters.items()):
            yield "counter", name, labels, value
        gauges = {**self.gauges, **self.sampled()} if self._samplers else self.gauges
        for (name, labels), value in sorted(gauges.items()):
            yield "gauge", name, labels, value
        for (name, labels), hist in sorted(self.histograms.items(), key=lambda kv: kv[0]):
            yield "histogram", name, labels, hist


def _labels(binding: str, labels: dict[str, str]) -> Labels:
    if not binding and not labels:
        return ()
    items = [("binding", binding)] if binding else []
    items.extend(sorted(labels.items()))
    return tuple(items)
