"""A group of SSE streams written the same bytes: who is written directly, who alone, and how
each stays in order, counted and bounded. Real sse server and streams, fake transports and a
fake descriptor writer."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

import pytest
from tests.support.fanout_fakes import FakeTransport, FdWriter

from ssegate.bindings.http.cors import AccessControl
from ssegate.bindings.http.server import ObservedStream
from ssegate.bindings.sse.fanout import SinkGroup, chunk
from ssegate.bindings.sse.server import DownstreamStream, SseRoute, SseServer
from ssegate.bindings.sse.source import SseSink
from ssegate.bindings.sse.sweep import StreamSweep
from ssegate.contract.exchange import DirectSocket, Request
from ssegate.native import fanout
from ssegate.telemetry.metrics import Metrics

EVENT = b"id:1\ndata:one\n\n"


class ChunkedStream:
    """An HTTP/1.1 response streaming chunked over a (fake) cleartext transport."""

    def __init__(self, fd: int | None) -> None:
        self.transport = FakeTransport.with_socket(fd if fd is not None else -1)
        self.direct = fd is not None
        self._socket: DirectSocket | None = None
        self.status: int | None = None
        self.aborted = False
        self.in_kernel = 0
        """Bytes the kernel holds unsent, as the test sets them."""
        self._close_callbacks: list[Callable[[], None]] = []

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        self.status = status

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        self.transport.write(chunk(data))

    def reset(self) -> None:
        self._close()

    def abort(self, connection_limit: int) -> None:
        self.aborted = True
        self._close()

    @property
    def buffered(self) -> int:
        return len(self.transport.buffered)

    @property
    def unsent(self) -> int:
        return self.buffered + self.in_kernel

    @property
    def writable(self) -> bool:
        return not self.buffered

    @property
    def closed(self) -> bool:
        return self.aborted

    def on_close(self, callback: Callable[[], None]) -> None:
        self._close_callbacks.append(callback)

    def on_drain(self, callback: Callable[[], None]) -> None:
        pass

    def direct_socket(self) -> DirectSocket | None:
        if self.direct and self._socket is None:
            self._socket = DirectSocket.of(cast(asyncio.Transport, self.transport))
        return self._socket

    def _close(self) -> None:
        for callback in self._close_callbacks:
            callback()


class Paces:
    """One sink's subscription: it records what its stream tells it."""

    def __init__(self) -> None:
        self.told: list[bool] = []

    def cancel(self) -> None:
        pass

    def resume_id(self) -> str | None:
        return None

    def pace(self, stalled: bool) -> None:
        self.told.append(stalled)

    def behind_since(self, stalled_since: float, now: float) -> float | None:
        return stalled_since


class Sinks:
    """An sse source that keeps every sink it is given, and each one's subscription."""

    def __init__(self) -> None:
        self.sinks: list[DownstreamStream] = []
        self.paces: list[Paces] = []

    def subscribe(self, request: Request, last_event_id: str | None, sink: SseSink) -> Paces:
        assert isinstance(sink, DownstreamStream)
        sink.open()
        self.sinks.append(sink)
        self.paces.append(Paces())
        return self.paces[-1]


@pytest.fixture
def writer() -> Iterator[FdWriter]:
    fake = FdWriter()
    real = fanout.send_all
    fanout.send_all = fake
    yield fake
    fanout.send_all = real


@dataclass
class Group:
    server: SseServer
    streams: list[ChunkedStream]
    observed: list[ObservedStream]
    """What the http server hands the sse server: each stream, counting what it sends."""
    sinks: SinkGroup[int]
    sweep: StreamSweep
    source: Sinks

    def sinks_of(self) -> list[DownstreamStream]:
        return self.source.sinks


def group_of(fds: list[int | None], *, keepalive: float = 0, max_buffered: int = 1 << 20) -> Group:
    """An sse server with a stream per ``fds`` entry (``None``: one never written directly),
    every stream a member of one group, its owner the stream's index."""
    source = Sinks()
    sweep = StreamSweep()
    server = SseServer(
        "sse",
        [SseRoute(None, source)],
        Metrics(),
        keepalive=keepalive,
        max_buffered=max_buffered,
        sweep=sweep,
    )
    made = [ChunkedStream(fd) for fd in fds]
    observed = []
    for stream in made:
        request = Request("GET", "http", "localhost", "/events", {})
        observed.append(ObservedStream(stream, request, AccessControl()))
        server.handle(request, b"", observed[-1])
    sinks: SinkGroup[int] = SinkGroup()
    for index, sink in enumerate(source.sinks):
        sinks.add(sink, index)
    return Group(server, made, observed, sinks, sweep, source)


def test_streams_on_cleartext_h1_get_one_chunk_framed_once_in_one_call(writer: FdWriter) -> None:
    group = group_of([10, 11, 12, None])
    group.sinks.write_encoded(EVENT)
    assert writer.calls == [(chunk(EVENT), [10, 11, 12])]
    assert [bytes(s.transport.buffered) for s in group.streams] == [b"", b"", b"", chunk(EVENT)]
    sent = group.server.metrics.counter("stream.data.sent", "sse")
    assert sent == 4 * len(EVENT)  # three counted as a group, one as a stream alone
    direct = group.server.metrics.counter("ssegate.sse.stream.data.direct", "sse")
    assert direct == 3 * len(EVENT)
    # Each response's size counts the event, however it was sent.
    assert [o.sent_bytes for o in group.observed] == [len(EVENT)] * 4


