"""The upstream proxy chain end to end over real sockets on 127.0.0.1.

sse server (recording downstream stream) → sse client → http client → tcp client → upstream,
where the upstream is the example server (``ssegate.tools.sse_server``) or a scripted raw
HTTP/1.1 server for the misbehaving cases.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import pytest

from ssegate.bindings.http.client import build as build_http_client
from ssegate.bindings.sse.client import build as build_sse_client
from ssegate.bindings.sse.client import reconnect_delay
from ssegate.bindings.sse.server import SseServer
from ssegate.bindings.sse.server import build as build_sse_server
from ssegate.bindings.tcp.client import build as build_tcp_client
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Component, Config
from ssegate.contract.exchange import DirectSocket, Request
from ssegate.engine.context import ExitKind
from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate.telemetry.metrics import Metrics
from ssegate.tools.sse_server import ExampleSseServer

T = TypeVar("T")


class RecordingStream:
    """A downstream ResponseStream that keeps what was sent."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.body = b""
        self.ended = False
        self.was_reset = False
        self.was_aborted = False
        self.buffered = 0
        self._close_callbacks: list[Callable[[], None]] = []

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        self.statuses.append(status)
        if end:
            self.peer_goes_away()

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        self.body += data
        if end:
            self.peer_goes_away()

    def reset(self) -> None:
        self.was_reset = True
        self.peer_goes_away()

    def abort(self, connection_limit: int) -> None:
        self.was_aborted = True
        self.peer_goes_away()

    @property
    def unsent(self) -> int:
        return self.buffered

    @property
    def writable(self) -> bool:
        return True  # it never refuses: found slow by its unsent bytes alone

    @property
    def closed(self) -> bool:
        return self.ended

    def on_close(self, callback: Callable[[], None]) -> None:
        self._close_callbacks.append(callback)

    def on_drain(self, callback: Callable[[], None]) -> None:
        pass

    def direct_socket(self) -> DirectSocket | None:
        return None

    def peer_goes_away(self) -> None:
        if not self.ended:
            self.ended = True
            for callback in self._close_callbacks:
                callback()

    def events(self) -> list[SseEvent]:
        return [e for e in SseParser().feed(self.body) if isinstance(e, SseEvent)]


class Context:
    def __init__(self) -> None:
        self.metrics = Metrics()
        self.config = Config("test", {})
        self.built: dict[str, Any] = {}

    def exit(self, name: str, kind: ExitKind[T], where: str) -> T:
        return kind.require(self.built[name], where, repr(name))

    def vault(self, name: str) -> Any:
        raise KeyError(name)

    def guard(self, name: str) -> Any:
        raise KeyError(name)

    def component(self, kind: str, name: str) -> Component:
        raise KeyError(name)

    def resolve_path(self, path: str) -> str:
        return path

    def binding(self, name: str) -> Binding:
        raise KeyError(name)


def chain(port: int, retry: int = 40) -> SseServer:
    """Seed 000's south side, pointed at 127.0.0.1:port."""
    ctx = Context()
    tcp = Binding("south_tcp_client", "tcp", "client", {"host": "127.0.0.1", "port": port})
    http = Binding("south_http_client", "http", "client", {"versions": ["http/1.1"]})
    http = Binding(http.name, http.type, http.kind, http.options, exit="south_tcp_client")
    sse = Binding("south_sse_client", "sse", "client", {"retry": retry}, exit="south_http_client")
    ctx.built["south_tcp_client"] = build_tcp_client(tcp, ctx)
    ctx.built["south_http_client"] = build_http_client(http, ctx)
    ctx.built["south_sse_client"] = build_sse_client(sse, ctx)
    server = Binding("north_sse_server", "sse", "server", exit="south_sse_client")
    return build_sse_server(server, ctx)


def subscribe(server: SseServer, headers: dict[str, str] | None = None) -> RecordingStream:
    stream = RecordingStream()
    request = Request("GET", "http", "localhost", "/events", headers or {}, remote="test")
    server.handle(request, b"", stream)
    return stream


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 15))


