"""HTTP/1.1 over real sockets: keep-alive, pipelining, limits, streaming and backpressure."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import pytest

from ssegate.bindings.http.h1 import Http1Protocol
from ssegate.bindings.http.types import ConnectionSetup, HttpLimits
from support.http_servers import ScriptedHandler, read_chunks, read_h1_response, run, serve


def _factory(
    handler: ScriptedHandler, limits: HttpLimits | None = None
) -> Callable[[], asyncio.Protocol]:
    return lambda: Http1Protocol(ConnectionSetup(handler.handle, limits or HttpLimits()))


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def _exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw`` and read everything until the server closes."""
    reader, writer = await _connect(port)
    writer.write(raw)
    data = await reader.read()
    writer.close()
    return data


def test_keep_alive_serves_two_requests_on_one_connection() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler)) as port:
            reader, writer = await _connect(port)
            for target in ("/echo?a", "/echo?b"):
                writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                response = await read_h1_response(reader)
                assert response.status == 200
                assert response.body == target.encode()
            writer.close()
        assert [r.target for r in handler.requests] == ["/echo?a", "/echo?b"]
        assert handler.requests[0].connection_id == handler.requests[1].connection_id

    run(scenario)


def test_pipelined_requests_are_answered_in_order() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler)) as port:
            reader, writer = await _connect(port)
            writer.write(
                b"".join(f"GET /echo?{n} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for n in range(5))
            )
            bodies = [(await read_h1_response(reader)).body for _ in range(5)]
            writer.close()
        assert bodies == [f"/echo?{n}".encode() for n in range(5)]

    run(scenario)


def test_a_pipelined_request_waits_for_the_streaming_response_before_it() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler)) as port:
            reader, writer = await _connect(port)
            writer.write(
                b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?next HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            await handler.stream_opened.wait()
            await asyncio.sleep(0.05)
            assert len(handler.requests) == 1
            handler.streams[0].send_data(b"data:1\n\n", end=True)
            first = await read_h1_response(reader)
            second = await read_h1_response(reader)
            writer.close()
        assert first.headers["transfer-encoding"] == "chunked"
        assert first.body == b"data:1\n\n"
        assert second.body == b"/echo?next"

    run(scenario)


def test_chunked_request_body_is_reassembled() -> None:
    async def scenario() -> None:
        async with serve(_factory(ScriptedHandler())) as port:
            reader, writer = await _connect(port)
            writer.write(
                b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
            )
            response = await read_h1_response(reader)
            writer.close()
        assert response.body == b"hello world"

    run(scenario)


@pytest.mark.parametrize(
    "start",
    [
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n"
        b"Connection: Upgrade\r\nUpgrade: websocket\r\n\r\nhello",
    ],
    ids=["chunked", "upgrade"],
)
def test_a_body_that_stops_arriving_is_answered_408_after_the_request_timeout(
    start: bytes,
) -> None:
    timeout = 0.3

    async def scenario() -> tuple[bytes, float]:
        handler = ScriptedHandler()
        limits = HttpLimits(http1_request_timeout=timeout)
        async with serve(_factory(handler, limits)) as port:
            reader, writer = await _connect(port)
            writer.write(start)
            sent = time.monotonic()
            answer = await reader.read()  # the 408, then the server's EOF
            waited = time.monotonic() - sent
            writer.close()
        assert not handler.requests
        return answer, waited

    answer, waited = run(scenario)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"\r\nconnection: close\r\n" in answer
    assert timeout <= waited < timeout + 5.0  # at the request timeout, not the idle one (60 s)


def test_malformed_header_is_answered_400_and_closed() -> None:
    async def scenario() -> bytes:
        async with serve(_factory(ScriptedHandler())) as port:
            return await _exchange(port, b"GET /echo HTTP/1.1\r\nHost x\r\n\r\n")

    data = run(scenario)
    assert data.startswith(b"HTTP/1.1 400 ")
    assert b"connection: close" in data


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        (b"GET /echo HTTP/1.1\r\n\r\n", b"an HTTP/1.1 request needs a Host header"),
        (b"GET /echo HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", b"more than one Host header"),
        (b"GET /echo HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", b"more than one Host header"),
    ],
    ids=["missing", "twice", "twice-in-http-1.0"],
)
def test_a_request_without_exactly_one_host_is_answered_400(head: bytes, reason: bytes) -> None:
    handler = ScriptedHandler()

    async def scenario() -> tuple[bytes, bytes]:
        async with serve(_factory(handler)) as port:
            refused = await _exchange(port, head)
            served = await _exchange(port, b"GET /echo HTTP/1.0\r\n\r\n")  # 1.0 needs none
            return refused, served

    refused, served = run(scenario)
    assert refused.startswith(b"HTTP/1.1 400 ")
    assert refused.endswith(b"\r\n\r\n400 Bad Request: " + reason + b"\n")
    assert served.startswith(b"HTTP/1.1 200 ") and served.endswith(b"\r\n\r\n/echo")
    assert [r.target for r in handler.requests] == ["/echo"]


def test_headers_over_16_kib_are_answered_431() -> None:
    async def scenario() -> bytes:
        async with serve(_factory(ScriptedHandler())) as port:
            big = "".join(f"X-Filler-{n}: {'v' * 1000}\r\n" for n in range(20))
            return await _exchange(port, f"GET /echo HTTP/1.1\r\n{big}\r\n".encode())

    assert run(scenario).startswith(b"HTTP/1.1 431 ")


