"""A client that stops reading stalls its stream at the write it refuses, over HTTP/2 and TLS.

Real sse server, real HTTP/2 and HTTP/1.1-over-TLS servers on 127.0.0.1, and real clients on
sockets with a 4 KiB receive buffer that read nothing until the test says. The stream sweep is
made so slow that it never runs during a test: the stall and its end come from the stream alone
(a write that leaves it not ``writable``, its drain callbacks).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import h2.events
import pytest
from tests.bindings.sse.test_server import RecordingSource, Subscribed
from tests.support.deaf_clients import DeafH2
from tests.support.http_certs import (
    CertFiles,
    client_context,
    make_self_signed,
    server_context,
)
from tests.support.http_servers import run, serve

from ssegate.bindings.http.cors import AccessControl
from ssegate.bindings.http.h1 import Http1Protocol
from ssegate.bindings.http.h2 import H2Protocol
from ssegate.bindings.http.observed import ObservedStream
from ssegate.bindings.http.types import ConnectionSetup
from ssegate.bindings.sse.fanout import SinkGroup
from ssegate.bindings.sse.server import DownstreamStream, SseRoute, SseServer
from ssegate.bindings.sse.sweep import StreamSweep
from ssegate.contract.exchange import Request, ResponseStream
from ssegate.telemetry.metrics import Metrics

pytestmark = pytest.mark.integration

PAD = "x" * 1000
LIMIT = 1 << 20
"""Bytes of events the tests write at most before the stream must have stalled."""


def sse_server(source: RecordingSource, tick: float = 3600.0) -> SseServer:
    sweep = StreamSweep()
    sweep.tick = tick  # by default never within a test: only the writes and the drains decide
    return SseServer(
        "sse",
        [SseRoute(None, source)],
        Metrics(),
        keepalive=0,
        slow_client_timeout=0,
        sweep=sweep,
    )


def dispatch_to(server: SseServer) -> Callable[[Request, bytes, ResponseStream], None]:
    """What the http server does: the sse server answers through an observed stream."""

    def dispatch(request: Request, body: bytes, stream: ResponseStream) -> None:
        server.handle(request, body, ObservedStream(stream, request, AccessControl()))

    return dispatch


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


async def opened(source: RecordingSource) -> tuple[DownstreamStream, Subscribed]:
    """The stream the client asked for, once it is open, and what its source is told."""
    await until(lambda: bool(source.subscriptions))
    sink = source.last.sink
    assert isinstance(sink, DownstreamStream)
    sink.open()
    return sink, source.last


async def write_until_stalled(sink: DownstreamStream) -> int:
    """Write an event a loop turn (an HTTP/2 connection writes its frames once a turn) until
    the stream stalls; the id of the last one written."""
    written = 0
    last = 0
    while not sink.stalled:
        assert written < LIMIT, "never stalled"
        last += 1
        sink.event(PAD, id=str(last))
        written += len(PAD)
        await asyncio.sleep(0)
    return last


@asynccontextmanager
async def stalled_h2_stream(window: int) -> AsyncIterator[tuple[DeafH2, Subscribed, int]]:
    """An HTTP/2 stream whose client grants ``window`` and reads nothing, written to until it
    stalled: its client, what its source was told, and the id of the last event written."""
    source = RecordingSource()
    server = sse_server(source)
    factory = lambda: H2Protocol(ConnectionSetup(dispatch_to(server)))  # noqa: E731
    async with serve(factory) as port:
        client = await DeafH2.open(port, "/events", window=window)
        try:
            sink, subscription = await opened(source)
            last = await write_until_stalled(sink)
            assert subscription.paced == [True]  # at the write, with no sweep
            yield client, subscription, last
        finally:
            client.sock.close()


def data_of(events: list[h2.events.Event]) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived))


def test_an_http2_stream_whose_window_is_shut_stalls_at_the_write_and_reads_again_once_opened() -> (
    None
):
    async def scenario() -> None:
        async with stalled_h2_stream(window=4096) as (client, subscription, last):
            assert last * len(PAD) < 64 * 1024  # its 4 KiB window, not a stall mark of bytes

            def open_window_and_read() -> list[h2.events.Event]:
                client.conn.increment_flow_control_window(LIMIT, client.stream_id)
                client.conn.increment_flow_control_window(LIMIT)
                client.sock.sendall(client.conn.data_to_send())
                return client.read_events(within=2.0)

            events = await asyncio.to_thread(open_window_and_read)
            await until(lambda: subscription.paced == [True, False])
            assert f"id:{last}\n".encode() in data_of(events)  # all of it reached the client

    run(scenario, timeout=30)


def test_an_http2_peer_with_wide_windows_that_reads_nothing_is_stalled_by_the_sweep() -> None:
    """Its windows never shut and its connection's socket takes what the kernel will (a limit
    on it costs every HTTP/2 connection CPU), so the backstop finds it: the sweep, once the
    connection holds more than the stall mark unsent. It reads again once that drains."""

    async def scenario() -> None:
        source = RecordingSource()
        server = sse_server(source, tick=0.05)
        factory = lambda: H2Protocol(ConnectionSetup(dispatch_to(server)))  # noqa: E731
        async with serve(factory) as port:
            client = await DeafH2.open(port, "/events", window=1 << 24)
            try:
                sink, subscription = await opened(source)
                written = 0
                while not sink.stalled:
                    assert written < 64 * LIMIT, "never stalled"
                    written += len(PAD)
                    sink.event(PAD, id=str(written))
                    await asyncio.sleep(0)
                assert subscription.paced == [True]
                events = await asyncio.to_thread(client.read_events, 2.0)
                await until(lambda: subscription.paced == [True, False])  # drained
                assert data_of(events)
            finally:
                client.sock.close()

    run(scenario, timeout=30)


@asynccontextmanager
async def tls_sse_server(source: RecordingSource, files: CertFiles) -> AsyncIterator[int]:
    """An sse server for ``source`` behind HTTP/1.1 over TLS (``files``' key); its port."""
    server = sse_server(source)
    factory = lambda: Http1Protocol(ConnectionSetup(dispatch_to(server), scheme="https"))  # noqa: E731
    async with serve(factory, server_context(files, ["http/1.1"])) as port:
        yield port


@asynccontextmanager
async def tls_client(port: int, ca: ssl.SSLContext) -> AsyncIterator[ssl.SSLSocket]:
    """An HTTP/1.1 client over TLS with a 4 KiB receive buffer that has sent ``GET /events``."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)

    def connect() -> ssl.SSLSocket:
        sock.settimeout(5)
        sock.connect(("127.0.0.1", port))
        tls = ca.wrap_socket(sock, server_hostname="localhost")
        tls.sendall(b"GET /events HTTP/1.1\r\nhost: localhost\r\n\r\n")
        return tls

    tls = await asyncio.to_thread(connect)
    try:
        yield tls
    finally:
        tls.close()


def read_until(tls: ssl.SSLSocket, marker: bytes, timeout: float = 10.0) -> bytes:
    """Read what the server sends until ``marker`` arrives."""
    received = bytearray()
    deadline = time.monotonic() + timeout
    while marker not in received:
        assert time.monotonic() < deadline, "the server did not send it all"
        data = tls.recv(65536)
        assert data, "the server closed"
        received += data
    return bytes(received)


def test_an_http1_response_over_tls_to_a_client_that_reads_nothing_stalls_at_the_write(
    tmp_path: Path,
) -> None:
    files = make_self_signed(tmp_path)

    async def scenario() -> None:
        source = RecordingSource()
        async with (
            tls_sse_server(source, files) as port,
            tls_client(port, client_context(files, ["http/1.1"])) as tls,
        ):
            sink, subscription = await opened(source)
            last = await write_until_stalled(sink)  # the kernel takes little: well under LIMIT
            assert subscription.paced == [True]  # at the write, with no sweep
            body = await asyncio.to_thread(read_until, tls, f"id:{last}\n".encode())
            assert body.startswith(b"HTTP/1.1 200 OK\r\n")
            await until(lambda: subscription.paced == [True, False])

    run(scenario, timeout=30)


def test_a_group_writes_tls_streams_through_their_record_layer_in_order_and_stalls_a_deaf_one(
    tmp_path: Path,
) -> None:
    files = make_self_signed(tmp_path)

    async def scenario() -> None:
        source = RecordingSource()
        context = client_context(files, ["http/1.1"])
        async with (
            tls_sse_server(source, files) as port,
            tls_client(port, context) as _deaf,  # reads nothing
        ):
            deaf, deaf_subscription = await opened(source)
            async with tls_client(port, context) as reader:
                await until(lambda: len(source.subscriptions) == 2)
                live, live_subscription = await opened(source)
                group: SinkGroup[DownstreamStream] = SinkGroup()
                for sink in (deaf, live):
                    direct = sink.direct_socket()
                    assert direct is not None and direct.sealed  # TLS: its transport
                    group.add(sink, sink)
                last = 0
                while not deaf.stalled:
                    assert last * len(PAD) < LIMIT, "never stalled"
                    last += 1
                    group.event(PAD, id=str(last))
                    await asyncio.sleep(0)
                assert deaf_subscription.paced == [True]  # at the group's write, no sweep
                body = await asyncio.to_thread(read_until, reader, f"id:{last}\n".encode())
                ids = [int(line[3:]) for line in body.split(b"\n") if line.startswith(b"id:")]
                assert ids == list(range(1, last + 1))  # every one, once, in order
                assert live_subscription.paced in ([], [True, False])
                assert group.writes == last

    run(scenario, timeout=30)