class ScriptedUpstream(asyncio.Protocol):
    """A raw HTTP/1.1 upstream: on each request head, runs the script for that connection."""

    def __init__(
        self, scripts: list[Callable[[asyncio.Transport], Coroutine[Any, Any, None]]]
    ) -> None:
        self.scripts = scripts
        self.requests: list[bytes] = []
        self._head = b""

    def __call__(self) -> ScriptedUpstream:
        connection = ScriptedUpstream(self.scripts)
        connection.requests = self.requests
        return connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop transports are not asyncio.Transport subclasses; they behave as one.
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._head += data
        if b"\r\n\r\n" in self._head and self.scripts:
            self.requests.append(self._head)
            script = self.scripts.pop(0)
            asyncio.get_running_loop().create_task(script(self.transport))


async def start_scripted(
    *scripts: Callable[[asyncio.Transport], Coroutine[Any, Any, None]],
) -> tuple[asyncio.AbstractServer, ScriptedUpstream, int]:
    upstream = ScriptedUpstream(list(scripts))
    server = await asyncio.get_running_loop().create_server(upstream, "127.0.0.1", 0)
    return server, upstream, server.sockets[0].getsockname()[1]


def answer(
    head: bytes, *chunks: bytes, close: bool = False
) -> Callable[[asyncio.Transport], Coroutine[Any, Any, None]]:
    async def script(transport: asyncio.Transport) -> None:
        transport.write(head)
        for chunk in chunks:
            transport.write(chunk)
            await asyncio.sleep(0.02)
        if close:
            transport.close()

    return script


STREAM_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n\r\n"


def test_events_are_relayed_in_order_with_their_ids() -> None:
    async def scenario() -> None:
        upstream = ExampleSseServer()
        await upstream.start()
        server = chain(upstream.http_port)
        stream = subscribe(server)
        await until(lambda: stream.statuses == [200] and len(upstream.streams) == 1)
        for text in ("one", "two", "three"):
            upstream.publish(text)
        await until(lambda: len(stream.events()) == 3)
        assert [(e.id, e.data) for e in stream.events()] == [
            ("1", "one"),
            ("2", "two"),
            ("3", "three"),
        ]
        stream.peer_goes_away()
        await until(lambda: not upstream.streams)
        await upstream.close()

    run(scenario)


def test_downstream_last_event_id_is_sent_upstream_and_history_replayed() -> None:
    async def scenario() -> None:
        upstream = ExampleSseServer()
        await upstream.start()
        for text in ("a", "b", "c"):
            upstream.publish(text)
        stream = subscribe(chain(upstream.http_port), {"last-event-id": "1"})
        await until(lambda: len(stream.events()) == 2)
        assert [(e.id, e.data) for e in stream.events()] == [("2", "b"), ("3", "c")]
        stream.peer_goes_away()
        await upstream.close()

    run(scenario)


def test_upstream_restart_mid_stream_resumes_with_no_loss_and_no_duplicates() -> None:
    async def scenario() -> None:
        upstream = ExampleSseServer()
        await upstream.start()
        port = upstream.http_port
        server = chain(port)
        stream = subscribe(server)
        await until(lambda: len(upstream.streams) == 1)
        upstream.publish("1")
        upstream.publish("2")
        await until(lambda: len(stream.events()) == 2)
        await upstream.close()
        upstream.publish("3")  # published while the stream port is down: kept in history
        upstream.publish("4")
        await asyncio.sleep(0.1)
        await upstream.start(http_port=port)
        await until(lambda: len(upstream.streams) == 1)
        upstream.publish("5")
        await until(lambda: len(stream.events()) == 5)
        await asyncio.sleep(0.05)
        assert [e.id for e in stream.events()] == ["1", "2", "3", "4", "5"]
        assert [e.data for e in stream.events()] == ["1", "2", "3", "4", "5"]
        assert stream.statuses == [200]
        assert not stream.ended
        assert server.metrics.total("ssegate.sse.upstream_reconnects") >= 1
        stream.peer_goes_away()
        await upstream.close()

    run(scenario)


