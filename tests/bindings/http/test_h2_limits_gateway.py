"""HTTP/2 limits through a real ``ssegate start`` process, over TLS with ALPN ``h2``.

Each test sends what a hostile client would (a flood of one kind of frame, requests that never
end, streams past the concurrency limit, acknowledgements it never reads) on one connection,
checks the exact answer on that connection, the log line and the count, and that a normal
client on another connection is served meanwhile. ``north_http_server`` runs the defaults;
``tight_http_server`` (its own port) has a short request timeout, a ping budget no test reaches
and a small acknowledgement backlog, for the tests that would otherwise wait or send for long.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from h2.errors import ErrorCodes
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.testing.certs import make_keystore
from support.h2_peer import RawH2Peer, client_context
from support.http_servers import H2Client, ended, run

PASSWORD = "test-secret"
NAME = "north_http_server"
TIGHT = "tight_http_server"
TIGHT_REQUEST_TIMEOUT = 0.5

CONFIG = """\
name: h2-limits-test
vaults:
  my_servers:
    type: filesystem
    options:
      keys:
        store: tls/localhost.p12
        type: pkcs12
        password: ${{{{env.KEYSTORE_PASSWORD}}}}
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options:
      host: 127.0.0.1
      port: [{port}, {tight_port}]
    routes:
      - when: [{{port: {port}}}]
        exit: north_tls_server
      - when: [{{port: {tight_port}}}]
        exit: tight_tls_server
  north_tls_server:
    type: tls
    kind: server
    vault: my_servers
    options: {{keys: [localhost], sni: [localhost], alpn: [h2, http/1.1]}}
    exit: {name}
  tight_tls_server:
    type: tls
    kind: server
    vault: my_servers
    options: {{keys: [localhost], sni: [localhost], alpn: [h2, http/1.1]}}
    exit: {tight}
  {name}:
    type: http
    kind: server
    routes:
      - exit: east_http_filesystem
  {tight}:
    type: http
    kind: server
    options:
      http2:
        frames-per-second: {{ping: 1000000}}
        max-unread-acks: 100
        request-timeout: {timeout}
    routes:
      - exit: east_http_filesystem
  east_http_filesystem:
    type: http-filesystem
    kind: proxy
    routes:
      - when:
          - path: /{{path}}
        with:
          path: ${{params.path}}
        exit: east_filesystem_server
  east_filesystem_server:
    type: filesystem
    kind: server
    options:
      location: www/
telemetry:
  exporters:
    logs:
      type: stdout
    metrics:
      type: prometheus
      options:
        endpoints:
          - {{scheme: http, port: {metrics}, path: /metrics}}
"""


@dataclass(frozen=True)
class Gateway:
    port: int
    tight_port: int
    metrics_port: int
    context: ssl.SSLContext
    process: GatewayProcess

    def counter(self, name: str, binding: str, **labels: str) -> float:
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        wanted = [f'binding="{binding}"', *(f'{k}="{v}"' for k, v in labels.items())]
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name + "{") and all(w in line for w in wanted)
        )

    def logged(self, event: str, binding: str, **fields: str) -> list[str]:
        """Output lines of ``event`` from ``binding`` that start with ``fields``, in order."""
        tail = "".join(f',"{k}":"{v}"' for k, v in fields.items())
        return self.process.logged(f'"event":"{event}","binding":"{binding}"{tail}')


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("h2-limits")
    (root / "tls").mkdir()
    bundle = make_keystore(root / "tls" / "localhost.p12", alias="localhost", password=PASSWORD)
    (root / "www").mkdir()
    (root / "www" / "index.html").write_text("<!doctype html><p>served</p>\n")
    port, tight_port, metrics = free_port(), free_port(), free_port()
    config = root / "zilla.yaml"
    config.write_text(
        CONFIG.format(
            port=port,
            tight_port=tight_port,
            metrics=metrics,
            name=NAME,
            tight=TIGHT,
            timeout=TIGHT_REQUEST_TIMEOUT,
        )
    )
    with GatewayProcess(config, env={"KEYSTORE_PASSWORD": PASSWORD}) as process:
        context = client_context(str(bundle.ca_pem))
        yield Gateway(port, tight_port, metrics, context, process)


SERVED_WITHIN = 10.0
"""How long a normal client may wait while another connection floods: far past what a busy
machine takes, far short of a gateway held up by the flood until a timeout lets it go."""


async def served_elsewhere(port: int, context: ssl.SSLContext) -> tuple[bytes, float]:
    """A normal client's GET on a connection of its own: its status and how long it took.

    It runs on a thread and event loop of its own, so the flood the test writes meanwhile
    delays only the gateway, not the client's own turns."""

    async def get() -> tuple[bytes, float]:
        started = time.monotonic()
        client = await H2Client.connect(port, tls=context)
        sid = client.request("GET", "/index.html")
        await client.until(ended(sid))
        status = client.response_headers(sid)[b":status"]
        await client.close()
        return status, time.monotonic() - started

    return await asyncio.to_thread(asyncio.run, get())


