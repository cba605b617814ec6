"""``x-ssegate-quotas`` end to end: a real ``ssegate start``, real sockets, real JWTs.

The gateway proxies the example upstream SSE server (a child process) through several ``sse``
server bindings, one per quota shape, routed by path. Clients are raw asyncio sockets sending a
``GET`` and reading the status line (cheap enough for a thousand streams), or httpx over h2c.
Each test speaks from its own loopback source addresses (127.0.0.x), so the tests' counts never
meet.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import h2.connection
import h2.events
import httpx
import pytest
from h2.config import H2Configuration
from h2.errors import ErrorCodes

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess

from .guards.signing import AUDIENCE, ISSUER, jwks, token

pytestmark = pytest.mark.integration

SSE_SERVER = """\
  {name}:
    type: sse
    kind: server
    options:
      keepalive: 0
      x-ssegate-quotas: {quotas}
    routes:
      - exit: south_sse_client{guarded}
"""

CONFIG = """\
name: quotas-test
telemetry:
  exporters:
    logs:
      type: stdout
    metrics:
      type: prometheus
      options:
        endpoints:
          - {{scheme: http, port: {metrics}, path: /metrics}}
guards:
  authn_jwt:
    type: jwt
    options:
      issuer: {issuer}
      audience: {audience}
      keys: {keys}
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {{host: 127.0.0.1, port: {port}}}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    options:
      authorization:
        authn_jwt:
          credentials:
            headers:
              authorization: Bearer {{credentials}}
    routes:
{routes}
{servers}
  south_sse_client:
    type: sse
    kind: client
    exit: south_http_client
  south_http_client:
    type: http
    kind: client
    options: {{versions: [http/1.1]}}
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
    options: {{host: 127.0.0.1, port: {upstream}}}
"""

GUARDED = "\n        guarded: {authn_jwt: [proxy:stream]}"
SERVERS: dict[str, tuple[str, str]] = {
    # path: (quotas, guarded on the sse server's route)
    "/events": ("{streams-per-address: 100}", ""),
    "/identity": ("{streams-per-identity: 2}", GUARDED),
    "/identity-http": ("{streams-per-identity: 2}", ""),  # guarded on the http route
    "/rate": ("{opens-per-identity: {rate: 1, per: 30s, burst: 3}}", GUARDED),
    "/forwarded": ("{streams-per-address: 1, trusted-proxies: [127.0.0.1/32]}", ""),
    "/h2": ("{streams-per-address: 2}", ""),
    "/expiry": ("{streams-per-identity: 2}", GUARDED),
}


def _server_name(path: str) -> str:
    return "sse_" + path.strip("/").replace("-", "_")


def render_config(port: int, upstream: int, metrics: int, paths: dict[str, tuple[str, str]]) -> str:
    routes = []
    for path in paths:
        guarded = GUARDED if path == "/identity-http" else ""
        routes.append(
            f"      - when: [{{headers: {{':path': {path}}}}}]\n"
            f"        exit: {_server_name(path)}{guarded}"
        )
    servers = "".join(
        SSE_SERVER.format(name=_server_name(path), quotas=quotas, guarded=guarded)
        for path, (quotas, guarded) in paths.items()
    )
    return CONFIG.format(
        metrics=metrics,
        issuer=ISSUER,
        audience=AUDIENCE,
        keys=json.dumps(jwks()),
        port=port,
        routes="\n".join(routes),
        servers=servers.rstrip("\n"),
        upstream=upstream,
    )


@dataclass
class Upstream:
    http_port: int
    publish_port: int

    def publish(self, text: str) -> None:
        with socket.create_connection(("127.0.0.1", self.publish_port), timeout=5) as sock:
            sock.sendall(text.encode() + b"\n")


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    ports = Upstream(free_port(), free_port())
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "ssegate.tools.sse_server"),
            *("--http-port", str(ports.http_port), "--publish-port", str(ports.publish_port)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and "sse server" in process.stdout.readline()
        yield ports
    finally:
        process.terminate()
        process.wait(timeout=10)


@dataclass
class Gateway:
    port: int
    metrics_port: int
    process: GatewayProcess

    def counter(self, name: str, **labels: str) -> float:
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        wanted = [f'{k}="{v}"' for k, v in labels.items()]
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name + "{") and all(w in line for w in wanted)
        )


def start_gateway(tmp: Path, upstream: Upstream, workers: int = 1) -> Gateway:
    port, metrics = free_port(), free_port()
    path = tmp / "zilla.yaml"
    path.write_text(render_config(port, upstream.http_port, metrics, SERVERS))
    return Gateway(port, metrics, GatewayProcess(path, workers=workers, history=50_000))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, upstream: Upstream) -> Iterator[Gateway]:
    built = start_gateway(tmp_path_factory.mktemp("quotas"), upstream)
    with built.process:
        yield built


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    writer: asyncio.StreamWriter | None = field(default=None, repr=False)
    reader: asyncio.StreamReader | None = field(default=None, repr=False)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def open_stream(
    port: int, path: str, *, source: str = "127.0.0.1", headers: dict[str, str] | None = None
) -> Answer:
    """A GET over a new connection from ``source``: its status and head; a 200 stays open (close
    it to end the stream), any other answer is read whole and its connection closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    lines = [f"GET {path} HTTP/1.1", "host: localhost", "accept: text/event-stream"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    fields = dict(
        (name.strip().lower(), value.strip())
        for name, _, value in (line.partition(":") for line in header_lines if line)
    )
    status = int(status_line.split(" ", 2)[1])
    if status == 200:
        return Answer(status, fields, writer=writer, reader=reader)
    body = await asyncio.wait_for(reader.readexactly(int(fields["content-length"])), 20)
    writer.close()
    return Answer(status, fields, body)


def bearer(sub: str, ttl: float = 60) -> dict[str, str]:
    return {"authorization": f"Bearer {token(sub=sub, ttl=ttl)}"}


async def eventually_opens(port: int, path: str, **kwargs: object) -> Answer:
    """Open until a stream is let through (a slot frees when the gateway sees the close)."""
    deadline = time.monotonic() + 20
    while True:
        answer = await open_stream(port, path, **kwargs)  # type: ignore[arg-type]
        if answer.status == 200 or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.05)


