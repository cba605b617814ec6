"""Clients that never read a busy stream, against a real ``ssegate start`` process.

tcp → http server (HTTP/1.1 and h2c) → two sse servers → sse client → an upstream on 127.0.0.1
that writes 400 events a second on every stream it is asked for, run in the test's own event
loop. ``/time`` is served with ``slow-client-timeout: 2`` (and the default ``max-buffered``),
``/bytes`` with ``max-buffered: 131072`` and no time bound. The stalled clients connect with a
4 KiB receive buffer and never read; the kernel's send queue for them fills at once, so what
drops them is the gateway counting it. Each test checks how they end (a TCP reset, or
``RST_STREAM`` on HTTP/2), the log line and the metric, and that live readers of the same
stream keep receiving meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import h2.events
import pytest
from h2.errors import ErrorCodes
from tests.bindings.sse.test_proxy_gateway import Gateway, start_gateway
from tests.support.deaf_clients import TCP_CLOSE, TCP_CLOSE_WAIT, DeafH2, deaf_client, tcp_state

from ssegate.sse_codec.parser import SseEvent, SseParser

pytestmark = pytest.mark.integration

RATE = 400
"""Events a second the upstream writes on every stream."""
PAD = "x" * 200
STALLED = 180
"""Stalled HTTP/1.1 clients, half on each path (the gateway's output keeps the last 200 lines)."""


NORTH = """
  north_http_server:
    type: http
    kind: server
    options:
      versions: [http/1.1, h2]
    routes:
      - when:
          - headers: {":path": /bytes}
        exit: north_sse_bytes
      - exit: north_sse_time
  north_sse_time:
    type: sse
    kind: server
    options: {slow-client-timeout: 2}
    exit: south_sse_client
  north_sse_bytes:
    type: sse
    kind: server
    options: {max-buffered: 131072, slow-client-timeout: 0}
    exit: south_sse_client
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    # Warnings only on the output, which keeps its last 200 lines: one per slow client.
    yield from start_gateway(tmp_path_factory, "sse-slow-clients", NORTH, log_lines=False)


def slow_clients(binding: str, reason: str) -> str:
    return f'ssegate_sse_slow_clients_total{{binding="{binding}",reason="{reason}"}}'


# -- the upstream: 400 events a second on every stream --------------------------------------------


@dataclass
class BusyUpstream:
    """Answers every request with an event stream of ``RATE`` events a second, ids from 1."""

    writers: set[asyncio.StreamWriter] = field(default_factory=set)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
            loop = asyncio.get_running_loop()
            started, sent = loop.time(), 0
            while not writer.is_closing():
                due = int((loop.time() - started) * RATE)
                events = (f"id:{n}\ndata:{PAD}\n\n" for n in range(sent + 1, due + 1))
                writer.write("".join(events).encode())
                sent = due
                await writer.drain()
                await asyncio.sleep(0.01)
        writer.close()
        self.writers.discard(writer)


@contextlib.asynccontextmanager
async def busy_upstream(gateway: Gateway) -> AsyncIterator[None]:
    upstream = BusyUpstream()
    server = await asyncio.start_server(upstream.serve, "127.0.0.1", gateway.upstream_port)
    try:
        yield
    finally:
        server.close()
        for writer in list(upstream.writers):
            writer.close()
        await asyncio.sleep(0.05)  # each stream's loop sees its writer closing and returns


# -- live readers ---------------------------------------------------------------------------------


@dataclass
class LiveReader:
    """An HTTP/1.1 client that reads its stream as fast as it comes."""

    writer: asyncio.StreamWriter
    ids: list[int] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, gateway: Gateway, path: str) -> LiveReader:
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        writer.write(f"GET {path} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode())
        live = cls(writer)
        live.task = asyncio.get_running_loop().create_task(live._read(reader))
        return live

    async def _read(self, reader: asyncio.StreamReader) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ")
        parser = SseParser()
        loop = asyncio.get_running_loop()
        while data := await reader.read(65536):
            events = [e for e in parser.feed(data) if isinstance(e, SseEvent)]
            self.ids.extend(int(e.id) for e in events if e.id.isdigit())
            self.arrivals.extend(loop.time() for _ in events)

    def longest_wait(self, since: float) -> float:
        """The longest time without an event after ``since``, up to now."""
        times = [since, *(t for t in self.arrivals if t > since), time_now()]
        return max(later - earlier for earlier, later in itertools.pairwise(times))

    def close(self) -> None:
        self.writer.close()
        if self.task is not None:
            self.task.cancel()


def time_now() -> float:
    return asyncio.get_running_loop().time()


def assert_in_order_without_gaps(live: LiveReader) -> None:
    """Chunk boundaries mid-field may split an id; every id that parsed follows the one before."""
    assert live.ids, "no events"
    assert live.ids == list(range(live.ids[0], live.ids[0] + len(live.ids)))


# -- stalled clients ------------------------------------------------------------------------------


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode()


async def until_all_reset(socks: list[socket.socket], timeout: float) -> list[float]:
    """When each socket was first seen reset (TCP_CLOSE); fails on a FIN or the timeout."""
    seen: dict[int, float] = {}
    deadline = time_now() + timeout
    while len(seen) < len(socks):
        for index, sock in enumerate(socks):
            if index in seen:
                continue
            state = tcp_state(sock)
            assert state != TCP_CLOSE_WAIT, "the gateway closed with a FIN behind unread data"
            if state == TCP_CLOSE:
                seen[index] = time_now()
        assert time_now() < deadline, f"{len(socks) - len(seen)} stalled clients still open"
        await asyncio.sleep(0.05)
    return [seen[index] for index in range(len(socks))]


def read_to_reset(sock: socket.socket) -> int:
    """Read what the socket still holds; returns how much, once the reset is reported."""
    sock.setblocking(True)
    sock.settimeout(5)
    total = 0
    with contextlib.suppress(ConnectionResetError):
        while data := sock.recv(65536):
            total += len(data)
    return total


# -- HTTP/1.1 -------------------------------------------------------------------------------------


def test_clients_that_never_read_are_reset_within_the_bounds_and_their_memory_freed(
    gateway: Gateway,
) -> None:
    by_time = slow_clients("north_sse_time", "time")
    by_bytes = slow_clients("north_sse_bytes", "bytes")

    async def scenario() -> None:
        async with busy_upstream(gateway):
            live = [await LiveReader.open(gateway, "/time") for _ in range(5)]
            await asyncio.sleep(2)
            baseline = gateway.process.sample().rss_bytes
            before = (await gateway.metric(by_time), await gateway.metric(by_bytes))
            paths = ["/time", "/bytes"] * (STALLED // 2)
            started = time_now()
            stalled = [await deaf_client(gateway.port, get(path)) for path in paths]
            connected = time_now()
            late = await LiveReader.open(gateway, "/time")  # a newcomer while they stall
            reset_at = await until_all_reset(stalled, timeout=15)
            for live_reader in [*live, late]:
                assert live_reader.longest_wait(started) < 1.0
            await asyncio.sleep(0.5)
            after = (await gateway.metric(by_time), await gateway.metric(by_bytes))
            assert after == (before[0] + STALLED // 2, before[1] + STALLED // 2)
            # The time bound: no /time client is reset before its 2 s, every one soon after.
            on_time = reset_at[0::2]
            assert min(on_time) - started >= 2.0
            assert max(on_time) - connected <= 6.0
            for sock in stalled:  # what was queued for them never came: only a reset
                assert read_to_reset(sock) < 64 * 1024
                sock.close()
            await asyncio.sleep(1.0)
            rss = gateway.process.sample().rss_bytes
            assert rss <= baseline * 1.10, (baseline, rss)
            for live_reader in [*live, late]:
                assert_in_order_without_gaps(live_reader)
                live_reader.close()

    asyncio.run(asyncio.wait_for(scenario(), 40))
    lines = gateway.process.logged("sse.slow_client_closed")
    assert any("[north_sse_time]" in line and "reason=time" in line for line in lines)
    assert any("[north_sse_bytes]" in line and "reason=bytes" in line for line in lines)
    assert not gateway.process.logged("Traceback", timeout=0)


# -- HTTP/2 ---------------------------------------------------------------------------------------


def test_a_stalled_http2_stream_gets_rst_stream_cancel_and_its_connection_goes_on(
    gateway: Gateway,
) -> None:
    by_time = slow_clients("north_sse_time", "time")

    async def scenario() -> None:
        async with busy_upstream(gateway):
            live = await LiveReader.open(gateway, "/time")
            before = await gateway.metric(by_time)
            started = time_now()
            stalled = await DeafH2.open(gateway.port, "/time")  # 64 KiB windows: ssegate queues
            while await gateway.metric(by_time) == before:
                assert time_now() - started < 10, "the stalled stream was never dropped"
                await asyncio.sleep(0.1)
            assert time_now() - started >= 2.0
            events = await asyncio.to_thread(stalled.read_events)
            resets = [e for e in events if isinstance(e, h2.events.StreamReset)]
            assert [(r.stream_id, r.error_code) for r in resets] == [
                (stalled.stream_id, ErrorCodes.CANCEL)
            ]
            assert tcp_state(stalled.sock) != TCP_CLOSE
            again = stalled.request("/time")  # the connection itself is still served
            await asyncio.sleep(0.3)
            events = await asyncio.to_thread(stalled.read_events)
            answered = [e for e in events if isinstance(e, h2.events.DataReceived)]
            assert any(e.stream_id == again for e in answered)
            stalled.sock.close()
            assert live.longest_wait(started) < 1.0
            assert_in_order_without_gaps(live)
            live.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_an_http2_connection_over_max_buffered_of_its_own_is_reset(gateway: Gateway) -> None:
    by_bytes = slow_clients("north_sse_bytes", "bytes")

    async def scenario() -> None:
        async with busy_upstream(gateway):
            before = await gateway.metric(by_bytes)
            started = time_now()
            # Windows of 16 MiB: nothing waits in ssegate, it all sits in the connection's queue.
            stalled = await DeafH2.open(gateway.port, "/bytes", window=1 << 24)
            await until_all_reset([stalled.sock], timeout=10)
            assert time_now() - started < 5
            assert await gateway.metric(by_bytes) == before + 1
            assert read_to_reset(stalled.sock) < 64 * 1024
            stalled.sock.close()
            live = await LiveReader.open(gateway, "/bytes")
            await asyncio.sleep(0.5)
            assert live.ids
            live.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert gateway.process.logged("reason=bytes")
