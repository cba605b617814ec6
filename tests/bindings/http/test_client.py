"""The http client binding against scripted servers on 127.0.0.1: HTTP/1.1, h2c, and over TLS."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import h2.config
import h2.connection
import h2.events
import pytest
from tests.support.schema_errors import binding_errors

from ssegate.bindings.http.client import HttpClient, build
from ssegate.bindings.tcp.client import TcpClient
from ssegate.bindings.tls.client import TlsClient
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import ExitKind
from ssegate.telemetry.metrics import Metrics
from support.http_certs import client_context, make_self_signed, server_context

T = TypeVar("T")


class Context:
    def __init__(self, exit: Any) -> None:
        self.metrics = Metrics()
        self._exit = exit

    def exit(self, name: str, kind: ExitKind[T], where: str) -> T:
        return kind.require(self._exit, where, repr(name))


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
    assert binding_errors("c", "http", "client", options={"versions": ["http/3"]}) == [
        "bindings.c.options.versions[0]: 'http/3' is not one of ['http/1.1', 'h2']"
    ]


def limited(port: int, versions: list[str], **options: int) -> HttpClient:
    settings: dict[str, Any] = {
        "versions": versions,
        **{k.replace("_", "-"): v for k, v in options.items()},
    }
    binding = Binding("south_http_client", "http", "client", settings, exit="tcp")
    return build(binding, Context(TcpClient("tcp", "127.0.0.1", port)))  # type: ignore[arg-type]


@pytest.mark.parametrize("versions", [["http/1.1"], ["h2"]], ids=["http/1.1", "h2"])
@pytest.mark.parametrize(
    "value", ["1\r\nx-injected: yes", "1\nx", "1\x00"], ids=["crlf", "lf", "nul"]
)
def test_a_header_value_with_cr_lf_or_nul_is_refused_before_a_byte_is_written(
    versions: list[str], value: str
) -> None:
    async def scenario() -> None:
        port, heads, server = await raw_server(b"HTTP/1.1 204 No Content\r\n\r\n")
        recorder = Recorder()
        http = limited(port, versions)
        await http.open_stream("GET", "/", [("last-event-id", value)], **recorder.callbacks())
        outcome = await recorder.outcome
        assert outcome.startswith("error: header 'last-event-id' value ")
        assert outcome.endswith("holds a character a field value may not (CR, LF, NUL, VT or FF)")
        await asyncio.sleep(0.05)
        assert heads == [] and recorder.status == 0
        assert http.metrics.counter("ssegate.http.client.requests_refused", http.name) == 1
        server.close()

    run(scenario)


def test_header_values_go_out_as_utf_8_without_the_spaces_around_them() -> None:
    async def scenario() -> None:
        port, heads, server = await raw_server(b"HTTP/1.1 204 No Content\r\n\r\n")
        recorder = Recorder()
        headers = [("last-event-id", " 日本\t"), ("x-empty", "  ")]
        await client(port, ["http/1.1"]).open_stream("GET", "/", headers, **recorder.callbacks())
        assert await recorder.outcome == "end"
        assert "last-event-id: 日本\r\nx-empty: \r\n".encode() in heads[0]
        server.close()

    run(scenario)


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"


@pytest.mark.parametrize(
    ("response", "outcome"),
    [
        (HEAD + b"x-big: " + b"v" * 2000 + b"\r\n\r\ndata:x\n\n", "over 1024 bytes"),
        (HEAD + b"x-endless: " + b"v" * 4000, "over 1024 bytes"),
        (HEAD + b"".join(b"x-%d: v\r\n" % n for n in range(5)) + b"\r\n", "over 5 header fields"),
        (
            b"HTTP/1.1 103 Early Hints\r\n" + b"link: v\r\n" * 5 + b"\r\n" + HEAD + b"\r\n",
            "over 5 header fields",  # interim heads count too
        ),
    ],
    ids=["one-read", "endless", "count", "count-with-1xx"],
)
def test_http11_response_head_over_a_limit_ends_the_stream(response: bytes, outcome: str) -> None:
    async def scenario() -> None:
        port, _, server = await raw_server(response)
        recorder = Recorder()
        http = limited(port, ["http/1.1"], max_head_bytes=1024, max_headers=5)
        await http.open_stream("GET", "/", [], **recorder.callbacks())
        assert await recorder.outcome == f"error: upstream response head is {outcome}"
        assert recorder.status == 0
        limit = "bytes" if "bytes" in outcome else "headers"
        assert http.metrics.counter("ssegate.http.client.head_limit", http.name, limit=limit) == 1
        server.close()

    run(scenario)


def test_http11_response_head_at_the_limits_is_read() -> None:
    filler = b"x-f: " + b"v" * (1024 - len(HEAD) - len(b"x-f: \r\n\r\n") - len(b"x-n: 1\r\n") * 3)
    response = HEAD + b"x-n: 1\r\n" * 3 + filler + b"\r\n\r\ndata:x\n\n"
    assert len(response.split(b"\r\n\r\n")[0]) + 4 == 1024

    async def scenario() -> None:
        port, _, server = await raw_server(response, close=True)
        recorder = Recorder()
        http = limited(port, ["http/1.1"], max_head_bytes=1024, max_headers=5)
        await http.open_stream("GET", "/", [], **recorder.callbacks())
        assert await recorder.outcome == "end"
        assert (recorder.status, recorder.body) == (200, b"data:x\n\n")
        server.close()

    run(scenario)


class WideH2Server(H2Server):
    """Answers every request with ``fields`` extra header fields of ``size`` bytes each."""

    fields = 0
    size = 1

    def data_received(self, data: bytes) -> None:
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                extra = [(f"x-{n}", "v" * self.size) for n in range(self.fields)]
                self.conn.send_headers(event.stream_id, [(":status", "200"), *extra])
        self.transport.write(self.conn.data_to_send())


@pytest.mark.parametrize(
    ("fields", "size", "outcome"),
    [(6, 1, "over 5 header fields"), (1, 2000, "over 1024 bytes")],
    ids=["count", "bytes"],
)
def test_h2_response_head_over_a_limit_ends_the_stream(
    fields: int, size: int, outcome: str
) -> None:
    async def scenario() -> None:
        WideH2Server.fields, WideH2Server.size = fields, size
        server = await asyncio.get_running_loop().create_server(WideH2Server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        recorder = Recorder()
        http = limited(port, ["h2"], max_head_bytes=1024, max_headers=5)
        await http.open_stream("GET", "/", [], **recorder.callbacks())
        assert await recorder.outcome == f"error: upstream response head is {outcome}"
        server.close()

    run(scenario)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max-head-bytes": 0}, "max-head-bytes: 0 is less than the minimum of 1"),
        ({"max-headers": "100"}, "max-headers: expected a whole number, got '100'"),
    ],
)
def test_bad_head_limits_are_config_errors(options: dict[str, Any], error: str) -> None:
    assert binding_errors("c", "http", "client", options=options) == [f"bindings.c.options.{error}"]


def test_a_head_limit_written_with_a_decimal_point_is_a_config_error() -> None:
    binding = Binding("c", "http", "client", {"max-headers": 5.0}, exit="tcp")
    with pytest.raises(ConfigError) as caught:
        build(binding, Context(TcpClient("tcp", "h", 1)))  # type: ignore[arg-type]
    assert str(caught.value) == "bindings.c.options.max-headers: 5.0 is not a positive whole number"


class Exits:
    """A build context whose exits are the given built bindings, by name."""

    def __init__(self, **built: Any) -> None:
        self.metrics = Metrics()
        self._built = built

    def exit(self, name: str, kind: ExitKind[T], where: str) -> T:
        return kind.require(self._built[name], where, repr(name))


def test_through_a_tls_client_the_request_goes_over_tls_with_its_server_name(
    tmp_path: Path,
) -> None:
    files = make_self_signed(tmp_path)
    server_names: list[str | None] = []
    upstream_context = server_context(files, ["http/1.1"])
    upstream_context.sni_callback = lambda _ssl, name, _ctx: server_names.append(name)

    async def scenario() -> None:
        heads: list[bytes] = []
        response = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
        server = await asyncio.get_running_loop().create_server(
            lambda: RawServer(response, False, heads), "127.0.0.1", 0, ssl=upstream_context
        )
        port = server.sockets[0].getsockname()[1]
        tls = TlsClient(
            "tls", client_context(files, ["http/1.1"]), "tcp", "localhost", ("http/1.1",)
        )
        binding = Binding("c", "http", "client", {"versions": ["http/1.1"]}, exit="tls")
        http = build(binding, Exits(tls=tls, tcp=TcpClient("tcp", "127.0.0.1", port)))  # type: ignore[arg-type]
        assert http.scheme == "https"
        recorder = Recorder()
        await http.open_stream("GET", "/", [], **recorder.callbacks())
        assert await recorder.outcome == "end"
        assert (recorder.status, recorder.body) == (200, b"ok")
        assert heads[0].startswith(b"GET / HTTP/1.1\r\nhost: 127.0.0.1:")
        server.close()

    run(scenario)
    assert server_names == ["localhost"]


def test_an_exit_that_is_not_a_tcp_or_tls_client_is_a_config_error() -> None:
    binding = Binding("c", "http", "client", {}, exit="files")
    with pytest.raises(ConfigError) as caught:
        build(binding, Exits(files=object()))  # type: ignore[arg-type]
    assert caught.value.path == "bindings.c.exit"
