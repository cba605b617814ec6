"""The sse proxy against hostile input, through a real ``ssegate start`` process.

tcp → http server (HTTP/1.1) → sse server → sse client → http client (HTTP/1.1) → tcp client →
a raw upstream on 127.0.0.1, run in the test's own event loop so each test scripts it. Each test
sends one kind of hostile input — a last event id that would inject a header upstream or is not
Latin-1, an upstream whose response head never ends, a request without a ``Host`` — checks the
exact answer, the log line and the metric, then that an ordinary client is still served.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import textwrap
from collections.abc import Awaitable, Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tests.support.metrics import metric

from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate_lab.bench.gateway import GatewayProcess

pytestmark = pytest.mark.integration

STREAM_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
ENDLESS_CAP = 64 << 20
"""What an endless upstream sends at most, so a gateway that never gives up fails the test."""


NORTH = """
  north_http_server:
    type: http
    kind: server
    options:
      versions: [http/1.1]
    routes:
      - exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    exit: south_sse_client
"""
"""The bindings between the tcp server and the sse client in this file's gateway."""


def write_config(
    root: Path, ports: tuple[int, int, int], north: str = NORTH, *, log_lines: bool = True
) -> Path:
    """tcp server on the first port → ``north_http_server`` and what ``north`` adds (sse servers
    that exit to ``south_sse_client``) → sse client → http client → tcp client to the second
    port; Prometheus on the third, and every log line on stdout with ``log_lines``."""
    port, upstream_port, metrics_port = ports
    logs = "logs: {type: stdout}" if log_lines else ""
    config = f"""
    name: {root.name}
    bindings:
      north_tcp_server:
        type: tcp
        kind: server
        options: {{host: 127.0.0.1, port: {port}}}
        exit: north_http_server
{textwrap.indent(textwrap.dedent(north).strip(), " " * 6)}
      south_sse_client:
        type: sse
        kind: client
        options: {{retry: 50}}
        exit: south_http_client
      south_http_client:
        type: http
        kind: client
        options:
          versions: [http/1.1]
          max-head-bytes: 65536
          max-headers: 100
        exit: south_tcp_client
      south_tcp_client:
        type: tcp
        kind: client
        options: {{host: 127.0.0.1, port: {upstream_port}}}
    telemetry:
      exporters:
        {logs}
        metrics:
          type: prometheus
          options:
            endpoints:
              - {{scheme: http, port: {metrics_port}, path: /metrics}}
    """
    path = root / "zilla.yaml"
    path.write_text(textwrap.dedent(config))
    return path


@dataclass(frozen=True)
class Gateway:
    port: int
    upstream_port: int
    metrics_port: int
    process: GatewayProcess

    async def metric(self, series: str) -> float:
        """The value of one Prometheus series, ``name{labels}`` as exposed (0 when absent)."""
        return await metric(self.metrics_port, series)


def start_gateway(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    north: str = NORTH,
    *,
    log_lines: bool = True,
) -> Iterator[Gateway]:
    """A gateway process on :func:`write_config`, for a module fixture to yield from."""
    ports = (free_port(), free_port(), free_port())
    config = write_config(tmp_path_factory.mktemp(name), ports, north, log_lines=log_lines)
    with GatewayProcess(config) as process:
        yield Gateway(*ports, process)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from start_gateway(tmp_path_factory, "sse-proxy-hostile")


# -- the upstream -------------------------------------------------------------------------------

