"""Wire points checked against Zilla's spec scripts, through a real ``ssegate start`` process.

The sse proxy chain of ``bindings/sse/test_proxy_gateway`` (its raw upstream, scripted per test)
behind an http server that offers HTTP/1.1 and h2 on one cleartext port, with
``access-control: cross-origin``. Each point is checked over HTTP/1.1 and h2 where both apply:

- an ``event:`` with no type is relayed as ``event:`` (and ``event:message`` as written);
- ``accept: text/event-stream;ext=timestamp`` gets that content type and ``timestamp:0x<ms>``
  before each event;
- a last event id over 254 bytes is 400 with ``content-length: 0``, before any route;
- a request without ``Origin`` gets ``access-control-allow-origin: *``;
- ``Upgrade: h2c`` on HTTP/1.1 is answered 101 and the request is HTTP/2 stream 1;
- ``options.overrides`` reach the exit (a second gateway: they apply to every request).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator

import h2.connection
import h2.events
import httpx
import pytest

from .bindings.sse.test_proxy_gateway import (
    STREAM_HEAD,
    Gateway,
    Upstream,
    get,
    request,
    run,
    start_gateway,
)

NORTH = """
  north_http_server:
    type: http
    kind: server
    options:
      access-control:
        policy: cross-origin
    routes:
      - exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    routes:
      - when:
          - path: /events/*
        exit: south_sse_client
"""

OVERRIDING = """
  north_http_server:
    type: http
    kind: server
    options:
      overrides:
        :path: /rewritten?tenant=acme
        accept: text/event-stream;ext=timestamp
    routes:
      - when:
          - headers:
              :path: /events
        exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    exit: south_sse_client
"""

EVENTS = b"event:\ndata:untyped\n\nevent:message\ndata:named\n\ndata:plain\n\nid:4\ndata:last\n\n"
"""What the upstream sends every stream: an empty type, an explicit ``message``, none."""

BOTH = pytest.mark.parametrize("http2", [True, False], ids=["h2", "http1.1"])


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from start_gateway(tmp_path_factory, "zilla-fidelity", NORTH)


@pytest.fixture(scope="module")
def overriding(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from start_gateway(tmp_path_factory, "zilla-overrides", OVERRIDING)


async def events(head: bytes, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    w.write(STREAM_HEAD + EVENTS)
    await reader.read()  # held open until the gateway lets go


def url(gateway: Gateway, target: str) -> str:
    return f"http://127.0.0.1:{gateway.port}{target}"


async def read_stream(
    gateway: Gateway, target: str, headers: dict[str, str], *, http2: bool, until: bytes
) -> tuple[httpx.Headers, bytes]:
    """The head of a stream and its body up to and including ``until``."""
    async with (
        httpx.AsyncClient(http2=http2, http1=not http2, timeout=10) as client,
        client.stream("GET", url(gateway, target), headers=headers) as response,
    ):
        body = b""
        async for chunk in response.aiter_raw():
            body += chunk
            if until in body:
                break
        return response.headers, body


@BOTH
def test_an_empty_event_type_is_relayed_as_an_empty_event_line(
    gateway: Gateway, http2: bool
) -> None:
    target = f"/events/types-{'h2' if http2 else 'h1'}"

    async def scenario(upstream: Upstream) -> None:
        _, body = await read_stream(gateway, target, {}, http2=http2, until=b"data:last\n\n")
        assert body == EVENTS

    run(gateway, events, scenario)


@BOTH
def test_ext_timestamp_echoes_the_content_type_and_stamps_every_event(
    gateway: Gateway, http2: bool
) -> None:
    target = f"/events/stamped-{'h2' if http2 else 'h1'}"
    asked = {"accept": "text/event-stream;ext=timestamp"}

    async def scenario(upstream: Upstream) -> None:
        before = int(time.time() * 1000)
        head, body = await read_stream(gateway, target, asked, http2=http2, until=b"data:last\n\n")
        after = int(time.time() * 1000)
        assert head["content-type"] == "text/event-stream;ext=timestamp"
        blocks = body.split(b"\n\n")[:4]
        stamps = [int(block.split(b"\n")[0].removeprefix(b"timestamp:0x"), 16) for block in blocks]
        assert all(before <= stamp <= after for stamp in stamps)
        assert [block.split(b"\n", 1)[1] for block in blocks] == [
            b"event:\ndata:untyped",
            b"event:message\ndata:named",
            b"data:plain",
            b"id:4\ndata:last",
        ]
        plain_head, plain = await read_stream(gateway, target, {}, http2=http2, until=b"last\n\n")
        assert plain_head["content-type"] == "text/event-stream"
        assert b"timestamp:" not in plain

    run(gateway, events, scenario)


@BOTH
@pytest.mark.parametrize("where", ["/events/known", "/unknown"])
def test_a_last_event_id_over_254_bytes_is_400_with_no_body_before_any_route(
    gateway: Gateway, http2: bool, where: str
) -> None:
    async def scenario() -> httpx.Response:
        async with httpx.AsyncClient(http2=http2, http1=not http2, timeout=10) as client:
            return await client.get(url(gateway, where), headers={"last-event-id": "x" * 255})

    response = asyncio.run(scenario())
    assert response.status_code == 400
    assert response.headers["content-length"] == "0"
    assert response.content == b""


@BOTH
def test_cross_origin_answers_a_request_without_origin_with_a_wildcard(
    gateway: Gateway, http2: bool
) -> None:
    target = f"/events/cors-{'h2' if http2 else 'h1'}"

    async def scenario(upstream: Upstream) -> None:
        head, _ = await read_stream(gateway, target, {}, http2=http2, until=b"data:")
        assert head["access-control-allow-origin"] == "*"
        refused = await request(gateway, get("/unknown", b"origin: https://elsewhere.example\r\n"))
        assert refused.status == 404  # an origin is allowed, its path is not there
        refused.writer.close()

    run(gateway, events, scenario)


REFUSED_UPGRADES = 'ssegate_http1_upgrades_refused_total{binding="north_http_server"}'


def h2c_request(target: str, settings: bytes | None) -> bytes:
    fields = f"GET {target} HTTP/1.1\r\nhost: localhost\r\nupgrade: h2c\r\n".encode()
    if settings is None:
        return fields + b"connection: Upgrade\r\n\r\n"
    return (
        fields + b"connection: Upgrade, HTTP2-Settings\r\nhttp2-settings: " + settings + b"\r\n\r\n"
    )


def test_upgrade_h2c_is_answered_101_and_the_request_is_answered_as_stream_1(
    gateway: Gateway,
) -> None:
    async def scenario(upstream: Upstream) -> None:
        client = h2.connection.H2Connection()
        settings = client.initiate_upgrade_connection()
        assert settings is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        writer.write(h2c_request("/events/upgraded", settings.rstrip(b"=")))
        switching = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert switching.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
        assert b"\r\nUpgrade: h2c\r\n" in switching
        writer.write(client.data_to_send())
        status, content_type, data = b"", b"", b""
        while b"data:last" not in data:
            received = await asyncio.wait_for(reader.read(65536), 10)
            assert received, "the connection closed"
            for event in client.receive_data(received):
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == 1:
                    found = dict(event.headers)
                    status, content_type = found[b":status"], found[b"content-type"]
                elif isinstance(event, h2.events.DataReceived) and event.stream_id == 1:
                    data += event.data
            writer.write(client.data_to_send())
        writer.close()
        assert (status, content_type) == (b"200", b"text/event-stream")
        assert data == EVENTS

    run(gateway, events, scenario)


@pytest.mark.parametrize("settings", [None, b"!!not-base64!!", b"AAMAAABkAA"], ids=str)
def test_an_upgrade_without_one_valid_http2_settings_is_answered_as_http_1_1(
    gateway: Gateway, settings: bytes | None
) -> None:
    async def scenario(upstream: Upstream) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        writer.write(h2c_request("/events/not-upgraded", settings))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        writer.close()
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")

    run(gateway, events, scenario)


def test_an_upgrade_with_settings_http2_forbids_is_refused_400_with_no_101(
    gateway: Gateway,
) -> None:
    hostile = [b"AAIAAAAC", b"AASAAAAA", b"AAUAAAAB", b"AAUBAAAA"]  # push 2, window, frame sizes

    async def scenario(upstream: Upstream) -> None:
        before = await gateway.metric(REFUSED_UPGRADES)
        for settings in hostile:
            reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
            writer.write(h2c_request("/events/hostile", settings))
            writer.write_eof()
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:80]
            assert b"HTTP2-Settings: " in answer and b"101" not in answer
        assert await gateway.metric(REFUSED_UPGRADES) == before + len(hostile)

    run(gateway, events, scenario)
    logged = gateway.process.logged("http.h1.upgrade_refused")
    assert any("MAX_FRAME_SIZE may not be 1" in line for line in logged), logged
    assert not gateway.process.logged("Fatal error", timeout=0.5)


def test_an_h2c_upgrade_carries_its_body_into_stream_1(gateway: Gateway) -> None:
    async def scenario() -> bytes:
        settings = base64.urlsafe_b64encode(b"").rstrip(b"=")
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        head = h2c_request("/events/posted", settings).replace(b"GET ", b"POST ", 1)
        body = b"a body the parser stops before"
        head = head.replace(b"\r\n\r\n", f"\r\ncontent-length: {len(body)}\r\n\r\n".encode())
        writer.write(head + body[:5])
        await asyncio.sleep(0.05)
        writer.write(body[5:])
        client = h2.connection.H2Connection()
        client.initiate_upgrade_connection()
        switching = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        writer.write(client.data_to_send())
        answer = b""
        while True:
            received = await asyncio.wait_for(reader.read(65536), 10)
            if not received:
                break
            for event in client.receive_data(received):
                if isinstance(event, h2.events.ResponseReceived):
                    answer = dict(event.headers)[b":status"]
                if isinstance(event, h2.events.StreamEnded):
                    writer.close()
                    return switching + answer
            writer.write(client.data_to_send())
        return switching + answer

    answered = asyncio.run(scenario())
    assert answered.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    assert answered.endswith(b"405")  # the sse server's answer to a POST, on stream 1


@BOTH
def test_overrides_reach_the_exit_after_the_route_matched_the_request_as_sent(
    overriding: Gateway, http2: bool
) -> None:
    async def scenario(upstream: Upstream) -> None:
        head, body = await read_stream(overriding, "/events", {}, http2=http2, until=b"last\n\n")
        assert head["content-type"] == "text/event-stream;ext=timestamp"  # accept, overridden
        assert body.startswith(b"timestamp:0x")
        assert upstream.heads[-1].startswith(b"GET /rewritten HTTP/1.1\r\n")

    run(overriding, events, scenario)