def test_upstream_500_before_the_first_event_is_answered_502() -> None:
    async def scenario() -> None:
        head = b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\noops"
        listener, _, port = await start_scripted(answer(head))
        stream = subscribe(chain(port))
        await until(lambda: stream.ended)
        assert stream.statuses == [502]
        assert b"upstream answered 500" in stream.body
        listener.close()

    run(scenario)


def test_wrong_upstream_content_type_is_answered_502() -> None:
    async def scenario() -> None:
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nhi"
        listener, _, port = await start_scripted(answer(head))
        stream = subscribe(chain(port))
        await until(lambda: stream.ended)
        assert stream.statuses == [502]
        assert b"text/plain" in stream.body
        listener.close()

    run(scenario)


def test_unreachable_upstream_is_answered_502() -> None:
    async def scenario() -> None:
        stream = subscribe(chain(free_port()))
        await until(lambda: stream.ended)
        assert stream.statuses == [502]
        assert b"unreachable" in stream.body

    run(scenario)


def test_malformed_upstream_stream_is_parsed_like_a_browser() -> None:
    async def scenario() -> None:
        body = [
            b"\xef\xbb\xbfdata: first\r",  # BOM removed; CR ...
            b"\n\r\n",  # ... then LF in the next read is the same line end
            b": comment\nid: 7\nevent\n\n",  # block without data: id 7 committed, no event
            b"data\nevent: tick\nid: 8\n\n",  # a field name alone is an empty value
            b"data:caf\xc3",
            b"\xa9 \xff\n\n",  # a character split across reads; invalid byte → U+FFFD
            b"id: 9\ndata: partial",  # never finished: discarded, id 9 not committed
        ]
        listener, upstream, port = await start_scripted(
            answer(STREAM_HEAD, *body, close=True), answer(b"HTTP/1.1 204 No Content\r\n\r\n")
        )
        stream = subscribe(chain(port))
        await until(lambda: stream.ended)
        assert stream.statuses == [200]
        assert not stream.was_reset
        relayed = [(e.type, e.data, e.id) for e in stream.events()]
        assert relayed == [
            ("message", "first", ""),
            ("tick", "", "8"),
            ("message", "café \ufffd", "8"),
        ]
        assert b"id:7\n\n" in stream.body  # the id-only block is relayed as such
        assert b"last-event-id: 8\r\n" in upstream.requests[1]
        listener.close()

    run(scenario)


def test_reconnect_refused_with_a_client_error_closes_the_downstream() -> None:
    async def scenario() -> None:
        listener, _, port = await start_scripted(
            answer(STREAM_HEAD, b"id:1\ndata:x\n\n", close=True),
            answer(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"),
        )
        stream = subscribe(chain(port))
        await until(lambda: stream.ended)
        assert stream.statuses == [200]
        assert stream.was_reset
        assert [e.data for e in stream.events()] == ["x"]
        listener.close()

    run(scenario)


def test_reconnect_delays_start_at_the_floor_double_and_stop_at_the_cap() -> None:
    assert [reconnect_delay(n, 0, 0.0) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert [reconnect_delay(n, 0, 1.0) for n in range(1, 6)] == [1.5, 3, 6, 12, 24]
    assert reconnect_delay(1, 50, 0.0) == 1  # a retry under the floor waits the floor
    assert reconnect_delay(1, 5000, 0.0) == 5  # a longer retry is honoured
    assert reconnect_delay(2, 5000, 0.5) == 12.5
    assert reconnect_delay(1000, 0, 1.0) == 30


def test_a_retry_written_with_a_decimal_point_is_a_config_error() -> None:
    binding = Binding("c", "sse", "client", {"retry": 500.0}, exit="south_http_client")
    with pytest.raises(ConfigError) as caught:
        build_sse_client(binding, Context())  # type: ignore[arg-type]
    assert str(caught.value) == "bindings.c.options.retry: 500.0 is not milliseconds"
