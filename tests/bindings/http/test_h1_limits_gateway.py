"""The HTTP/1.1 request timeout through a real ``ssegate start`` process, over plain TCP.

A client that sends a complete request head and then its body a byte a second is answered 408
and the connection closed once ``options.http1.request-timeout`` has passed, with one log line
and a count, while a normal client on another connection is served meanwhile. A slow body that
ends within the timeout is served as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess
from support.http_servers import H1Response, read_h1_response, run

NAME = "north_http_server"
REQUEST_TIMEOUT = 1.0
PAGE = b"<!doctype html><p>served</p>\n"

CONFIG = """\
name: h1-limits-test
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options:
      host: 127.0.0.1
      port: {port}
    exit: {name}
  {name}:
    type: http
    kind: server
    options:
      http1:
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
    metrics_port: int
    process: GatewayProcess

    def timed_out(self) -> float:
        """``ssegate.http1.requests.timed_out`` of the http server, from Prometheus."""
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        name = "ssegate_http1_requests_timed_out_total{"
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name) and f'binding="{NAME}"' in line
        )


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("h1-limits")
    (root / "www").mkdir()
    (root / "www" / "index.html").write_bytes(PAGE)
    port, metrics = free_port(), free_port()
    config = root / "zilla.yaml"
    config.write_text(CONFIG.format(port=port, metrics=metrics, name=NAME, timeout=REQUEST_TIMEOUT))
    with GatewayProcess(config) as process:
        yield Gateway(port, metrics, process)


async def served_elsewhere(port: int) -> tuple[int, float]:
    """A normal client's GET on a connection of its own: its status and how long it took."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n")
    response = await read_h1_response(reader)
    writer.close()
    return response.status, time.monotonic() - started


async def trickle(writer: asyncio.StreamWriter, data: bytes, interval: float) -> None:
    """Write ``data`` a byte at a time, ``interval`` seconds apart; stop when the peer has gone."""
    with contextlib.suppress(ConnectionError):
        for byte in data:
            await asyncio.sleep(interval)
            writer.write(bytes([byte]))
            await writer.drain()


def test_a_body_that_trickles_past_the_request_timeout_is_answered_408_and_closed(
    gateway: Gateway,
) -> None:
    before = gateway.timed_out()

    async def scenario() -> tuple[H1Response, float, float, tuple[int, float]]:
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        writer.write(
            b"POST /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n"
        )
        head_sent = time.monotonic()
        slow = asyncio.create_task(trickle(writer, b"x" * 1000, 1.0))
        normal = await served_elsewhere(gateway.port)
        response = await read_h1_response(reader)
        answered = time.monotonic() - head_sent
        rest = await asyncio.wait_for(reader.read(), 3)  # b"" once the server has closed
        closed = time.monotonic() - head_sent
        slow.cancel()
        writer.close()
        assert rest == b""
        return response, answered, closed, normal

    response, answered, closed, (normal, normal_took) = run(scenario, timeout=15)
    assert response.status == 408
    assert response.headers["connection"] == "close"
    assert REQUEST_TIMEOUT <= answered < REQUEST_TIMEOUT + 1.0
    assert closed < REQUEST_TIMEOUT + 1.5
    assert normal == 200
    assert normal_took < REQUEST_TIMEOUT
    (line,) = gateway.process.logged(f'"event":"http.h1.request_timeout","binding":"{NAME}"')
    assert f'"timeout":{REQUEST_TIMEOUT}' in line
    assert gateway.timed_out() == before + 1


def test_a_slow_body_that_ends_within_the_request_timeout_is_served(gateway: Gateway) -> None:
    before = gateway.timed_out()

    async def scenario() -> tuple[H1Response, H1Response]:
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        writer.write(b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\n")
        await trickle(writer, b"hello", REQUEST_TIMEOUT / 8)
        slow = await read_h1_response(reader)
        # Past the deadline the slow body had, the connection still serves the next request.
        await asyncio.sleep(REQUEST_TIMEOUT)
        writer.write(b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n")
        after = await read_h1_response(reader)
        writer.close()
        return slow, after

    slow, after = run(scenario, timeout=15)
    assert (slow.status, slow.body) == (200, PAGE)
    assert (after.status, after.body) == (200, PAGE)
    assert gateway.timed_out() == before
