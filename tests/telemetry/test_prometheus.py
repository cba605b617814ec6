"""The prometheus exporter: exact text rendering, and the endpoint over a real socket."""

from __future__ import annotations

import asyncio

import pytest
from tests.support.schema_errors import schema_errors

from ssegate.config.errors import ConfigError
from ssegate.config.model import Component
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.prometheus import render, start_prometheus
from ssegate.telemetry.selection import MetricSelection


def small_metrics() -> Metrics:
    metrics = Metrics()
    metrics.inc("stream.opens.received", "north_sse_server")
    metrics.inc("stream.opens.received", "north_sse_server")
    metrics.inc("ssegate.tls.handshake.failures", "tls", reason='bad "quote"\\\n')
    metrics.gauge("stream.active.received", "north_sse_server", 3)
    metrics.observe("http.duration", 0.002, "h", buckets=(0.001, 0.01))
    metrics.observe("http.duration", 0.5, "h", buckets=(0.001, 0.01))
    return metrics


def test_render_writes_exact_exposition_text() -> None:
    assert render(small_metrics()) == (
        "# TYPE ssegate_tls_handshake_failures_total counter\n"
        'ssegate_tls_handshake_failures_total{binding="tls",reason="bad \\"quote\\"\\\\\\n"} 1\n'
        "# TYPE stream_opens_received_total counter\n"
        'stream_opens_received_total{binding="north_sse_server"} 2\n'
        "# TYPE stream_active_received gauge\n"
        'stream_active_received{binding="north_sse_server"} 3\n'
        "# TYPE http_duration histogram\n"
        'http_duration_bucket{binding="h",le="0.001"} 0\n'
        'http_duration_bucket{binding="h",le="0.01"} 1\n'
        'http_duration_bucket{binding="h",le="+Inf"} 2\n'
        'http_duration_sum{binding="h"} 0.502\n'
        'http_duration_count{binding="h"} 2\n'
    )


def test_telemetry_metrics_select_the_zilla_series_each_binding_asks_for() -> None:
    selection = MetricSelection.of(
        {"metrics": ["stream.*", "http.request.size"]},
        {"north_sse_server": {"metrics": ["stream.opens.*"]}, "h": {"metrics": ["http.*"]}},
    )
    rendered = render(small_metrics(), selection)
    assert 'stream_opens_received_total{binding="north_sse_server"} 2' in rendered
    assert "stream_active_received" not in rendered  # not in north_sse_server's list
    assert "http_duration" not in rendered  # h asks for http.*, the config declares one of them
    assert "ssegate_tls_handshake_failures_total" in rendered  # ssegate's own: always
    assert MetricSelection.of({}, {"h": {}}) is None
    assert render(small_metrics(), None) == render(small_metrics())


def test_render_of_no_metrics_is_empty() -> None:
    assert render(Metrics()) == ""


def exporter(**endpoint: object) -> Component:
    return Component("prom", "prometheus", {"endpoints": [endpoint]}, "telemetry.exporters.prom")


async def fetch(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    data = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return data


def test_endpoint_serves_the_rendering_and_404_elsewhere() -> None:
    metrics = small_metrics()

    async def main() -> tuple[bytes, bytes, bytes]:
        servers = await start_prometheus(
            metrics, exporter(scheme="http", port=0), reuse_port=False, host="127.0.0.1"
        )
        port = servers[0].sockets[0].getsockname()[1]
        try:
            ok = await fetch(
                port, b"GET /metrics?x=1 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n"
            )
            missing = await fetch(port, b"GET /other HTTP/1.0\r\n\r\n")
            posted = await fetch(port, b"POST /metrics HTTP/1.0\r\ncontent-length: 0\r\n\r\n")
        finally:
            for server in servers:
                server.close()
        return ok, missing, posted

    ok, missing, posted = asyncio.run(main())
    head, _, body = ok.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"content-type: text/plain; version=0.0.4; charset=utf-8" in head
    assert body.decode() == render(metrics)
    assert missing.startswith(b"HTTP/1.1 404 Not Found\r\n")
    assert posted.startswith(b"HTTP/1.1 405 Method Not Allowed\r\n")


def test_endpoint_keeps_the_connection_for_several_scrapes_and_answers_garbage_with_400() -> None:
    metrics = Metrics()

    async def main() -> tuple[bytes, bytes]:
        (server,) = await start_prometheus(
            metrics, exporter(port=0, path="/m"), reuse_port=False, host="127.0.0.1"
        )
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answers = b""
        for _ in range(2):
            writer.write(b"GET /m HTTP/1.1\r\nhost: a\r\n\r\n")
            answers += await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        writer.close()
        garbage = await fetch(port, b"\x16\x03\x01 not http\r\n\r\n")
        server.close()
        return answers, garbage

    answers, garbage = asyncio.run(main())
    assert answers.count(b"HTTP/1.1 200 OK") == 2
    assert garbage.startswith(b"HTTP/1.1 400 Bad Request\r\n")


def test_only_the_http_scheme_is_accepted() -> None:
    prometheus = {"type": "prometheus", "options": {"endpoints": [{"scheme": "https", "port": 0}]}}
    assert schema_errors(telemetry={"exporters": {"prom": prometheus}}) == [
        "telemetry.exporters.prom.options.endpoints[0].scheme: 'https' is not one of ['http']"
    ]


def test_a_port_written_with_a_decimal_point_is_a_config_error() -> None:
    async def main() -> None:
        await start_prometheus(Metrics(), exporter(scheme="http", port=9090.0), reuse_port=False)

    with pytest.raises(ConfigError) as raised:
        asyncio.run(main())
    assert str(raised.value) == (
        "telemetry.exporters.prom.options.endpoints[0].port: 9090.0 is not a port"
    )