def _ping(_: int) -> bytes:
    return PingFrame(0, b"pingpong").serialize()


def _settings(_: int) -> bytes:
    return SettingsFrame(0).serialize()


def _empty_data(_: int) -> bytes:
    return DataFrame(1, b"").serialize()


def _window_update(_: int) -> bytes:
    return WindowUpdateFrame(0, window_increment=1).serialize()


def _priority(i: int) -> bytes:
    return PriorityFrame(3 + 2 * (i % 100), depends_on=0, stream_weight=16).serialize()


def _extension(_: int) -> bytes:
    return b"\x00\x00\x04\xf0\x00\x00\x00\x00\x00" + b"x" * 4


def _continuation(_: int) -> bytes:
    return ContinuationFrame(1, b"\x00" * 16384).serialize()


Setup = Callable[[RawH2Peer], bytes]
FLOODS: dict[str, tuple[Setup, Callable[[RawH2Peer], Callable[[int], bytes]], int]] = {
    "ping": (lambda p: b"", lambda p: _ping, 200),
    "settings": (lambda p: b"", lambda p: _settings, 200),
    "empty-data": (
        lambda p: p.request(1, "/index.html", end_stream=False),
        lambda p: _empty_data,
        2000,
    ),
    "rst-stream": (
        lambda p: b"",
        lambda p: (
            lambda i: (
                p.request(2 * i + 1, "/index.html")
                + RstStreamFrame(2 * i + 1, error_code=ErrorCodes.CANCEL).serialize()
            )
        ),
        200,
    ),
    "window-update": (lambda p: b"", lambda p: _window_update, 200),
    "priority": (lambda p: b"", lambda p: _priority, 200),
    "extension": (lambda p: b"", lambda p: _extension, 200),
    "continuation": (
        lambda p: HeadersFrame(1, p.encoder.encode([(":method", "GET")])).serialize(),
        lambda p: _continuation,
        0,
    ),
}
"""Kind → what opens the scene, the frame to repeat, and the burst the default budget allows."""


@pytest.mark.parametrize("kind", list(FLOODS))
def test_a_flood_of_one_frame_kind_gets_goaway_enhance_your_calm_and_others_are_served(
    gateway: Gateway, kind: str
) -> None:
    setup, unit, burst = FLOODS[kind]
    before = gateway.counter("ssegate_http2_floods_total", NAME, kind=kind)

    async def scenario() -> tuple[GoAwayFrame | None, RawH2Peer, float, bytes, float]:
        peer = await RawH2Peer.open(gateway.port, gateway.context)
        peer.send(setup(peer))
        started = time.monotonic()
        flooding = asyncio.create_task(peer.flood(unit(peer)))
        normal = asyncio.create_task(served_elsewhere(gateway.port, gateway.context))
        goaway = await flooding
        took = time.monotonic() - started
        ending = await peer.read_until(None)
        await peer.close()
        status, latency = await normal
        assert ending is None and peer.ended
        return goaway, peer, took, status, latency

    goaway, peer, took, status, latency = run(scenario, timeout=30)
    assert goaway is not None, f"no GOAWAY; {len(peer.frames)} frames read"
    assert goaway.error_code == ErrorCodes.ENHANCE_YOUR_CALM
    assert peer.frames[-1] is goaway  # nothing after it: the connection closed
    if kind == "ping":
        acks = peer.count(PingFrame, flags={"ACK"})
        assert 0 < acks <= burst + 100 * took + 1
    if kind == "settings":
        acks = peer.count(SettingsFrame, flags={"ACK"}) - 1  # one is for the opening SETTINGS
        assert 0 < acks <= burst + 100 * took + 1
    assert status == b"200"
    assert latency < SERVED_WITHIN
    assert gateway.logged("http.h2.flood", binding=NAME, kind=kind)
    assert gateway.counter("ssegate_http2_floods_total", NAME, kind=kind) == before + 1


