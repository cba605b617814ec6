"""An aborted response frees what was queued for it, over real sockets on 127.0.0.1.

The client reads nothing, with a 4 KiB receive buffer, so what the handler sends piles up in
the kernel's send queue and then in the transport's buffer. ``unsent`` must count both, and
``abort`` must leave nothing behind: no transport buffer, no per-stream queue holding the
chunks, no kernel queue (the client sees a reset, never a FIN behind the data).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import tracemalloc
import weakref
from collections.abc import AsyncIterator, Callable

import h2.events
from h2.errors import ErrorCodes

from ssegate.bindings.http.h1 import Http1Protocol
from ssegate.bindings.http.h2 import H2Protocol
from ssegate.bindings.http.types import ConnectionSetup
from ssegate.contract.exchange import ResponseStream
from support.deaf_clients import TCP_CLOSE, DeafH2, deaf_client, tcp_state
from support.http_servers import ScriptedHandler, run, serve


class Chunk(bytearray):
    """Body bytes a test can hold a weak reference to."""


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


async def fill(stream: ResponseStream, buffered: int) -> None:
    """Send 64 KiB chunks until ``buffered`` bytes wait in the process, past the kernel."""
    while stream.buffered < buffered:
        stream.send_data(bytes(64 << 10))
        await asyncio.sleep(0)


def test_an_aborted_http1_response_resets_the_connection_and_frees_its_buffer() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        factory = lambda: Http1Protocol(ConnectionSetup(handler.handle))  # noqa: E731
        async with serve(factory) as port:
            sock = await deaf_client(port, b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
            await asyncio.wait_for(handler.stream_opened.wait(), 5)
            stream = handler.streams[0]
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                await fill(stream, 8 << 20)
                assert stream.unsent > stream.buffered  # the kernel's queue counts too
                held = tracemalloc.get_traced_memory()[0] - before
                assert held >= 8 << 20
                stream.abort(0)
                await until(lambda: stream.closed)
                await asyncio.sleep(0.05)
                gc.collect()
                freed = held - (tracemalloc.get_traced_memory()[0] - before)
            finally:
                tracemalloc.stop()
            assert freed >= held - (1 << 20)
            await until(lambda: tcp_state(sock) == TCP_CLOSE)
            sock.close()

    run(scenario)


@contextlib.asynccontextmanager
async def deaf_h2_stream(window: int | None = None) -> AsyncIterator[tuple[DeafH2, ResponseStream]]:
    """A stream of an HTTP/2 server whose client reads nothing, granting ``window``."""
    handler = ScriptedHandler()
    factory = lambda: H2Protocol(ConnectionSetup(handler.handle))  # noqa: E731
    async with serve(factory) as port:
        client = await DeafH2.open(port, "/stream", window)
        await asyncio.wait_for(handler.stream_opened.wait(), 5)
        yield client, handler.streams[0]
        client.sock.close()


def test_an_aborted_http2_stream_is_cancelled_its_queue_freed_and_the_connection_kept() -> None:
    async def scenario() -> None:
        async with deaf_h2_stream() as (client, stream):
            chunks = [Chunk(64 << 10) for _ in range(8)]  # past the 64 KiB stream window
            for chunk in chunks:
                stream.send_data(chunk)
            refs = [weakref.ref(chunk) for chunk in chunks]
            del chunks, chunk
            assert sum(ref() is not None for ref in refs) >= 7  # queued, past the window
            assert stream.unsent >= 7 * (64 << 10)
            stream.abort(1 << 20)  # the connection alone holds less: only the stream goes
            gc.collect()
            assert all(ref() is None for ref in refs)
            await asyncio.sleep(0.1)
            assert tcp_state(client.sock) != TCP_CLOSE
            events = await asyncio.to_thread(client.read_events)
            resets = [e for e in events if isinstance(e, h2.events.StreamReset)]
            assert [(r.stream_id, r.error_code) for r in resets] == [(1, ErrorCodes.CANCEL)]

    run(scenario)


def test_an_http2_stream_aborted_over_its_connections_limit_resets_the_connection() -> None:
    async def scenario() -> None:
        async with deaf_h2_stream(window=1 << 24) as (client, stream):
            for _ in range(16):  # 1 MiB, all of it let through by the windows
                stream.send_data(bytes(64 << 10))
                await asyncio.sleep(0.01)
            await until(lambda: stream.unsent > 512 << 10)
            stream.abort(256 << 10)
            await until(lambda: tcp_state(client.sock) == TCP_CLOSE)

    run(scenario)