Script = Callable[[bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Upstream:
    """A raw HTTP/1.1 upstream: keeps every request head, answers each with ``script``."""

    script: Script
    """What answers the next request (a test may swap it)."""
    heads: list[bytes] = field(default_factory=list)
    connections: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            self.heads.append(head)
            await self.script(head, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def last_event_ids(self) -> list[bytes | None]:
        """The raw ``last-event-id`` of every request, ``None`` where there was none."""
        found = [re.search(rb"\r\nlast-event-id: ([^\r\n]*)\r\n", h, re.I) for h in self.heads]
        return [m.group(1) if m else None for m in found]


def events_after(last_id: bytes) -> bytes:
    """The event the example upstream sends a client resuming from ``last_id`` (or none)."""
    return b"id:2\ndata:two\n\n" if last_id == b"1" else b"id:1\ndata:one\n\n"


async def ordinary_stream(
    head: bytes, reader: asyncio.StreamReader, w: asyncio.StreamWriter
) -> None:
    match = re.search(rb"\r\nlast-event-id: ([^\r\n]*)\r\n", head, re.I)
    w.write(STREAM_HEAD + events_after(match.group(1) if match else b""))
    await reader.read()  # held open until the gateway lets go


# -- the downstream -------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    body: bytes
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter


async def request(gateway: Gateway, head: bytes) -> Answer:
    """Send a raw request head; reads the whole body unless it is an event stream."""
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    writer.write(head)
    raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    status = int(raw.split(b" ", 2)[1])
    length = re.search(rb"\r\ncontent-length: (\d+)", raw, re.I)
    body = await reader.readexactly(int(length.group(1))) if length else b""
    return Answer(status, body, reader, writer)


def get(target: str, extra: bytes = b"") -> bytes:
    return f"GET {target} HTTP/1.1\r\nhost: localhost\r\n".encode() + extra + b"\r\n"


async def read_events(answer: Answer, count: int) -> list[SseEvent]:
    """``count`` events off a chunked event stream."""
    parser, events = SseParser(), []
    while len(events) < count:
        size = int((await asyncio.wait_for(answer.reader.readuntil(b"\r\n"), 10)).strip(), 16)
        chunk = await answer.reader.readexactly(size + 2)
        events.extend(e for e in parser.feed(chunk[:-2]) if isinstance(e, SseEvent))
    return events


async def assert_ordinary_client_served(gateway: Gateway) -> None:
    # A path of its own: it shares no upstream connection with the test's other streams.
    answer = await request(gateway, get("/ordinary", b"last-event-id: 1\r\n"))
    assert answer.status == 200
    assert [(e.id, e.data) for e in await read_events(answer, 1)] == [("2", "two")]
    answer.writer.close()


def run(gateway: Gateway, script: Script, scenario: Callable[[Upstream], Awaitable[None]]) -> None:
    """Run ``scenario`` with an upstream answering by ``script`` on the gateway's upstream port."""

    async def bounded() -> None:
        upstream = Upstream(script)
        server = await asyncio.start_server(upstream.serve, "127.0.0.1", gateway.upstream_port)
        try:
            await asyncio.wait_for(scenario(upstream), 30)
        finally:
            server.close()

    asyncio.run(bounded())


# -- CR, LF and NUL in a last event id ------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "/events?lastEventId=1%0d%0aX-Injected:%20yes",
        "/events?lastEventId=1%0aX-Injected:%20yes",
        "/events?lastEventId=1%00",
    ],
    ids=["crlf", "lf", "nul"],
)
def test_a_last_event_id_with_cr_lf_or_nul_is_400_and_never_reaches_the_upstream(
    gateway: Gateway, target: str
) -> None:
    series = 'ssegate_sse_bad_last_event_ids_total{binding="north_sse_server"}'

    async def scenario(upstream: Upstream) -> None:
        before = await gateway.metric(series)
        answer = await request(gateway, get(target))
        assert answer.status == 400
        assert answer.body == b"last event id holds CR, LF or NUL, which no SSE id can\n"
        answer.writer.close()
        assert await gateway.metric(series) == before + 1
        assert upstream.connections == 0
        await assert_ordinary_client_served(gateway)
        assert upstream.last_event_ids() == [b"1"]
        assert not any(b"x-injected" in h.lower() for h in upstream.heads)

    run(gateway, ordinary_stream, scenario)
    assert any("CR, LF or NUL" in line for line in gateway.process.logged("sse.bad_last_event_id"))


def test_a_header_value_the_http_client_may_not_send_is_400_and_never_written(
    gateway: Gateway,
) -> None:
    series = 'ssegate_http_client_requests_refused_total{binding="south_http_client"}'

    async def scenario(upstream: Upstream) -> None:
        before = await gateway.metric(series)
        answer = await request(gateway, get("/events?lastEventId=1%0b2"))  # a vertical tab
        assert answer.status == 400
        assert answer.body == (
            b"upstream request refused: header 'last-event-id' value '1\\x0b2' holds a"
            b" character a field value may not (CR, LF, NUL, VT or FF)\n"
        )
        answer.writer.close()
        assert await gateway.metric(series) == before + 1
        assert upstream.heads == []
        await assert_ordinary_client_served(gateway)

    run(gateway, ordinary_stream, scenario)
    assert gateway.process.logged("http.client.request_refused")
    assert not gateway.process.logged("Traceback", timeout=0)


# -- text beyond Latin-1 in either direction ----------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "upstream_gets"),
    [
        ("lastEventId=%E6%97%A5%E6%9C%AC", "日本".encode()),
        ("lastEventId=%ff%fe", "\ufffd\ufffd".encode()),
    ],
    ids=["japanese", "invalid-utf-8"],
)
def test_a_last_event_id_beyond_latin_1_goes_upstream_as_utf_8(
    gateway: Gateway, sent: str, upstream_gets: bytes
) -> None:
    async def scenario(upstream: Upstream) -> None:
        answer = await request(gateway, get(f"/events?{sent}"))
        assert answer.status == 200
        assert [e.data for e in await read_events(answer, 1)] == ["one"]
        answer.writer.close()
        assert upstream.last_event_ids() == [upstream_gets]
        await assert_ordinary_client_served(gateway)

    run(gateway, ordinary_stream, scenario)
    assert not gateway.process.logged("Traceback", timeout=0)