def test_a_thousand_streams_from_one_address_over_100_get_exactly_900_refusals(
    gateway: Gateway,
) -> None:
    async def scenario() -> tuple[list[int], Answer, Answer]:
        gate = asyncio.Semaphore(100)
        held: list[Answer] = []

        async def one() -> int:
            async with gate:
                answer = await open_stream(gateway.port, "/events", source="127.0.0.1")
            if answer.status == 200:
                held.append(answer)
            return answer.status

        try:
            statuses = await asyncio.gather(*(one() for _ in range(1000)))
            other = await open_stream(gateway.port, "/events", source="127.0.0.2")
            refused = await open_stream(gateway.port, "/events", source="127.0.0.1")
            other.close()
        finally:
            for answer in held:
                answer.close()
        return list(statuses), other, refused

    before = gateway.counter("ssegate_quota_refused_total", quota="streams-per-address")
    statuses, other, refused = asyncio.run(scenario())
    assert statuses.count(200) == 100
    assert statuses.count(429) == 900
    assert other.status == 200
    assert refused.status == 429 and refused.headers["retry-after"] == "5"
    assert refused.body == b"too many streams: the streams-per-address quota (100) is reached\n"
    after = gateway.counter("ssegate_quota_refused_total", quota="streams-per-address")
    assert after - before == 901
    lines = gateway.process.logged('"event":"sse.quota_refused"')
    assert 1 <= len(lines) < 10  # a flood of refusals is a few lines, not 901
    # Every stream closed: the address's slots are free again.
    reopened = asyncio.run(eventually_opens(gateway.port, "/events", source="127.0.0.1"))
    reopened.close()
    assert reopened.status == 200


