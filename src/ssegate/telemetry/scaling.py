"""Per-process signals an autoscaler reads: open SSE streams, and which process answered.

These extend :mod:`ssegate.telemetry.metrics` with sampled gauges (:meth:`Metrics.sample`):
read at each export, never kept up to date per event. Both carry no ``binding`` label: they
describe the process, so a HorizontalPodAutoscaler's Pods metric sums them per pod without
knowing the config (docs/scale-out.md, "Autoscaling").

- ``ssegate.sse.streams.open`` (streams): SSE responses this process has open downstream, over
  every ``sse`` server binding: the sum of Zilla's ``stream.active.sent``, which an sse server
  moves up when it sends a stream's ``200`` and down when the stream ends, fails or is dropped.
  An HTTP/2 connection carrying three streams counts three; a request refused before its
  stream opened (404, 405, 401, a bad ``last-event-id``) or a plain HTTP request counts none.
  Unlike ``stream.active.sent`` it is exported whatever ``telemetry.metrics`` selects.
- ``ssegate.process.pid``: the process id of the worker that answered. Under ``start --workers
  N`` the workers share the exporter's port and the kernel hands each scrape connection to one
  of them; every series of one scrape is that worker's, and this says which.

The Kafka cache server adds its own (fan-out backlog, per-partition lag:
:mod:`ssegate.bindings.kafka.partition_lag`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from ssegate.telemetry.metrics import Metrics

STREAMS_OPEN = "ssegate.sse.streams.open"
PROCESS_PID = "ssegate.process.pid"
ACTIVE_STREAMS = "stream.active.sent"
"""Zilla's gauge of open downstream SSE streams, kept per sse server binding."""


def install(metrics: Metrics) -> None:
    """Register the process's scaling gauges with ``metrics``."""

    def streams_open() -> Iterable[tuple[Mapping[str, str], float]]:
        return (({}, float(metrics.gauge_total(ACTIVE_STREAMS))),)

    def process_pid() -> Iterable[tuple[Mapping[str, str], float]]:
        return (({}, float(os.getpid())),)

    metrics.sample(STREAMS_OPEN, streams_open)
    metrics.sample(PROCESS_PID, process_pid)