def test_requests_that_never_end_are_reset_with_cancel_after_the_request_timeout(
    gateway: Gateway,
) -> None:
    before = gateway.counter("ssegate_http2_requests_timed_out_total", TIGHT)

    async def scenario() -> tuple[RawH2Peer, float, str | None, bytes]:
        peer = await RawH2Peer.open(gateway.tight_port, gateway.context)
        opened = time.monotonic()
        peer.send(
            b"".join(peer.request(2 * i + 1, "/index.html", end_stream=False) for i in range(50))
        )
        normal = await served_elsewhere(gateway.tight_port, gateway.context)
        first = await peer.read_until(lambda f: isinstance(f, RstStreamFrame), timeout=5)
        assert first is not None, "the connection ended"
        waited = time.monotonic() - opened
        for _ in range(49):
            frame = await peer.read_until(lambda f: isinstance(f, RstStreamFrame), timeout=5)
            assert frame is not None, "the connection ended"
        peer.send(peer.request(101, "/index.html"))
        await peer.read_until(lambda f: f.stream_id == 101 and "END_STREAM" in f.flags)
        status = peer.status(101)
        await peer.close()
        return peer, waited, status, normal[0]

    peer, waited, status, normal = run(scenario, timeout=30)
    resets = [f for f in peer.frames if isinstance(f, RstStreamFrame)]
    assert sorted(f.stream_id for f in resets) == [2 * i + 1 for i in range(50)]
    assert {f.error_code for f in resets} == {ErrorCodes.CANCEL}
    assert waited >= TIGHT_REQUEST_TIMEOUT
    assert peer.count(GoAwayFrame) == 0
    assert status == "200"  # the connection goes on
    assert normal == b"200"
    assert len(gateway.logged("http.h2.request_timeout", binding=TIGHT)) >= 50
    assert gateway.counter("ssegate_http2_requests_timed_out_total", TIGHT) == before + 50


def test_a_stream_past_the_concurrency_limit_is_refused_and_the_connection_goes_on(
    gateway: Gateway,
) -> None:
    before = gateway.counter("ssegate_http2_streams_refused_total", NAME)

    async def scenario() -> tuple[RawH2Peer, str | None, bytes]:
        peer = await RawH2Peer.open(gateway.port, gateway.context)
        # SETTINGS_MAX_CONCURRENT_STREAMS is 256: streams 1 … 511 stay open, 513 is one too many.
        held = b"".join(
            peer.request(2 * i + 1, "/index.html", end_stream=False) for i in range(256)
        )
        peer.send(held + peer.request(513, "/index.html"))
        refused = await peer.read_until(lambda f: isinstance(f, RstStreamFrame))
        assert isinstance(refused, RstStreamFrame)
        assert (refused.stream_id, refused.error_code) == (513, ErrorCodes.REFUSED_STREAM)
        normal = await served_elsewhere(gateway.port, gateway.context)
        # Give one stream back; the next request on this connection is served.
        peer.send(RstStreamFrame(1, error_code=ErrorCodes.CANCEL).serialize())
        peer.send(peer.request(515, "/index.html"))
        await peer.read_until(lambda f: f.stream_id == 515 and "END_STREAM" in f.flags)
        status = peer.status(515)
        await peer.close()
        return peer, status, normal[0]

    peer, status, normal = run(scenario, timeout=30)
    assert peer.count(GoAwayFrame) == 0
    assert peer.count(RstStreamFrame, error_code=ErrorCodes.REFUSED_STREAM) == 1
    assert status == "200"
    assert normal == b"200"
    assert gateway.counter("ssegate_http2_streams_refused_total", NAME) == before + 1


def test_a_peer_that_sends_pings_and_reads_nothing_is_dropped(gateway: Gateway) -> None:
    async def scenario() -> tuple[bool, bytes, float]:
        peer = await RawH2Peer.open(gateway.tight_port, gateway.context, receive_buffer=4096)
        ping = PingFrame(0, b"pingpong").serialize() * 1000
        normal = asyncio.create_task(served_elsewhere(gateway.tight_port, gateway.context))
        dropped = False
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                peer.send(ping)
                await asyncio.wait_for(peer.writer.drain(), 2)
            except (ConnectionError, ssl.SSLError, OSError):
                dropped = True
                break
            except TimeoutError:
                # The server reads nothing more: it has let go of the connection (its log line
                # may take a moment on a busy machine).
                settled = time.monotonic() + 10
                while not gateway.logged("http.h2.flood", binding=TIGHT):
                    if time.monotonic() > settled:
                        break
                    await asyncio.sleep(0.1)
                dropped = bool(gateway.logged("http.h2.flood", binding=TIGHT))
                break
            await asyncio.sleep(0)
        peer.writer.transport.abort()
        status, latency = await normal
        return dropped, status, latency

    dropped, status, latency = run(scenario, timeout=40)
    assert dropped
    assert status == b"200"
    assert latency < SERVED_WITHIN
    assert gateway.logged("http.h2.flood", binding=TIGHT, kind="write-backlog")
    assert gateway.counter("ssegate_http2_floods_total", TIGHT, kind="write-backlog") == 1