@pytest.mark.parametrize("path", ["/identity", "/identity-http"], ids=["sse-route", "http-route"])
def test_an_identity_over_its_streams_is_refused_whatever_its_address(
    gateway: Gateway, path: str
) -> None:
    async def scenario() -> list[Answer]:
        answers = [
            await open_stream(gateway.port, path, source="127.0.0.3", headers=bearer("alice")),
            await open_stream(gateway.port, path, source="127.0.0.4", headers=bearer("alice")),
            await open_stream(gateway.port, path, source="127.0.0.5", headers=bearer("alice")),
            await open_stream(gateway.port, path, source="127.0.0.3", headers=bearer("bob")),
        ]
        for answer in answers:
            answer.close()
        return answers

    answers = asyncio.run(scenario())
    assert [a.status for a in answers] == [200, 200, 429, 200]
    assert answers[2].body == b"too many streams: the streams-per-identity quota (2) is reached\n"


def test_an_identity_opening_faster_than_its_rate_waits_for_the_refill(gateway: Gateway) -> None:
    async def scenario() -> list[Answer]:
        answers = []
        for sub in ["carol"] * 4 + ["dave"]:
            answer = await open_stream(gateway.port, "/rate", headers=bearer(sub))
            answer.close()  # the rate, not the concurrency, is what refuses here
            answers.append(answer)
        return answers

    answers = asyncio.run(scenario())
    assert [a.status for a in answers] == [200, 200, 200, 429, 200]
    assert 1 <= int(answers[3].headers["retry-after"]) <= 30
    assert answers[3].body == (
        b"too many streams opened: the opens-per-identity quota (1 per 30s, burst 3) is reached\n"
    )


def test_x_forwarded_for_is_believed_from_a_trusted_proxy_only(gateway: Gateway) -> None:
    async def scenario() -> dict[str, int]:
        def forwarded(address: str) -> dict[str, str]:
            return {"x-forwarded-for": f"{address}, 127.0.0.1"}

        cases = [
            ("trusted, client one", "127.0.0.1", forwarded("198.51.100.1")),
            ("trusted, client two", "127.0.0.1", forwarded("198.51.100.2")),
            ("trusted, client one again", "127.0.0.1", forwarded("198.51.100.1")),
            ("untrusted peer", "127.0.0.6", forwarded("198.51.100.3")),
            ("untrusted peer, another header", "127.0.0.6", forwarded("198.51.100.4")),
            ("trusted, malformed", "127.0.0.1", {"x-forwarded-for": "not an address"}),
            ("trusted, malformed again", "127.0.0.1", {"x-forwarded-for": "999.1.1.1"}),
        ]
        held = []
        statuses = {}
        for name, source, headers in cases:
            answer = await open_stream(gateway.port, "/forwarded", source=source, headers=headers)
            statuses[name] = answer.status
            held.append(answer)
        for answer in held:
            answer.close()
        return statuses

    before = gateway.counter("ssegate_quota_forwarded_malformed_total")
    assert asyncio.run(scenario()) == {
        "trusted, client one": 200,
        "trusted, client two": 200,
        "trusted, client one again": 429,
        "untrusted peer": 200,
        "untrusted peer, another header": 429,
        "trusted, malformed": 200,  # counted against the peer, 127.0.0.1
        "trusted, malformed again": 429,
    }
    assert gateway.counter("ssegate_quota_forwarded_malformed_total") - before == 2


@dataclass
class H2Stream:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    ended: bool = False


