"""Choosing HTTP/1.1 or HTTP/2 per connection: h2c preface, ALPN, and the versions offered."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from ssegate.bindings.http.connection import (
    H2,
    HTTP_1_1,
    ConnectionRegistry,
    HttpConnectionProtocol,
)
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics
from support.http_certs import client_context, make_self_signed, server_context
from support.http_servers import H2Client, ScriptedHandler, ended, read_h1_response, run, serve


async def _h1_get(port: int, tls: object = None) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=tls, server_hostname="localhost" if tls else None
    )
    writer.write(b"GET /echo HTTP/1.1\r\nHost: localhost\r\n\r\n")
    response = await read_h1_response(reader)
    writer.close()
    return response.status, response.body


def test_cleartext_listener_serves_h2c_prior_knowledge_and_http_1_1() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(lambda: HttpConnectionProtocol(handler.handle)) as port:
            client = await H2Client.connect(port)
            sid = client.request("GET", "/echo")
            await client.until(ended(sid))
            assert client.body(sid) == b"/echo"
            await client.close()
            assert await _h1_get(port) == (200, b"/echo")
        assert [(r.version, r.scheme) for r in handler.requests] == [
            ("2", "https"),
            ("1.1", "http"),
        ]

    run(scenario)


def test_tls_listener_follows_alpn(tmp_path: Path) -> None:
    files = make_self_signed(tmp_path)

    async def scenario() -> None:
        handler = ScriptedHandler()
        tls = server_context(files, ["h2", "http/1.1"])
        async with serve(lambda: HttpConnectionProtocol(handler.handle), tls) as port:
            client = await H2Client.connect(port, client_context(files, ["h2"]))
            sid = client.request("GET", "/echo")
            await client.until(ended(sid))
            await client.close()
            assert await _h1_get(port, client_context(files, ["http/1.1"])) == (200, b"/echo")
        assert [(r.version, r.scheme) for r in handler.requests] == [
            ("2", "https"),
            ("1.1", "https"),
        ]

    run(scenario)


def test_h2_only_listener_answers_http_1_1_with_505() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        factory = lambda: HttpConnectionProtocol(  # noqa: E731
            handler.handle, versions=frozenset({H2})
        )
        async with serve(factory) as port:
            status, _ = await _h1_get(port)
            assert status == 505
            client = await H2Client.connect(port)
            sid = client.request("GET", "/echo")
            await client.until(ended(sid))
            await client.close()
        assert len(handler.requests) == 1

    run(scenario)


def test_http_1_1_only_listener_answers_the_h2_preface_with_505() -> None:
    async def scenario() -> bytes:
        handler = ScriptedHandler()
        factory = lambda: HttpConnectionProtocol(  # noqa: E731
            handler.handle, versions=frozenset({HTTP_1_1})
        )
        async with serve(factory) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            data = await reader.read()
            writer.close()
            return data

    assert run(scenario).startswith(b"HTTP/1.1 505 ")


def test_each_connection_is_logged_counted_and_closed_on_shutdown() -> None:
    metrics = Metrics()
    registry = ConnectionRegistry("north_http_server", metrics)
    lines = io.StringIO()
    log.enable_stdout_events(lines)

    async def scenario() -> None:
        handler = ScriptedHandler()
        factory = lambda: HttpConnectionProtocol(handler.handle, registry=registry)  # noqa: E731
        async with serve(factory) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /echo HTTP/1.1\r\nHost: localhost\r\n\r\n")
            await read_h1_response(reader)
            assert metrics.gauge_value("ssegate.connections.active", "north_http_server") == 1
            registry.close_all()
            assert await reader.read() == b""  # the server closed the connection
            writer.close()
            await asyncio.sleep(0.05)

    try:
        run(scenario)
    finally:
        log.disable_stdout_events()
    events = [json.loads(line) for line in lines.getvalue().splitlines()]
    kinds = [e["event"] for e in events if e["event"].startswith("connection.")]
    assert kinds == ["connection.opened", "connection.closed"]
    assert all(e["binding"] == "north_http_server" for e in events if "binding" in e)
    assert metrics.gauge_value("ssegate.connections.active", "north_http_server") == 0
    assert metrics.counter("ssegate.connections.opened", "north_http_server") == 1