def test_a_stream_whose_connection_holds_bytes_is_written_behind_them(writer: FdWriter) -> None:
    group = group_of([10, 11])
    group.streams[1].transport.buffered += b"earlier"
    group.sinks.write_encoded(EVENT)
    assert writer.calls == [(chunk(EVENT), [10])]
    assert bytes(group.streams[1].transport.buffered) == b"earlier" + chunk(EVENT)


def test_a_closing_transport_is_never_written_directly(writer: FdWriter) -> None:
    group = group_of([10, 11])
    group.streams[0].transport.closing = True
    group.sinks.write_encoded(EVENT)
    assert writer.calls == [(chunk(EVENT), [11])]


def test_a_stream_whose_client_reads_nothing_tells_its_source_and_keeps_nothing_itself(
    writer: FdWriter,
) -> None:
    group = group_of([10, 11, 12])
    for stalled in group.streams[1:]:
        stalled.transport.buffered += b"x" * (64 * 1024 + 1)
    group.sinks.write_encoded(EVENT)
    group.sweep.sweep()  # over the stall mark: the sources are told
    assert [p.told for p in group.source.paces] == [[], [True], [True]]
    assert [s.stalled for s in group.sinks_of()] == [False, True, True]
    # A source that cannot wait writes on: the bytes wait behind what the connection holds,
    # in order, and nothing is kept anywhere else.
    group.sinks.write_encoded(EVENT)
    assert writer.calls[-1] == (chunk(EVENT), [10])
    assert bytes(group.streams[1].transport.buffered).endswith(chunk(EVENT) + chunk(EVENT))
    group.streams[1].transport.buffered.clear()  # this client read everything
    group.sweep.sweep()
    assert [p.told for p in group.source.paces] == [[], [True, False], [True]]
    group.sinks.write_encoded(EVENT)  # written directly with the others again
    assert writer.calls[-1] == (chunk(EVENT), [10, 11])


def test_what_a_short_send_left_is_queued_after_it(writer: FdWriter) -> None:
    group = group_of([10, 11])
    writer.takes[11] = 5
    group.sinks.write_encoded(EVENT)
    assert writer.taken[11] + bytes(group.streams[1].transport.buffered) == chunk(EVENT)
    assert not group.streams[1].aborted


def test_a_short_send_stalls_its_stream_at_once_without_waiting_for_a_sweep(
    writer: FdWriter,
) -> None:
    group = group_of([10, 11])
    writer.takes[11] = -errno.EAGAIN  # its kernel refused: the client's window is shut
    group.sinks.write_encoded(EVENT)
    assert group.sinks.stalled == 1  # the write counts the stream it found not reading
    assert [p.told for p in group.source.paces] == [[], [True]]
    assert bytes(group.streams[1].transport.buffered) == chunk(EVENT)  # behind nothing
    group.streams[1].transport.buffered.clear()
    group.streams[1].in_kernel = 9 * 1024  # the kernel still holds what it took
    group.sweep.sweep()
    assert [p.told for p in group.source.paces] == [[], [True]]  # not read yet
    group.streams[1].in_kernel = 0  # it read
    group.sweep.sweep()
    assert [p.told for p in group.source.paces] == [[], [True, False]]
    del writer.takes[11]  # and its kernel takes writes again
    group.sinks.write_encoded(EVENT)
    assert group.sinks.stalled == 0 and writer.calls[-1] == (chunk(EVENT), [10, 11])


def test_a_stream_left_over_max_buffered_by_a_short_send_is_dropped_and_reported(
    writer: FdWriter,
) -> None:
    group = group_of([10, 11], max_buffered=64)
    dropped: list[int] = []
    group.sinks.on_dropped = dropped.append
    writer.takes[11] = -errno.EAGAIN
    group.sinks.write_encoded(b"data:" + b"x" * 100 + b"\n\n")
    assert group.streams[1].aborted and not group.streams[0].aborted
    assert dropped == [1]
    slow = group.server.metrics.counter("ssegate.sse.slow_clients", "sse", reason="bytes")
    assert slow == 1


def test_a_stream_written_directly_counts_as_written_for_the_keep_alive(writer: FdWriter) -> None:
    group = group_of([10], keepalive=1.0)
    group.sinks.write_encoded(EVENT)
    opened = group.sweep.clock()
    group.sweep.sweep(opened + 1.5)  # written since the last visit: no keep-alive
    assert writer.taken[10] == chunk(EVENT)
    assert bytes(group.streams[0].transport.buffered) == b""
    group.sweep.sweep(opened + 3.0)  # idle for a keep-alive interval since: a comment
    assert bytes(group.streams[0].transport.buffered) == chunk(b":\n\n")


def test_an_event_is_encoded_and_checked_once_for_the_group(writer: FdWriter) -> None:
    group = group_of([10, 11])
    group.sinks.event(None, id="7")
    assert writer.calls == [(chunk(b"id:7\n\n"), [10, 11])]
    assert group.sinks.writes == 1