class H2Client:
    """One HTTP/2 connection (prior knowledge) driven with the ``h2`` library, which, unlike
    httpx, can reset a stream it no longer wants (``RST_STREAM``)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.conn = h2.connection.H2Connection(H2Configuration(client_side=True))
        self.streams: dict[int, H2Stream] = {}
        self.terminated = False
        self.conn.initiate_connection()
        self._flush()

    @classmethod
    async def connect(cls, port: int, source: str) -> H2Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        return cls(reader, writer)

    def _flush(self) -> None:
        self.writer.write(self.conn.data_to_send())

    async def get(self, path: str) -> int:
        """Open a GET and wait for its head (and the whole body, when it is not a stream)."""
        sid = self.conn.get_next_available_stream_id()
        headers = [(":method", "GET"), (":path", path), (":scheme", "http")]
        self.conn.send_headers(sid, [*headers, (":authority", "localhost")], end_stream=True)
        self._flush()
        self.streams[sid] = stream = H2Stream()
        await self.until(lambda: stream.status == 200 or stream.ended)
        return sid

    def reset(self, sid: int) -> None:
        self.conn.reset_stream(sid, ErrorCodes.CANCEL)
        self._flush()

    async def until(self, done: Callable[[], bool]) -> None:
        while not done():
            assert not self.terminated, "the connection was closed"
            data = await asyncio.wait_for(self.reader.read(65536), 20)
            if not data:
                self.terminated = True
                continue
            for event in self.conn.receive_data(data):
                self._on(event)
            self._flush()

    def _on(self, event: object) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            stream = self.streams[event.stream_id]
            stream.headers = {k.decode(): v.decode() for k, v in event.headers}  # type: ignore[union-attr]
            stream.status = int(stream.headers[":status"])
        elif isinstance(event, h2.events.DataReceived):
            self.streams[event.stream_id].body += event.data
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
            if event.stream_id in self.streams:
                self.streams[event.stream_id].ended = True
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.terminated = True


def test_an_h2_stream_over_quota_is_refused_alone_and_the_connection_goes_on(
    gateway: Gateway, upstream: Upstream
) -> None:
    async def scenario() -> tuple[list[H2Stream], H2Stream]:
        client = await H2Client.connect(gateway.port, "127.0.0.7")
        try:
            first, second, third = [await client.get("/h2") for _ in range(3)]
            upstream.publish("after the refusal")
            await client.until(lambda: b"after the refusal" in client.streams[first].body)
            client.reset(first)  # its slot is free again once the gateway sees the reset
            deadline = time.monotonic() + 20
            again = await client.get("/h2")
            while client.streams[again].status == 429 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                again = await client.get("/h2")
            return [client.streams[sid] for sid in (first, second, third)], client.streams[again]
        finally:
            client.writer.close()

    (first, second, third), again = asyncio.run(scenario())
    assert (first.status, second.status, third.status) == (200, 200, 429)
    assert third.ended and third.headers["retry-after"] == "5"
    assert third.body == b"too many streams: the streams-per-address quota (2) is reached\n"
    assert not second.ended  # the refusal touched no other stream of the connection
    assert again.status == 200


def test_a_stream_its_guard_ends_gives_its_slot_back_exactly_once(gateway: Gateway) -> None:
    """Two of alice's streams fill her quota of 2; the one whose token expires is ended by the
    gateway, which frees one slot, not two: one more opens, the next is refused."""

    async def scenario() -> list[int]:
        short = await open_stream(gateway.port, "/expiry", headers=bearer("erin", ttl=2))
        long = await open_stream(gateway.port, "/expiry", headers=bearer("erin"))
        full = await open_stream(gateway.port, "/expiry", headers=bearer("erin"))
        assert short.reader is not None
        while await asyncio.wait_for(short.reader.read(4096), 20):  # until the gateway ends it
            pass
        third = await eventually_opens(gateway.port, "/expiry", headers=bearer("erin"))
        fourth = await open_stream(gateway.port, "/expiry", headers=bearer("erin"))
        for answer in (short, long, third, fourth):
            answer.close()
        return [short.status, long.status, full.status, third.status, fourth.status]

    assert asyncio.run(scenario()) == [200, 200, 429, 200, 429]


def test_the_quota_is_the_total_of_every_worker(tmp_path: Path, upstream: Upstream) -> None:
    """130 connections from one address, spread by the kernel over two workers, against the
    quota of 100 streams per address on /events: exactly 100 streams, not up to 100 a worker."""
    built = start_gateway(tmp_path, upstream, workers=2)

    async def scenario() -> list[int]:
        held: list[Answer] = []
        gate = asyncio.Semaphore(50)

        async def one() -> int:
            async with gate:
                answer = await open_stream(built.port, "/events", source="127.0.0.8")
            if answer.status == 200:
                held.append(answer)
            return answer.status

        try:
            return list(await asyncio.gather(*(one() for _ in range(130))))
        finally:
            for answer in held:
                answer.close()

    with built.process:
        statuses = asyncio.run(scenario())
        pids = {
            line.split('"pid":')[1].split(",")[0]
            for line in built.process.logged('"event":"gateway.allocator"')
        }
    assert len(pids) == 2
    assert (statuses.count(200), statuses.count(429)) == (100, 30)
