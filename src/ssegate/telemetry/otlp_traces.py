"""The ``otlp`` exporter's traces: each traced delivery (:mod:`~.traces`) as OTLP spans.

A delivery is four spans, built with the ``opentelemetry-proto`` classes the metrics and logs
use (:mod:`~.otlp_messages`):

- ``deliver <topic>`` (kind ``CONSUMER``), from the fetch pass that brought the record to the
  end of its fan-out: the producer's span is its parent when the record's ``traceparent``
  named one. Attributes: ``messaging.system`` (``kafka``), ``messaging.destination.name``
  (the topic), ``messaging.destination.partition.id``, ``messaging.kafka.offset``,
  ``ssegate.binding`` (the cache server), ``ssegate.streams.written``,
  ``ssegate.streams.stalled`` and ``ssegate.streams.dropped`` (the streams the record reached,
  those of them whose client the write found not reading, and those closed as too slow),
  ``ssegate.batch.messages`` and, when the record has a timestamp, ``ssegate.record.age_ms``
  (from that timestamp to the end of the delivery: the producer's clock, or the broker's).
- its children, one per stage, so a trace view draws where the time went as bars:
  ``handover`` (from the fetch pass to the start of the batch's fan-out: the wait for the event
  loop), ``fanout`` (the batch handed to every subscriber of its partition) and, inside it,
  ``write`` (from the first write that carried the record to the last, with the streams
  counts again and ``ssegate.writes``: one per stream written alone, one per broadcast). A record
  no stream wanted has no ``write`` span.

Stages are children rather than span events because a trace view draws a span's duration and
only marks an event's instant: where a record waited is read from the bars.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from ssegate.telemetry.otlp_messages import SCOPE
from ssegate.telemetry.traces import RecordTrace

IdSource = Callable[[int], bytes]
"""``size`` → that many random bytes (a span id)."""


def _attribute(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _reach(record: RecordTrace) -> list[KeyValue]:
    return [
        _attribute("ssegate.streams.written", record.streams),
        _attribute("ssegate.streams.stalled", record.stalled),
        _attribute("ssegate.streams.dropped", record.dropped),
    ]


def delivery_spans(record: RecordTrace, new_id: IdSource = os.urandom) -> list[Span]:
    """``record``'s delivery span and its stages' spans (see the module's doc)."""
    fetched = record.fetched_ns
    fanout = max(fetched, record.fanout_ns)
    done = max(fanout, record.done_ns)
    attributes = [
        _attribute("messaging.system", "kafka"),
        _attribute("messaging.operation.name", "deliver"),
        _attribute("messaging.destination.name", record.topic),
        _attribute("messaging.destination.partition.id", str(record.partition)),
        _attribute("messaging.kafka.offset", record.offset),
        _attribute("ssegate.binding", record.binding),
        *_reach(record),
        _attribute("ssegate.batch.messages", record.batch_messages),
    ]
    if record.timestamp_ms > 0:
        age_ms = max(0, done // 1_000_000 - record.timestamp_ms)
        attributes.append(_attribute("ssegate.record.age_ms", age_ms))
    deliver = Span(
        trace_id=record.trace_id,
        span_id=record.span_id,
        parent_span_id=record.parent_id,
        name=f"deliver {record.topic}",
        kind=Span.SPAN_KIND_CONSUMER,
        start_time_unix_nano=fetched,
        end_time_unix_nano=done,
        attributes=attributes,
    )
    handover = _child(record, new_id(8), record.span_id, "handover", fetched, fanout)
    fanout_id = new_id(8)
    spans = [deliver, handover, _child(record, fanout_id, record.span_id, "fanout", fanout, done)]
    if record.writes:
        first = min(max(fanout, record.first_write_ns), done)
        last = min(max(first, record.last_write_ns), done)
        write = _child(record, new_id(8), fanout_id, "write", first, last)
        write.attributes.extend([*_reach(record), _attribute("ssegate.writes", record.writes)])
        spans.append(write)
    return spans


def _child(
    record: RecordTrace, span_id: bytes, parent_id: bytes, name: str, start: int, end: int
) -> Span:
    return Span(
        trace_id=record.trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        name=name,
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
    )


def traces_request(
    records: Iterable[RecordTrace], owner: Resource, new_id: IdSource = os.urandom
) -> ExportTraceServiceRequest:
    """The spans of every delivery in ``records``, as one request under one resource."""
    spans = [span for record in records for span in delivery_spans(record, new_id)]
    scope = ScopeSpans(scope=SCOPE, spans=spans)
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=owner, scope_spans=[scope])]
    )
