"""Delivery traces, their pure part: which records are traced, what a write tells the trace,
and the spans a delivery becomes."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from itertools import count

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ssegate.kafka.topics import KafkaMessage
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.otlp_messages import resource
from ssegate.telemetry.otlp_traces import IdSource, delivery_spans, traces_request
from ssegate.telemetry.traces import (
    MALFORMED_METRIC,
    DeliveryTraces,
    RatioDraw,
    RecordTrace,
    fetched_at,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


@dataclass
class Batch:
    topic: str
    partition: int
    messages: list[KafkaMessage]
    fetched: tuple[tuple[int, int], ...] = field(default_factory=tuple)


def message(offset: int, traceparent: str | None = None) -> KafkaMessage:
    headers = () if traceparent is None else (("traceparent", traceparent.encode()),)
    return KafkaMessage("orders", 0, offset, b"k", b"v", headers, 1_000)


def tracing(sampling: float) -> tuple[DeliveryTraces, Metrics]:
    traces, metrics = DeliveryTraces(), Metrics()
    traces.attach(sampling, metrics)
    return traces, metrics


def test_at_sampling_one_every_record_is_traced_and_one_without_traceparent_starts_a_trace() -> (
    None
):
    traces, _ = tracing(1.0)
    batch = Batch("orders", 0, [message(7), message(8, f"00-{TRACE}-{SPAN}-00")], ((7, 5),))
    trace = traces.begin("south_kafka_cache_server", batch)
    assert trace is not None and traces.current is trace
    fresh, child = trace.records
    assert (fresh.offset, fresh.parent_id, len(fresh.trace_id)) == (7, b"", 16)
    assert fresh.trace_id != bytes(16) and fresh.span_id != bytes(8)
    assert (child.trace_id.hex(), child.parent_id.hex()) == (TRACE, SPAN)
    assert child.fetched_ns == 5 and child.fanout_ns >= child.fetched_ns


def test_a_sampled_traceparent_is_traced_whatever_the_ratio_and_an_unsampled_one_is_not() -> None:
    traces, _ = tracing(1e-12)
    batch = Batch(
        "orders",
        0,
        [message(1), message(2, f"00-{TRACE}-{SPAN}-01"), message(3, f"00-{TRACE}-{SPAN}-00")],
    )
    trace = traces.begin("kafka", batch)
    assert trace is not None
    assert [(r.offset, r.parent_id.hex()) for r in trace.records] == [(2, SPAN)]


def test_a_malformed_traceparent_parents_nothing_and_is_counted_per_topic() -> None:
    traces, metrics = tracing(1.0)
    batch = Batch("orders", 0, [message(1, f"00-{TRACE}-{SPAN}"), message(2, "junk")])
    trace = traces.begin("kafka", batch)
    assert trace is not None
    assert [r.parent_id for r in trace.records] == [b"", b""]
    assert metrics.counter(MALFORMED_METRIC, "kafka", topic="orders") == 2


def test_tracing_is_off_at_sampling_zero_and_once_its_last_exporter_detaches() -> None:
    assert not DeliveryTraces().enabled
    assert not tracing(0.0)[0].enabled
    traces, metrics = DeliveryTraces(), Metrics()
    buffer = traces.attach(0.5, metrics)
    assert traces.enabled
    assert traces.begin("kafka", Batch("orders", 0, [message(1, f"00-{TRACE}-{SPAN}-01")]))
    traces.detach(buffer)
    assert not traces.enabled and traces.current is None


def test_the_ratio_draw_traces_about_that_share_of_records_batch_by_batch() -> None:
    draw = RatioDraw(0.01, random.Random(7))
    won = sum(len(draw.winners(500)) for _ in range(400))  # 200,000 records
    assert 1_700 < won < 2_300
    assert RatioDraw(1.0).winners(3) == [0, 1, 2]
    assert RatioDraw(0.0).winners(1_000_000) == []


def test_a_write_reports_its_reach_to_the_records_it_carried_through_the_filter() -> None:
    traces, _ = tracing(1.0)
    messages = [message(offset) for offset in range(10, 14)]
    trace = traces.begin("kafka", Batch("orders", 0, messages))
    assert trace is not None
    trace.written(messages, None, (3, 1, 0), 100, 200)
    trace.written([messages[1], messages[3]], None, (1, 0, 1), 210, 220)  # an offered subset
    trace.written(messages, lambda m: m.offset == 12, (5, 0, 0), 230, 240)
    reached = {r.offset: (r.writes, r.streams, r.stalled, r.dropped) for r in trace.records}
    assert reached == {10: (1, 3, 1, 0), 11: (2, 4, 1, 1), 12: (2, 8, 1, 0), 13: (2, 4, 1, 1)}
    first = trace.records[2]
    assert (first.first_write_ns, first.last_write_ns) == (100, 240)


def test_a_finished_batch_goes_to_every_exporter_buffer_and_lets_its_records_go() -> None:
    traces, metrics = tracing(1.0)
    second = traces.attach(0.5, metrics)
    trace = traces.begin("kafka", Batch("orders", 0, [message(1)]))
    assert trace is not None
    traces.finish(trace)
    assert traces.current is None
    (record,) = second.take()
    assert record.message is None and record.done_ns >= record.fanout_ns
    assert traces.sampling == 1.0


def test_a_full_buffer_drops_and_counts() -> None:
    traces, metrics = tracing(1.0)
    small = traces.attach(1.0, metrics, capacity=1)
    for offset in range(3):
        trace = traces.begin("kafka", Batch("orders", 0, [message(offset)]))
        assert trace is not None
        traces.finish(trace)
    assert len(small) == 1 and small.take_dropped() == 2 and small.take_dropped() == 0


def test_each_record_takes_the_time_of_the_fetch_pass_that_brought_it() -> None:
    marks = ((10, 1_000), (20, 2_000), (30, 3_000))
    assert [fetched_at(marks, offset, 9) for offset in (10, 19, 20, 35)] == [
        1_000, 1_000, 2_000, 3_000,
    ]  # fmt: skip
    assert fetched_at(marks, 5, 9) == 1_000
    assert fetched_at((), 5, 9) == 9


def record(writes: int = 2) -> RecordTrace:
    return RecordTrace(
        "south_kafka_cache_server", None, "orders", 3, 42, 1_700_000_000_000,
        bytes.fromhex(TRACE), bytes.fromhex(SPAN), bytes.fromhex("1111111111111111"),
        fetched_ns=1_700_000_000_010_000_000, fanout_ns=1_700_000_000_012_000_000,
        batch_messages=5, done_ns=1_700_000_000_015_000_000,
        first_write_ns=1_700_000_000_013_000_000, last_write_ns=1_700_000_000_014_000_000,
        writes=writes, streams=7, stalled=1, dropped=0,
    )  # fmt: skip


def ids() -> IdSource:
    made = count(1)
    return lambda size: next(made).to_bytes(size, "big")


def attributes(span: Span) -> dict[str, object]:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}


def test_a_delivery_is_a_consumer_span_under_the_producer_with_a_child_per_stage() -> None:
    deliver, handover, fanout, write = delivery_spans(record(), ids())
    assert deliver.name == "deliver orders" and deliver.kind == Span.SPAN_KIND_CONSUMER
    assert deliver.parent_span_id.hex() == SPAN
    assert {s.trace_id.hex() for s in (deliver, handover, fanout, write)} == {TRACE}
    assert handover.parent_span_id == fanout.parent_span_id == deliver.span_id
    assert write.parent_span_id == fanout.span_id
    assert [s.name for s in (handover, fanout, write)] == ["handover", "fanout", "write"]
    assert deliver.start_time_unix_nano == handover.start_time_unix_nano
    assert handover.end_time_unix_nano == fanout.start_time_unix_nano
    assert fanout.start_time_unix_nano <= write.start_time_unix_nano
    assert write.end_time_unix_nano <= fanout.end_time_unix_nano == deliver.end_time_unix_nano
    assert attributes(deliver) == {
        "messaging.system": "kafka",
        "messaging.operation.name": "deliver",
        "messaging.destination.name": "orders",
        "messaging.destination.partition.id": "3",
        "messaging.kafka.offset": 42,
        "ssegate.binding": "south_kafka_cache_server",
        "ssegate.streams.written": 7,
        "ssegate.streams.stalled": 1,
        "ssegate.streams.dropped": 0,
        "ssegate.batch.messages": 5,
        "ssegate.record.age_ms": 15,
    }
    assert attributes(write)["ssegate.writes"] == 2


def test_a_record_no_stream_took_has_no_write_span_and_a_root_delivery_has_no_parent() -> None:
    alone = record(writes=0)
    alone.parent_id = b""
    spans = delivery_spans(alone, ids())
    assert [s.name for s in spans] == ["deliver orders", "handover", "fanout"]
    assert spans[0].parent_span_id == b""


def test_clocks_that_disagree_still_give_ordered_non_negative_stages() -> None:
    skewed = record()
    skewed.fanout_ns = skewed.fetched_ns - 5  # another process's clock stamped the fetch
    skewed.first_write_ns = skewed.done_ns + 10
    for span in delivery_spans(skewed, ids()):
        assert span.start_time_unix_nano <= span.end_time_unix_nano


def test_a_request_carries_every_delivery_under_the_process_resource() -> None:
    request = traces_request([record(), record(0)], resource({}, 12), ids())
    (owned,) = request.resource_spans
    assert len(owned.scope_spans[0].spans) == 7
    assert owned.scope_spans[0].scope.name == "ssegate"