def test_the_proxy_resumes_after_an_upstream_id_beyond_latin_1(gateway: Gateway) -> None:
    async def japanese(head: bytes, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        if b"last-event-id" not in head:
            w.write(STREAM_HEAD + "id:日本\ndata:one\n\n".encode())
            return  # ends the stream: the proxy reconnects with the id it holds
        w.write(STREAM_HEAD + b"id:3\ndata:two\n\n")
        await reader.read()

    async def scenario(upstream: Upstream) -> None:
        answer = await request(gateway, get("/events"))
        assert answer.status == 200
        events = await read_events(answer, 2)
        assert [(e.id, e.data) for e in events] == [("日本", "one"), ("3", "two")]
        answer.writer.close()
        assert upstream.last_event_ids() == [None, "日本".encode()]

    run(gateway, japanese, scenario)
    assert not gateway.process.logged("Traceback", timeout=0)


# -- an upstream response head that never ends --------------------------------------------------


def endless(piece: bytes, sent: list[int]) -> Script:
    async def script(head: bytes, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-first: ")
        total = 0
        with suppress(ConnectionError):
            while total < ENDLESS_CAP:
                w.write(piece)
                total += len(piece)
                await w.drain()
        sent.append(total)

    return script


@pytest.mark.parametrize(
    ("piece", "limit", "reason"),
    [
        (b"v" * 16384, "bytes", b"upstream response head is over 65536 bytes"),
        (b"v\r\nx-more: v" * 1024, "headers", b"upstream response head is over 100 header fields"),
    ],
    ids=["one-endless-header", "endless-header-lines"],
)
def test_an_upstream_head_that_never_ends_is_502_after_the_limit(
    gateway: Gateway, piece: bytes, limit: str, reason: bytes
) -> None:
    series = f'ssegate_http_client_head_limit_total{{binding="south_http_client",limit="{limit}"}}'
    rss_before = gateway.process.sample().rss_bytes
    sent: list[int] = []

    async def scenario(upstream: Upstream) -> None:
        before = await gateway.metric(series)
        answer = await request(gateway, get("/events"))
        assert answer.status == 502
        assert answer.body == b"upstream failed: " + reason + b"\n"
        answer.writer.close()
        assert await gateway.metric(series) == before + 1
        for _ in range(200):
            if sent:
                break
            await asyncio.sleep(0.05)
        assert sent and sent[0] < ENDLESS_CAP  # the gateway hung up
        upstream.script = ordinary_stream
        await assert_ordinary_client_served(gateway)

    run(gateway, endless(piece, sent), scenario)
    assert gateway.process.sample().rss_bytes - rss_before < 16 << 20
    lines = gateway.process.logged("http.client.response_head_too_large")
    assert any('"binding":"south_http_client"' in line and limit in line for line in lines)


# -- the resume position as received ------------------------------------------------------------


def test_a_254_byte_utf_8_last_event_id_over_http_1_1_is_accepted_and_255_refused(
    gateway: Gateway,
) -> None:
    accepted = "日本".encode() * 42 + b"xx"  # 254 bytes, 86 characters
    refused = "日本".encode() * 42 + b"xxx"

    async def scenario(upstream: Upstream) -> None:
        answer = await request(gateway, get("/events", b"Last-Event-ID: " + accepted + b"\r\n"))
        assert answer.status == 200
        assert [e.data for e in await read_events(answer, 1)] == ["one"]
        answer.writer.close()
        assert upstream.last_event_ids() == [accepted]
        too_long = await request(gateway, get("/events", b"Last-Event-ID: " + refused + b"\r\n"))
        assert too_long.status == 400
        assert too_long.body == b""  # Zilla's 400 has no body either
        too_long.writer.close()

    run(gateway, ordinary_stream, scenario)


# -- Host ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        (b"GET /events HTTP/1.1\r\n\r\n", b"an HTTP/1.1 request needs a Host header"),
        (b"GET /events HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", b"more than one Host header"),
    ],
    ids=["missing", "twice"],
)
def test_a_request_without_one_host_is_400(gateway: Gateway, head: bytes, reason: bytes) -> None:
    async def scenario(upstream: Upstream) -> None:
        answer = await request(gateway, head)
        assert answer.status == 400
        assert answer.body == b"400 Bad Request: " + reason + b"\n"
        answer.writer.close()
        assert upstream.connections == 0
        await assert_ordinary_client_served(gateway)

    run(gateway, ordinary_stream, scenario)


