"""The SSE leg of the pipeline bench's latency cases, without Spark or a gateway: each event's
offset and send time, the tally against the sink topic, and a chunked stream read by the client."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from ssegate.bindings.sse_kafka.event_id import encode_progress
from ssegate_lab.bench.pipeline_sse import Arrival, SseReader, arrival, delivery


def _id(offset: int) -> str:
    """The sse-kafka id of the event at ``offset`` of a one-partition topic."""
    return encode_progress({0: offset + 1})


def test_an_event_gives_its_offset_from_its_id_and_its_send_time_from_its_data() -> None:
    data = '{"device":"device-001","celsius":17.5,"sent":1700000000000000}'
    assert arrival(_id(41), data, 1700000000250000) == Arrival(
        41, 1700000000000000, 1700000000250000
    )
    assert arrival(f"{_id(3)}/etag-1", data, 5).offset == 3


@pytest.mark.parametrize(
    ("event_id", "data", "offset", "sent"),
    [
        ("not-an-id", '{"sent":7}', None, 7),
        (_id(2), "not json", 2, None),
        (_id(2), '{"sent":"7"}', 2, None),
        (_id(2), "[7]", 2, None),
    ],
)
def test_an_event_without_an_offset_or_a_send_time_says_which_it_lacks(
    event_id: str, data: str, offset: int | None, sent: int | None
) -> None:
    assert arrival(event_id, data, 9) == Arrival(offset, sent, 9)


def test_the_tally_counts_copies_and_the_records_of_the_sink_that_never_came() -> None:
    arrivals = [
        Arrival(0, 1_000_000, 1_300_000),
        Arrival(1, 1_000_000, 1_400_000),
        Arrival(1, 1_000_000, 1_900_000),  # a copy: counted, and no latency of its own
        Arrival(3, 2_000_000, 2_500_000),
        Arrival(None, 2_000_000, 2_600_000),
        Arrival(5, None, 2_700_000),
    ]
    tally = delivery(range(5), arrivals)
    assert (tally.received, tally.duplicates) == (6, 1)
    assert tally.missing == 2  # offsets 2 and 4
    assert tally.not_in_sink == 1  # offset 5
    assert tally.unreadable == 2
    assert tally.latencies_ms == [300.0, 400.0, 500.0, 600.0]


def test_nothing_received_is_every_sink_record_missing() -> None:
    tally = delivery([0, 1, 2], [])
    assert (tally.received, tally.missing, tally.latencies_ms) == (0, 3, [])


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@pytest.fixture
def chunked_stream() -> Iterator[tuple[int, threading.Event]]:
    """A server answering one SSE request with a chunked body: two events, the second split
    across chunks, then nothing until the test is done."""
    server = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            connection.recv(4096)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            sent = time.time_ns() // 1000
            first = f'id:{_id(0)}\ndata:{{"sent":{sent}}}\n\n'.encode()
            second = f'id:{_id(1)}\ndata:{{"sent":{sent}}}\n\n'.encode()
            connection.sendall(_chunk(first) + _chunk(second[:9]))
            time.sleep(0.05)
            connection.sendall(_chunk(second[9:]))
            done.wait(5)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], done
    done.set()
    thread.join(5)
    server.close()


def test_the_reader_takes_each_event_of_a_chunked_stream_as_it_comes(
    chunked_stream: tuple[int, threading.Event],
) -> None:
    port, _ = chunked_stream
    reader = SseReader(port, "/bench.sink")
    try:
        reader.open(timeout=5)
        deadline = time.monotonic() + 5
        while len(reader.arrivals) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        reader.close()
    assert [event.offset for event in reader.arrivals] == [0, 1]
    first, second = reader.arrivals
    assert 0 <= first.arrived_us - (first.sent_us or 0) < 1_000_000
    assert second.arrived_us - first.arrived_us >= 40_000  # its end came in a later read
    assert reader.error == ""
