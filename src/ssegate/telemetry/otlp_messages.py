"""The ``otlp`` exporter's pure part: metrics and log events turned into OTLP protobuf requests.

:func:`metrics_request` reads a :class:`~ssegate.telemetry.metrics.Metrics` snapshot into an
``ExportMetricsServiceRequest``: each counter a monotonic cumulative ``sum``, each gauge a
``gauge``, each histogram a cumulative explicit-bucket ``histogram``; a metric keeps its Zilla
or ssegate name (``stream.opens.received``, ``http.duration``), its labels (``binding`` and the
rest) become the data point's attributes, and the config's ``telemetry.metrics`` choose what is
sent exactly as they choose what the ``prometheus`` exporter exposes
(:mod:`ssegate.telemetry.selection`).

:class:`LogRecordBuffer` (an :class:`~.export_buffer.ExportBuffer`) holds the log events
waiting for the next export, at most ``capacity`` of them: one more is dropped and counted, so
a collector that is down costs a bounded amount of memory. :func:`logs_request` turns what it
held into an ``ExportLogsServiceRequest``: each
event a log record with its severity, its line as the body, and the event's name (``event_name``
and the ``event.name`` attribute) and ``binding`` as attributes.

Both requests carry one resource: the config's ``telemetry.attributes``, ``service.name``
(``ssegate`` unless the attributes name one) and ``process.pid``, so the series of several
worker processes stay apart.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    Gauge,
    HistogramDataPoint,
    Metric,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import Histogram as OtlpHistogram
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from ssegate import __version__
from ssegate.telemetry.export_buffer import ExportBuffer
from ssegate.telemetry.metrics import Histogram, Labels, Metrics
from ssegate.telemetry.selection import MetricSelection

SCOPE = InstrumentationScope(name="ssegate", version=__version__)

_SEVERITY = ((logging.ERROR + 10, 21), (logging.ERROR, 17), (logging.WARNING, 13))
"""``(lowest logging level, OTLP severity number)``, highest first: FATAL, ERROR, WARN."""

_EVENT_LINE = re.compile(r"(?P<name>\S+)(?: \[(?P<binding>[^\]]*)\])?")
"""How :func:`ssegate.telemetry.log.event` writes an event's line: its name, then
`` [binding]`` when it has one, then its fields."""


def resource(attributes: Mapping[str, str], pid: int) -> Resource:
    """The resource every request names: ``attributes``, ``service.name``, ``process.pid``."""
    merged: dict[str, str | int] = {"service.name": "ssegate", **attributes, "process.pid": pid}
    return Resource(attributes=[_attribute(key, value) for key, value in merged.items()])


def _attribute(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _attributes(labels: Labels) -> list[KeyValue]:
    return [_attribute(key, value) for key, value in labels]


def metrics_request(
    metrics: Metrics,
    owner: Resource,
    *,
    start_ns: int,
    now_ns: int,
    selection: MetricSelection | None = None,
) -> ExportMetricsServiceRequest:
    """Every series of ``metrics`` (those ``selection`` exports) as they stand at ``now_ns``,
    cumulative since ``start_ns``, in one metric per name and kind."""
    by_name: dict[tuple[str, str], Metric] = {}
    for kind, name, labels, value in metrics.items():
        if selection is not None and not selection.exports(name, dict(labels).get("binding", "")):
            continue
        metric = by_name.get((kind, name))
        if metric is None:
            metric = by_name[(kind, name)] = _empty_metric(kind, name)
        if isinstance(value, Histogram):
            metric.histogram.data_points.append(
                HistogramDataPoint(
                    attributes=_attributes(labels),
                    count=value.count,
                    sum=value.total,
                    bucket_counts=value.counts,
                    explicit_bounds=value.buckets,
                    start_time_unix_nano=start_ns,
                    time_unix_nano=now_ns,
                )
            )
            continue
        point = NumberDataPoint(
            attributes=_attributes(labels),
            as_double=value,
            start_time_unix_nano=start_ns,
            time_unix_nano=now_ns,
        )
        (metric.sum if kind == "counter" else metric.gauge).data_points.append(point)
    scope = ScopeMetrics(scope=SCOPE, metrics=by_name.values())
    return ExportMetricsServiceRequest(
        resource_metrics=[ResourceMetrics(resource=owner, scope_metrics=[scope])]
    )


def _empty_metric(kind: str, name: str) -> Metric:
    if kind == "counter":
        total = Sum(aggregation_temporality=AGGREGATION_TEMPORALITY_CUMULATIVE, is_monotonic=True)
        return Metric(name=name, sum=total)
    if kind == "gauge":
        return Metric(name=name, gauge=Gauge())
    spread = OtlpHistogram(aggregation_temporality=AGGREGATION_TEMPORALITY_CUMULATIVE)
    return Metric(name=name, histogram=spread)


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One log event as it was written: when (ns since the epoch), how severe (a ``logging``
    level) and its line (``http.request [north_http_server] status=404 ...``)."""

    time_ns: int
    level: int
    line: str


class LogRecordBuffer(ExportBuffer[LogEvent]):
    """The log events waiting for the next export."""


def severity_number(level: int) -> int:
    """The OTLP severity number of ``logging`` level ``level`` (``WARNING`` → 13, WARN)."""
    for lowest, number in _SEVERITY:
        if level >= lowest:
            return number
    return 9 if level >= logging.INFO else 5  # INFO, DEBUG


def log_record(event: LogEvent) -> LogRecord:
    """``event`` as an OTLP log record: severity, its line as the body, its name and binding
    as attributes (the name also as ``event_name``)."""
    found = _EVENT_LINE.match(event.line)
    name = found.group("name") if found else ""
    binding = (found.group("binding") or "") if found else ""
    attributes = [_attribute("event.name", name)] if name else []
    if binding:
        attributes.append(_attribute("binding", binding))
    return LogRecord(
        time_unix_nano=event.time_ns,
        observed_time_unix_nano=event.time_ns,
        severity_number=severity_number(event.level),  # type: ignore[arg-type]
        severity_text=logging.getLevelName(event.level),
        body=AnyValue(string_value=event.line),
        attributes=attributes,
        event_name=name,
    )


def logs_request(events: Iterable[LogEvent], owner: Resource) -> ExportLogsServiceRequest:
    """``events`` as one request, in order."""
    scope = ScopeLogs(scope=SCOPE, log_records=[log_record(event) for event in events])
    return ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(resource=owner, scope_logs=[scope])]
    )
