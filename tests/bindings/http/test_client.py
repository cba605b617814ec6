"""The http client binding against scripted servers on 127.0.0.1: HTTP/1.1 and h2c."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import h2.config
import h2.connection
import h2.events
import pytest

from ssegate.bindings.http.client import HttpClient, build
from ssegate.bindings.tcp.client import TcpClient
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.telemetry.metrics import Metrics


class Context:
    def __init__(self, exit: Any) -> None:
        self.metrics = Metrics()
        self._exit = exit

    def exit(self, name: str) -> Any:
        return self._exit


def client(port: int, versions: list[str]) -> HttpClient:
    binding = Binding("south_http_client", "http", "client", {"versions": versions}, exit="tcp")
    tcp = TcpClient("tcp", "127.0.0.1", port)
    return build(binding, Context(tcp))  # type: ignore[arg-type]


class Recorder:
    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""
        self.outcome: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def callbacks(self) -> dict[str, Any]:
        return {
            "on_response": self.on_response,
            "on_data": self.on_data,
            "on_end": lambda: self.outcome.set_result("end"),
            "on_error": lambda exc: self.outcome.set_result(f"error: {exc}"),
        }

    def on_response(self, status: int, headers: dict[str, str]) -> None:
        self.status, self.headers = status, headers

    def on_data(self, data: bytes) -> None:
        self.body += data


class RawServer(asyncio.Protocol):
    """Answers the first request head with fixed bytes, then optionally closes."""

    def __init__(self, response: bytes, close: bool, heads: list[bytes]) -> None:
        self.response, self.close, self.heads, self.buffer = response, close, heads, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop transports are not asyncio.Transport subclasses; they behave as one.
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if b"\r\n\r\n" in self.buffer:
            self.heads.append(self.buffer)
            self.transport.write(self.response)
            if self.close:
                self.transport.close()


async def raw_server(response: bytes, *, close: bool = False) -> tuple[int, list[bytes], Any]:
    heads: list[bytes] = []
    server = await asyncio.get_running_loop().create_server(
        lambda: RawServer(response, close, heads), "127.0.0.1", 0
    )
    return server.sockets[0].getsockname()[1], heads, server


def run(scenario: Callable[[], Any]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 10))


@pytest.mark.parametrize(
    ("response", "close"),
    [
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            False,
        ),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nabcde", False),
        (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\nabcde", True),
    ],
    ids=["chunked", "content-length", "close-delimited"],
)
def test_http11_response_bodies_are_streamed_to_the_end(response: bytes, close: bool) -> None:
    async def scenario() -> None:
        port, heads, server = await raw_server(response, close=close)
        recorder = Recorder()
        await client(port, ["http/1.1"]).open_stream(
            "GET",
            "/events?x=1",
            [("accept", "text/event-stream")],
            authority="example:80",
            **recorder.callbacks(),
        )
        assert await recorder.outcome == "end"
        assert (recorder.status, recorder.body) == (200, b"abcde")
        assert heads[0].startswith(b"GET /events?x=1 HTTP/1.1\r\nhost: example:80\r\n")
        assert b"accept: text/event-stream\r\n" in heads[0]
        server.close()

    run(scenario)


def test_http11_connection_lost_mid_chunked_body_is_an_error() -> None:
    async def scenario() -> None:
        response = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n"
        port, _, server = await raw_server(response, close=True)
        recorder = Recorder()
        await client(port, ["http/1.1"]).open_stream("GET", "/", [], **recorder.callbacks())
        assert (await recorder.outcome).startswith("error: upstream closed")
        assert recorder.body == b"abc"
        server.close()

    run(scenario)


def test_garbage_instead_of_http_is_an_error() -> None:
    async def scenario() -> None:
        port, _, server = await raw_server(b"SSH-2.0-OpenSSH\r\n\r\n")
        recorder = Recorder()
        await client(port, ["http/1.1"]).open_stream("GET", "/", [], **recorder.callbacks())
        assert (await recorder.outcome).startswith("error: bad HTTP/1.1 response")
        server.close()

    run(scenario)


def test_cancel_closes_the_connection_without_callbacks() -> None:
    async def scenario() -> None:
        response = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        port, _, server = await raw_server(response)
        recorder = Recorder()
        stream = await client(port, ["http/1.1"]).open_stream(
            "GET", "/", [], **recorder.callbacks()
        )
        for _ in range(100):
            if recorder.status:
                break
            await asyncio.sleep(0.01)
        stream.cancel()
        await asyncio.sleep(0.05)
        assert not recorder.outcome.done()
        server.close()

    run(scenario)


class H2Server(asyncio.Protocol):
    """A cleartext HTTP/2 server that answers every request with two DATA frames."""

    seen: list[dict[str, str]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop transports are not asyncio.Transport subclasses; they behave as one.
        self.transport = transport
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.initiate_connection()
        transport.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                H2Server.seen.append({str(k): str(v) for k, v in event.headers})
                sid = event.stream_id
                self.conn.send_headers(
                    sid, [(":status", "200"), ("content-type", "text/event-stream")]
                )
                self.conn.send_data(sid, b"data:a\n\n")
                self.conn.send_data(sid, b"data:b\n\n", end_stream=True)
        self.transport.write(self.conn.data_to_send())


def test_h2_with_prior_knowledge_on_cleartext() -> None:
    async def scenario() -> None:
        server = await asyncio.get_running_loop().create_server(H2Server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        recorder = Recorder()
        await client(port, ["h2"]).open_stream(
            "GET",
            "/events",
            [("accept", "text/event-stream"), ("host", "ignored")],
            authority="example",
            **recorder.callbacks(),
        )
        assert await recorder.outcome == "end"
        assert recorder.status == 200
        assert recorder.headers["content-type"] == "text/event-stream"
        assert recorder.body == b"data:a\n\ndata:b\n\n"
        request = H2Server.seen[-1]
        assert request[":path"] == "/events" and request[":authority"] == "example"
        assert request[":scheme"] == "http" and "host" not in request
        server.close()

    run(scenario)


def test_unknown_version_is_a_config_error() -> None:
    binding = Binding("c", "http", "client", {"versions": ["http/3"]}, exit="tcp")
    with pytest.raises(ConfigError) as caught:
        build(binding, Context(TcpClient("tcp", "h", 1)))  # type: ignore[arg-type]
    assert caught.value.path == "bindings.c.options.versions"
