"""An example upstream SSE server, for demos and the sse client's tests.

Two ports: an HTTP/1.1 port where a ``GET`` on any path opens an event stream (chunked), and a
publish port where every line a TCP client writes is broadcast to all streams as an event with
the next integer id. A stream that asks with ``last-event-id: N`` first gets the events after
``N`` still held in a bounded in-memory history.

    python -m ssegate.tools.sse_server --http-port 8001 --publish-port 7001
    echo 'hello' | nc localhost 7001
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections import deque
from typing import cast

import httptools

from ssegate.sse_codec.encoder import encode_event

DEFAULT_HISTORY = 1000


class ExampleSseServer:
    """The example server's state: its history, its open streams and its listeners."""

    def __init__(self, host: str = "127.0.0.1", history_size: int = DEFAULT_HISTORY) -> None:
        self.host = host
        self.history: deque[tuple[int, bytes]] = deque(maxlen=history_size)
        self.last_id = 0
        self.http_port = 0
        self.publish_port = 0
        self.streams: set[_StreamConnection] = set()
        self._servers: list[asyncio.AbstractServer] = []
        self._transports: set[asyncio.BaseTransport] = set()

    async def start(self, http_port: int = 0, publish_port: int = 0) -> None:
        """Listen (port 0 picks a free one; the real ports are then in the attributes)."""
        loop = asyncio.get_running_loop()
        http = await loop.create_server(lambda: _StreamConnection(self), self.host, http_port)
        publish = await loop.create_server(
            lambda: _PublishConnection(self), self.host, publish_port
        )
        self._servers = [http, publish]
        self.http_port = http.sockets[0].getsockname()[1]
        self.publish_port = publish.sockets[0].getsockname()[1]

    def publish(self, data: str) -> int:
        """Broadcast ``data`` as the next event; returns its id."""
        self.last_id += 1
        block = encode_event(data, id=str(self.last_id))
        self.history.append((self.last_id, block))
        for stream in list(self.streams):
            stream.send(block)
        return self.last_id

    def replay_after(self, last_event_id: str | None) -> list[bytes]:
        """The held events after ``last_event_id`` (all of them when it is not a number)."""
        if last_event_id is None:
            return []
        after = int(last_event_id) if last_event_id.isdigit() else 0
        return [block for event_id, block in self.history if event_id > after]

    async def close(self) -> None:
        """Stop listening and drop every connection; the history is kept for a restart."""
        for server in self._servers:
            server.close()
        for transport in list(self._transports):
            transport.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers = []
        self.streams.clear()

    def track(self, transport: asyncio.BaseTransport, live: bool) -> None:
        if live:
            self._transports.add(transport)
        else:
            self._transports.discard(transport)


class _StreamConnection(asyncio.Protocol):
    """One HTTP/1.1 connection on the stream port."""

    def __init__(self, server: ExampleSseServer) -> None:
        self._server = server
        self._parser = httptools.HttpRequestParser(self)
        self._headers: dict[str, str] = {}
        self._transport: asyncio.Transport | None = None

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        transport = cast(asyncio.Transport, base)
        self._transport = transport
        self._server.track(transport, True)

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.streams.discard(self)
        if self._transport is not None:
            self._server.track(self._transport, False)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._answer(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_message_complete(self) -> None:
        if self._parser.get_method() != b"GET":
            self._answer(
                b"HTTP/1.1 405 Method Not Allowed\r\nallow: GET\r\ncontent-length: 0\r\n\r\n"
            )
            return
        assert self._transport is not None
        self._transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        for block in self._server.replay_after(self._headers.get("last-event-id")):
            self.send(block)
        self._server.streams.add(self)

    def send(self, block: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(b"%x\r\n%b\r\n" % (len(block), block))

    def _answer(self, response: bytes) -> None:
        if self._transport is not None:
            self._transport.write(response)
            self._transport.close()


class _PublishConnection(asyncio.Protocol):
    """One TCP connection on the publish port: each line is an event."""

    def __init__(self, server: ExampleSseServer) -> None:
        self._server = server
        self._pending = b""
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        transport = cast(asyncio.Transport, base)
        self._transport = transport
        self._server.track(transport, True)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is not None:
            self._server.track(self._transport, False)

    def data_received(self, data: bytes) -> None:
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            text = line.rstrip(b"\r").decode("utf-8", "replace")
            if text:
                self._server.publish(text)


async def serve(http_port: int, publish_port: int, host: str = "127.0.0.1") -> None:
    """Run the example server until cancelled."""
    server = ExampleSseServer(host)
    await server.start(http_port, publish_port)
    print(
        f"sse server: streams on http://{host}:{server.http_port}/, "
        f"publish lines to {host}:{server.publish_port}",
        flush=True,
    )
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ssegate.tools.sse_server", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--http-port", type=int, default=8001)
    parser.add_argument("--publish-port", type=int, default=7001)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.http_port, args.publish_port, args.host))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