def test_one_endless_header_is_answered_431() -> None:
    async def scenario() -> bytes:
        async with serve(_factory(ScriptedHandler())) as port:
            reader, writer = await _connect(port)
            writer.write(b"GET /echo HTTP/1.1\r\nX-Long: ")
            for _ in range(40):
                writer.write(b"v" * 1024)
                await writer.drain()
            data = await reader.read()
            writer.close()
            return data

    assert run(scenario).startswith(b"HTTP/1.1 431 ")


def test_http_3_and_http_2_request_lines_are_answered_505() -> None:
    async def scenario() -> list[bytes]:
        async with serve(_factory(ScriptedHandler())) as port:
            return [
                await _exchange(port, f"GET /echo HTTP/{v}\r\nHost: x\r\n\r\n".encode())
                for v in ("3.0", "2.0")
            ]

    for data in run(scenario):
        assert data.startswith(b"HTTP/1.1 505 ")


def test_body_over_the_limit_is_answered_413_by_length_and_by_chunks() -> None:
    limits = HttpLimits(max_body_bytes=100)

    async def scenario() -> list[bytes]:
        async with serve(_factory(ScriptedHandler(), limits)) as port:
            declared = await _exchange(
                port, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n"
            )
            chunked = await _exchange(
                port,
                b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"40\r\n"
                + b"a" * 64
                + b"\r\n"
                + b"40\r\n"
                + b"b" * 64
                + b"\r\n",
            )
            return [declared, chunked]

    for data in run(scenario):
        assert data.startswith(b"HTTP/1.1 413 ")


def test_connection_close_is_honoured() -> None:
    async def scenario() -> bytes:
        async with serve(_factory(ScriptedHandler())) as port:
            return await _exchange(
                port, b"GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )

    data = run(scenario)
    assert data.startswith(b"HTTP/1.1 200 ")
    assert b"connection: close" in data.lower()
    assert data.endswith(b"/echo")


def test_http_1_0_stream_is_close_delimited() -> None:
    async def scenario() -> bytes:
        handler = ScriptedHandler()
        async with serve(_factory(handler)) as port:
            reader, writer = await _connect(port)
            writer.write(b"GET /stream HTTP/1.0\r\n\r\n")
            await handler.stream_opened.wait()
            handler.streams[0].send_data(b"data:a\n\n")
            handler.streams[0].send_data(b"data:b\n\n", end=True)
            data = await reader.read()
            writer.close()
            return data

    data = run(scenario)
    assert b"transfer-encoding" not in data
    assert data.endswith(b"\r\n\r\ndata:a\n\ndata:b\n\n")


def test_idle_keep_alive_connection_is_closed_but_a_quiet_stream_is_not() -> None:
    limits = HttpLimits(idle_timeout=0.2)

    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler, limits)) as port:
            idle_reader, idle_writer = await _connect(port)
            idle_writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            await read_h1_response(idle_reader)
            reader, writer = await _connect(port)
            writer.write(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            await read_h1_response(reader, head_only=True)
            assert await asyncio.wait_for(idle_reader.read(), 2) == b""
            await asyncio.sleep(0.3)
            handler.streams[0].send_data(b"data:late\n\n")
            assert await read_chunks(reader, until_end=False) == b"data:late\n\n"
            idle_writer.close()
            writer.close()

    run(scenario)


def test_reset_closes_the_connection_and_peer_close_fires_on_close() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        closed: list[int] = []
        async with serve(_factory(handler)) as port:
            reader, writer = await _connect(port)
            writer.write(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            await handler.stream_opened.wait()
            handler.streams[0].on_close(lambda: closed.append(0))
            handler.streams[0].reset()
            assert await asyncio.wait_for(reader.read(), 2) != b"HTTP"
            assert handler.streams[0].closed
            writer.close()

            handler.stream_opened.clear()
            reader, writer = await _connect(port)
            writer.write(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            await handler.stream_opened.wait()
            handler.streams[1].on_close(lambda: closed.append(1))
            writer.close()
            for _ in range(100):
                if 1 in closed:
                    break
                await asyncio.sleep(0.01)
        assert closed == [0, 1]

    run(scenario)


def test_slow_reader_grows_buffered_and_drain_fires_after_reading() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler)) as port:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
            reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 20)
            writer.write(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            await handler.stream_opened.wait()
            stream = handler.streams[0]
            drained = asyncio.Event()
            stream.on_drain(drained.set)
            chunk = b"x" * 65536
            sent = 0
            while stream.buffered < 512 * 1024 and sent < 64 * 1024 * 1024:
                stream.send_data(chunk)
                sent += len(chunk)
                await asyncio.sleep(0)
            assert stream.buffered >= 512 * 1024
            assert not drained.is_set()
            await read_h1_response(reader, head_only=True)
            while not drained.is_set():
                await asyncio.wait_for(reader.read(1 << 20), 2)
            assert stream.buffered < 512 * 1024
            writer.close()

    run(scenario)


def test_a_client_that_half_closes_an_open_stream_is_let_go_at_once() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        closed = asyncio.Event()
        async with serve(_factory(handler)) as port:
            _reader, writer = await _connect(port)
            writer.write(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            await handler.stream_opened.wait()
            handler.streams[0].on_close(closed.set)
            writer.write_eof()  # FIN: what a client that stops reading an event stream sends
            await asyncio.wait_for(closed.wait(), 2)
            assert handler.streams[0].closed
            writer.close()

    run(scenario)


def test_a_half_closed_request_with_a_finite_response_is_still_answered() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler)) as port:
            reader, writer = await _connect(port)
            writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            writer.write_eof()
            response = await asyncio.wait_for(read_h1_response(reader), 2)
            assert (response.status, response.body) == (200, b"/echo")
            writer.close()

    run(scenario)
