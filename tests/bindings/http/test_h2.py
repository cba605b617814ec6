"""HTTP/2 over real sockets with the ``h2`` client: requests, streams, flow control, errors."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import h2.events
import h2.settings
from h2.errors import ErrorCodes

from ssegate.bindings.http.h2 import H2Protocol
from ssegate.bindings.http.types import ConnectionSetup, HttpLimits
from support.http_servers import H2Client, ScriptedHandler, ended, reset, run, serve


def _factory(
    handler: ScriptedHandler, limits: HttpLimits | None = None
) -> Callable[[], asyncio.Protocol]:
    return lambda: H2Protocol(ConnectionSetup(handler.handle, limits or HttpLimits()))


def test_get_and_post_are_answered_and_pseudo_headers_become_the_request() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler)) as port:
            client = await H2Client.connect(port)
            get = client.request("GET", "/echo?x=1", extra=(("cookie", "a=1"), ("cookie", "b=2")))
            await client.until(ended(get))
            post = client.request("POST", "/echo", body=b"payload")
            await client.until(ended(post))
            assert client.response_headers(get)[b":status"] == b"200"
            assert client.body(get) == b"/echo?x=1"
            assert client.body(post) == b"payload"
            await client.close()
        request = handler.requests[0]
        assert (request.method, request.authority, request.version) == ("GET", "localhost", "2")
        assert request.query_param("x") == "1"
        assert request.headers["cookie"] == "a=1; b=2"

    run(scenario)


def test_a_request_is_answered_while_another_stream_stays_open() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler)) as port:
            client = await H2Client.connect(port)
            sse = client.request("GET", "/stream")
            await client.until(lambda e: isinstance(e, h2.events.ResponseReceived))
            echo = client.request("GET", "/echo")
            await client.until(ended(echo))
            handler.streams[0].send_data(b"data:x\n\n", end=True)
            await client.until(ended(sse))
            assert client.body(sse) == b"data:x\n\n"
            await client.close()

    run(scenario)


def test_reset_sends_rst_stream_no_error() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler)) as port:
            client = await H2Client.connect(port)
            sid = client.request("GET", "/stream")
            await handler.stream_opened.wait()
            handler.streams[0].reset()
            event = await client.until(reset(sid))
            assert isinstance(event, h2.events.StreamReset)
            assert event.error_code == ErrorCodes.NO_ERROR
            assert handler.streams[0].closed
            await client.close()

    run(scenario)


def test_client_reset_fires_on_close() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        closed = asyncio.Event()
        async with serve(_factory(handler)) as port:
            client = await H2Client.connect(port)
            sid = client.request("GET", "/stream")
            await handler.stream_opened.wait()
            handler.streams[0].on_close(closed.set)
            client.conn.reset_stream(sid, ErrorCodes.CANCEL)
            client.flush()
            await asyncio.wait_for(closed.wait(), 2)
            await client.close()

    run(scenario)


def test_data_waits_for_the_flow_control_window_and_drain_fires_after_window_update() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler)) as port:
            client = await H2Client.connect(port)
            client.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 10})
            client.flush()
            await client.until(lambda e: isinstance(e, h2.events.SettingsAcknowledged))
            sid = client.request("GET", "/stream")
            await handler.stream_opened.wait()
            stream = handler.streams[0]
            drained = asyncio.Event()
            stream.on_drain(drained.set)
            stream.send_data(b"0123456789abcdefghij")
            await client.until(lambda e: isinstance(e, h2.events.DataReceived), acknowledge=False)
            await asyncio.sleep(0.05)
            assert client.body(sid) == b"0123456789"
            assert stream.buffered == 10
            assert not drained.is_set()
            client.conn.increment_flow_control_window(10, sid)
            client.flush()
            await asyncio.wait_for(drained.wait(), 2)
            stream.send_data(b"", end=True)
            await client.until(ended(sid))
            assert client.body(sid) == b"0123456789abcdefghij"
            await client.close()

    run(scenario)


def test_body_over_the_limit_is_answered_413() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler, HttpLimits(max_body_bytes=16))) as port:
            client = await H2Client.connect(port)
            sid = client.request("POST", "/echo", body=b"x" * 17)
            await client.until(ended(sid))
            assert client.response_headers(sid)[b":status"] == b"413"
            assert handler.requests == []
            await client.close()

    run(scenario)


def test_headers_over_the_limit_are_answered_431() -> None:
    async def scenario() -> None:
        handler = ScriptedHandler()
        async with serve(_factory(handler, HttpLimits(max_header_bytes=1024))) as port:
            client = await H2Client.connect(port)
            sid = client.request("GET", "/echo", extra=(("x-big", "v" * 2000),))
            await client.until(ended(sid))
            assert client.response_headers(sid)[b":status"] == b"431"
            await client.close()

    run(scenario)


def test_data_on_stream_zero_is_a_connection_error_answered_with_goaway() -> None:
    async def scenario() -> None:
        async with serve(_factory(ScriptedHandler())) as port:
            client = await H2Client.connect(port)
            await client.until(lambda e: isinstance(e, h2.events.RemoteSettingsChanged))
            # A DATA frame (type 0) of 1 byte on stream 0.
            client.writer.write(b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x")
            event = await client.until(lambda e: isinstance(e, h2.events.ConnectionTerminated))
            assert isinstance(event, h2.events.ConnectionTerminated)
            assert event.error_code == ErrorCodes.PROTOCOL_ERROR
            assert await client.reader.read() == b""

    run(scenario)


def test_idle_connection_gets_goaway_and_closes() -> None:
    async def scenario() -> None:
        async with serve(_factory(ScriptedHandler(), HttpLimits(idle_timeout=0.2))) as port:
            client = await H2Client.connect(port)
            event = await client.until(lambda e: isinstance(e, h2.events.ConnectionTerminated))
            assert isinstance(event, h2.events.ConnectionTerminated)
            assert event.error_code == ErrorCodes.NO_ERROR

    run(scenario)