# -- the upstream request -----------------------------------------------------------------------


def test_the_upstream_request_carries_the_path_without_the_downstream_query(
    gateway: Gateway,
) -> None:
    async def scenario(upstream: Upstream) -> None:
        answer = await request(gateway, get("/events?lastEventId=1&access_token=secret&x=1"))
        assert answer.status == 200
        assert [(e.id, e.data) for e in await read_events(answer, 1)] == [("2", "two")]
        answer.writer.close()
        assert upstream.heads[0].startswith(b"GET /events HTTP/1.1\r\n")
        assert upstream.last_event_ids() == [b"1"]  # the resume id goes in the header
        assert b"secret" not in upstream.heads[0]

    run(gateway, ordinary_stream, scenario)


# -- an upstream that ends every stream at once -------------------------------------------------


def test_an_upstream_that_ends_at_once_with_retry_0_is_re_requested_with_backoff(
    gateway: Gateway,
) -> None:
    series = 'ssegate_sse_upstream_reconnects_total{binding="south_sse_client"}'
    requested: list[float] = []

    async def flapping(head: bytes, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        if not head.startswith(b"GET /flapping "):
            await ordinary_stream(head, reader, w)
            return
        requested.append(asyncio.get_running_loop().time())
        n = len(requested)
        w.write(STREAM_HEAD + f"retry:0\nid:{n}\ndata:take {n}\n\n".encode())  # and ends

    async def scenario(upstream: Upstream) -> None:
        before = await gateway.metric(series)
        answer = await request(gateway, get("/flapping"))
        assert answer.status == 200
        assert [e.data for e in await read_events(answer, 1)] == ["take 1"]
        await asyncio.sleep(7.5)
        await assert_ordinary_client_served(gateway)
        # The 1st re-request waits 1-1.5 s (the floor, retry:0 or not), then 2-3 s, 4-6 s, ...
        gaps = [later - earlier for earlier, later in itertools.pairwise(requested)]
        assert len(requested) in (3, 4), gaps
        for n, gap in enumerate(gaps):
            assert 2**n <= gap <= 1.5 * 2**n + 0.5, gaps
        assert await gateway.metric(series) == before + len(requested)
        answer.writer.close()

    run(gateway, flapping, scenario)
    lines = gateway.process.logged("sse.upstream_reconnect")
    assert any('"attempt":3' in line and "upstream ended the stream" in line for line in lines)
