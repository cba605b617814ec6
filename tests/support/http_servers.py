"""Real HTTP servers and clients on 127.0.0.1 for the HTTP binding tests.

``serve`` listens on an ephemeral port with any protocol factory; ``ScriptedHandler`` answers a
few fixed paths; ``read_h1_response`` reads one HTTP/1.1 response off a stream; ``H2Client`` is
the ``h2`` state machine, client side, over a plain asyncio connection.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

import h2.config
import h2.connection
import h2.events
import uvloop

from ssegate.contract.exchange import Request, ResponseStream, simple_response

T = TypeVar("T")


def run(scenario: Callable[[], Coroutine[Any, Any, T]], timeout: float = 10.0) -> T:
    """Run ``scenario`` on a fresh uvloop, failing after ``timeout`` seconds."""

    async def bounded() -> T:
        return await asyncio.wait_for(scenario(), timeout)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(bounded())


@asynccontextmanager
async def serve(
    factory: Callable[[], asyncio.Protocol], tls: ssl.SSLContext | None = None
) -> AsyncIterator[int]:
    """Listen on 127.0.0.1 with ``factory``; yields the port."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(factory, "127.0.0.1", 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


class ScriptedHandler:
    """``/echo`` answers the body (or target), ``/stream`` stays open, ``/fail`` raises."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.streams: list[ResponseStream] = []
        self.stream_opened = asyncio.Event()

    def handle(self, request: Request, body: bytes, stream: ResponseStream) -> None:
        self.requests.append(request)
        if request.path == "/echo":
            answer = body or request.target.encode()
            simple_response(stream, 200, answer, content_type="application/octet-stream")
        elif request.path == "/stream":
            stream.send_headers(200, [("content-type", "text/event-stream")])
            self.streams.append(stream)
            self.stream_opened.set()
        elif request.path == "/fail":
            raise RuntimeError("handler broke")
        else:
            simple_response(stream, 404, b"no such path\n")


@dataclass
class H1Response:
    status: int
    headers: dict[str, str]
    body: bytes
    raw_head: bytes = b""


async def read_h1_response(reader: asyncio.StreamReader, head_only: bool = False) -> H1Response:
    """One HTTP/1.1 response: content-length, chunked, or until close."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if head_only or status in (204, 304):
        return H1Response(status, headers, b"", head)
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        body = await read_chunks(reader)
    else:
        body = await reader.read()
    return H1Response(status, headers, body, head)


async def read_chunks(reader: asyncio.StreamReader, until_end: bool = True) -> bytes:
    """Decode chunked body data up to the last chunk."""
    body = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)
        if not until_end:
            return bytes(body)


@dataclass
class H2Client:
    """An HTTP/2 client: the ``h2`` connection, client side, over an asyncio stream pair."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    conn: h2.connection.H2Connection
    events: list[h2.events.Event] = field(default_factory=list)

    @classmethod
    async def connect(cls, port: int, tls: ssl.SSLContext | None = None) -> H2Client:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=tls, server_hostname="localhost" if tls else None
        )
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        client = cls(reader, writer, h2.connection.H2Connection(config=config))
        client.conn.initiate_connection()
        client.flush()
        return client

    def flush(self) -> None:
        self.writer.write(self.conn.data_to_send())

    def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        extra: tuple[tuple[str, str], ...] = (),
    ) -> int:
        stream_id: int = self.conn.get_next_available_stream_id()
        headers = [
            (":method", method),
            (":scheme", "https"),
            (":authority", "localhost"),
            (":path", path),
            *extra,
        ]
        self.conn.send_headers(stream_id, headers, end_stream=not body)
        if body:
            self.conn.send_data(stream_id, body, end_stream=True)
        self.flush()
        return stream_id

    async def until(
        self, done: Callable[[h2.events.Event], bool], *, acknowledge: bool = True
    ) -> h2.events.Event:
        """Read until an event satisfies ``done``; every event read is kept in ``events``."""
        while True:
            data = await self.reader.read(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            for event in self.conn.receive_data(data):
                self.events.append(event)
                if acknowledge and isinstance(event, h2.events.DataReceived):
                    self.conn.acknowledge_received_data(
                        event.flow_controlled_length, event.stream_id
                    )
                if done(event):
                    self.flush()
                    return event
            self.flush()

    def body(self, stream_id: int) -> bytes:
        return b"".join(
            e.data or b""
            for e in self.events
            if isinstance(e, h2.events.DataReceived) and e.stream_id == stream_id
        )

    def response_headers(self, stream_id: int) -> dict[bytes, bytes]:
        for event in self.events:
            if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream_id:
                return dict(event.headers or [])
        raise AssertionError(f"no response on stream {stream_id}")

    async def close(self) -> None:
        self.writer.close()
        with suppress(ConnectionError, ssl.SSLError):
            await self.writer.wait_closed()


def ended(stream_id: int) -> Callable[[h2.events.Event], bool]:
    return lambda e: isinstance(e, h2.events.StreamEnded) and e.stream_id == stream_id


def reset(stream_id: int) -> Callable[[h2.events.Event], bool]:
    return lambda e: isinstance(e, h2.events.StreamReset) and e.stream_id == stream_id
