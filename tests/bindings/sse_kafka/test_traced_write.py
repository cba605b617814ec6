"""A subscriber's write while a batch with traced records fans out: what it tells the trace,
and the fetch marks that give each traced record the time its fetch pass closed."""

from __future__ import annotations

from tests.bindings.sse_kafka.topic_log import WireSink

from ssegate.bindings.kafka.fetch_events import Fetched
from ssegate.bindings.kafka.handover import coalesce
from ssegate.bindings.kafka.host_fetch import decode_events, encode_events
from ssegate.bindings.sse.fanout import SinkGroup
from ssegate.bindings.sse_kafka.traced_write import write_traced
from ssegate.kafka.topics import KafkaMessage
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.traces import BatchTrace, DeliveryTraces


class ClosingSink(WireSink):
    """A stream the write closes (too far behind)."""

    def write_encoded(self, data: bytes) -> None:
        super().write_encoded(data)
        self.closed = True


def messages(*offsets: int) -> list[KafkaMessage]:
    return [KafkaMessage("orders", 0, offset, b"k", b"v") for offset in offsets]


def traced(batch: list[KafkaMessage]) -> BatchTrace:
    traces = DeliveryTraces()
    traces.attach(1.0, Metrics())
    trace = traces.begin("kafka", Fetched("orders", 0, batch, batch[-1].offset + 1))
    assert trace is not None
    return trace


def test_a_write_to_one_stream_writes_the_bytes_and_counts_one_stream() -> None:
    batch = messages(1, 2)
    trace = traced(batch)
    sink = WireSink()
    write_traced(trace, sink, b"data:x\n\n", batch, None)
    assert bytes(sink.wire) == b"data:x\n\n"
    first, _ = trace.records
    assert (first.writes, first.streams, first.stalled, first.dropped) == (1, 1, 0, 0)
    assert 0 < first.first_write_ns <= first.last_write_ns


def test_a_broadcast_write_counts_its_streams_and_those_it_closed() -> None:
    batch = messages(5)
    trace = traced(batch)
    readers = [WireSink(), WireSink()]
    sinks: dict[str, WireSink] = {"a": readers[0], "b": readers[1], "slow": ClosingSink()}
    # as a broadcast does: a member its write closed leaves the group
    group: SinkGroup[str] = SinkGroup(on_dropped=lambda owner: group.discard(sinks[owner]))
    for name, sink in sinks.items():
        group.add(sink, name)
    write_traced(trace, group, b"data:y\n\n", batch, lambda m: m.offset == 5)
    (record,) = trace.records
    assert (record.writes, record.streams, record.stalled, record.dropped) == (1, 2, 0, 1)
    assert all(bytes(sink.wire) == b"data:y\n\n" for sink in readers)


def test_a_filter_that_drops_the_record_leaves_it_unwritten() -> None:
    batch = messages(1, 2)
    trace = traced(batch)
    write_traced(trace, WireSink(), b"data:z\n\n", batch, lambda m: m.offset == 2)
    assert [r.writes for r in trace.records] == [0, 1]


def test_fetch_marks_survive_joining_and_the_wire_between_workers() -> None:
    first = Fetched("orders", 0, messages(1, 2), 3, fetched=((1, 100),))
    second = Fetched("orders", 0, messages(3), 4, fetched=((3, 200),))
    (joined,), count = coalesce([first, second])
    assert count == 1
    assert isinstance(joined, Fetched) and joined.fetched == ((1, 100), (3, 200))
    frame = encode_events([joined])
    assert frame is not None
    (crossed,) = decode_events(frame[4:])
    assert isinstance(crossed, Fetched) and crossed.fetched == ((1, 100), (3, 200))
