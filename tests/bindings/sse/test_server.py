"""The sse server binding against a recording response stream: no sockets, no event loop."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

import pytest
from tests.support.fanout_fakes import FakeTransport
from tests.support.guards import TableGuard
from tests.support.schema_errors import binding_errors

from ssegate.bindings.sse.server import RESUME_MARK, DownstreamStream, SseRoute, SseServer, build
from ssegate.bindings.sse.source import SseSink
from ssegate.bindings.sse.sweep import SLICE_BUDGET, SWEEP_SLICES, StreamSweep
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Component, Config, Route
from ssegate.contract.exchange import DirectSocket, Request
from ssegate.contract.identity import Identity
from ssegate.engine.context import ExitKind
from ssegate.telemetry.metrics import Metrics

T = TypeVar("T")


class RecordingStream:
    """A ResponseStream that keeps what was sent; ``buffered`` is set by the test."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: list[tuple[str, str]] = []
        self.body = b""
        self.ended = False
        self.was_reset = False
        self.aborted_over: int | None = None
        """The connection limit ``abort`` was called with (None: never aborted)."""
        self.buffered = 0
        self.in_kernel = 0
        self.writable = True
        """What lies below took the last write whole, as the test sets it."""
        self.direct: DirectSocket | None = None
        """The cleartext socket of its own the test gives it (:func:`on_own_socket`)."""
        self._close_callbacks: list[Callable[[], None]] = []
        self._drain_callbacks: list[Callable[[], None]] = []

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        assert self.status is None, "headers sent twice"
        self.status = status
        self.headers = headers
        if end:
            self._finish()

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        assert self.status is not None and not self.closed
        self.body += data
        if end:
            self._finish()

    def reset(self) -> None:
        self.was_reset = True
        self._finish()

    def abort(self, connection_limit: int) -> None:
        self.aborted_over = connection_limit
        self._finish()

    @property
    def unsent(self) -> int:
        return self.buffered + self.in_kernel

    @property
    def closed(self) -> bool:
        return self.ended or self.was_reset or self.aborted_over is not None

    def on_close(self, callback: Callable[[], None]) -> None:
        self._close_callbacks.append(callback)

    def on_drain(self, callback: Callable[[], None]) -> None:
        self._drain_callbacks.append(callback)

    def drains(self) -> None:
        """The connection took what waited for it."""
        for callback in self._drain_callbacks:
            callback()

    def direct_socket(self) -> DirectSocket | None:
        return self.direct

    def peer_goes_away(self) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self.ended:
            self.ended = True
            for callback in self._close_callbacks:
                callback()


class Subscribed:
    def __init__(self, request: Request, last_event_id: str | None, sink: SseSink) -> None:
        self.request = request
        self.last_event_id = last_event_id
        self.sink = sink
        self.cancelled = False
        self.resume_ids: list[str] = []
        """Ids to hand out, one per keep-alive, when asked."""
        self.paced: list[bool] = []
        """What the stream told of its client's pace, in order."""
        self.behind: float | None = -1.0
        """What :meth:`behind_since` answers: ``None`` (its place is kept), a time, or -1 (as a
        source that keeps nothing: the stall's start)."""

    def cancel(self) -> None:
        self.cancelled = True

    def resume_id(self) -> str | None:
        return self.resume_ids.pop(0) if self.resume_ids else None

    def pace(self, stalled: bool) -> None:
        self.paced.append(stalled)

    def behind_since(self, stalled_since: float, now: float) -> float | None:
        return stalled_since if self.behind == -1.0 else self.behind


class RecordingSource:
    """An SseSource that hands every sink to the test."""

    def __init__(self) -> None:
        self.subscriptions: list[Subscribed] = []

    def subscribe(self, request: Request, last_event_id: str | None, sink: SseSink) -> Subscribed:
        subscription = Subscribed(request, last_event_id, sink)
        self.subscriptions.append(subscription)
        return subscription

    @property
    def last(self) -> Subscribed:
        return self.subscriptions[-1]


class FakeContext:
    def __init__(self, exits: dict[str, Any]) -> None:
        self._exits = exits
        self.metrics = Metrics()
        self.config = Config("test", {})

    def exit(self, name: str, kind: ExitKind[T], where: str) -> T:
        return kind.require(self._exits[name], where, repr(name))

    def vault(self, name: str) -> Any:
        raise KeyError(name)

    def guard(self, name: str) -> TableGuard:
        return TableGuard(name)

    def component(self, kind: str, name: str) -> Component:
        raise KeyError(name)

    def resolve_path(self, path: str) -> str:
        return path

    def binding(self, name: str) -> Binding:
        raise KeyError(name)


def get(
    target: str = "/events", headers: dict[str, str] | None = None, method: str = "GET"
) -> Request:
    return Request(method, "http", "localhost:7114", target, headers or {}, remote="127.0.0.1:5000")


def server_with(source: RecordingSource, **options: Any) -> SseServer:
    binding = Binding("north_sse_server", "sse", "server", options=options, exit="south")
    return build(binding, FakeContext({"south": source}))


def open_stream(server: SseServer, request: Request | None = None) -> RecordingStream:
    stream = RecordingStream()
    server.handle(request or get(), b"", stream)
    return stream


def test_methods_other_than_get_are_answered_405_with_no_body() -> None:
    source = RecordingSource()
    stream = open_stream(server_with(source), get(method="POST"))
    assert stream.status == 405
    assert ("allow", "GET") in stream.headers
    assert stream.body == b""
    assert source.subscriptions == []


def as_received(text: str) -> str:
    """A header value as the server edges hand it over: its UTF-8 bytes read as Latin-1."""
    return text.encode().decode("latin-1")


def test_last_event_id_over_254_bytes_is_rejected_with_400() -> None:
    source = RecordingSource()
    server = server_with(source)
    stream = open_stream(server, get(headers={"last-event-id": as_received("é" * 128)}))
    assert stream.status == 400  # 256 bytes
    assert stream.body == b""
    assert ("content-length", "0") in stream.headers
    assert source.subscriptions == []
    assert server.metrics.counter("ssegate.sse.bad_last_event_ids", server.name) == 1
    accepted = open_stream(server, get(headers={"last-event-id": as_received("é" * 127)}))
    assert accepted.status is None  # 254 bytes
    assert source.last.last_event_id == "é" * 127


def test_last_event_id_is_measured_in_the_bytes_received_and_read_as_utf_8() -> None:
    source = RecordingSource()
    server = server_with(source)
    open_stream(server, get(headers={"last-event-id": as_received("日本" * 42) + "xx"}))
    assert source.last.last_event_id == "日本" * 42 + "xx"  # 254 bytes, 86 characters
    open_stream(server, get("/events?lastEventId=" + "%E6%97%A5" * 84 + "xx"))
    assert source.last.last_event_id == "日" * 84 + "xx"
    refused = open_stream(server, get("/events?lastEventId=" + "%E6%97%A5" * 85))
    assert refused.status == 400  # 255 bytes
    open_stream(server, get("/events?lastEventId=%ff%fe"))
    assert source.last.last_event_id == "\ufffd\ufffd"


@pytest.mark.parametrize(
    "request_",
    [
        get("/events?lastEventId=1%0d%0aX-Injected:%20yes"),
        get("/events?lastEventId=1%0aX"),
        get("/events?lastEventId=1%00"),
        get(headers={"last-event-id": "1\x00"}),
    ],
    ids=["crlf-query", "lf-query", "nul-query", "nul-header"],
)
def test_last_event_id_with_cr_lf_or_nul_is_rejected_with_400(request_: Request) -> None:
    source = RecordingSource()
    server = server_with(source)
    stream = open_stream(server, request_)
    assert stream.status == 400
    assert stream.body == b"last event id holds CR, LF or NUL, which no SSE id can\n"
    assert source.subscriptions == []
    assert server.metrics.counter("ssegate.sse.bad_last_event_ids", server.name) == 1


def test_lastEventId_query_parameter_over_254_bytes_is_rejected_with_400() -> None:
    stream = open_stream(server_with(RecordingSource()), get("/events?lastEventId=" + "x" * 255))
    assert stream.status == 400


def test_the_last_event_id_is_checked_before_the_route_is_looked_up() -> None:
    binding = Binding(
        "north_sse_server", "sse", "server", routes=[Route("events", when=[{"path": "/events"}])]
    )
    server = build(binding, FakeContext({"events": RecordingSource()}))
    assert open_stream(server, get("/nowhere")).status == 404
    assert open_stream(server, get("/nowhere?lastEventId=" + "x" * 255)).status == 400


def test_last_event_id_header_wins_over_query_parameter() -> None:
    source = RecordingSource()
    open_stream(server_with(source), get("/events?lastEventId=7", {"last-event-id": "9"}))
    assert source.last.last_event_id == "9"


def test_lastEventId_query_parameter_is_url_decoded() -> None:
    source = RecordingSource()
    open_stream(server_with(source), get("/events?a=1&lastEventId=p%2F3%3D"))
    assert source.last.last_event_id == "p/3="


def test_routes_match_path_globs_without_query_and_no_route_is_404() -> None:
    events, other = RecordingSource(), RecordingSource()
    binding = Binding(
        "north_sse_server",
        "sse",
        "server",
        routes=[
            Route("events", when=[{"path": "/events/*"}]),
            Route("other", when=[{"path": "/other"}], guarded={"authn_jwt": ["proxy:stream"]}),
        ],
    )
    server = build(binding, FakeContext({"events": events, "other": other}))
    open_stream(server, get("/events/a/b?x=1"))
    guarded = get("/other?lastEventId=1")
    alice = Identity("alice", frozenset({"proxy:stream"}))
    guarded = dataclasses.replace(guarded, identities={"authn_jwt": alice})
    open_stream(server, guarded)
    assert len(events.subscriptions) == 1
    assert len(other.subscriptions) == 1
    assert list(server.routes[1].guarded) == ["authn_jwt"]
    assert open_stream(server, get("/nowhere")).status == 404


def test_headers_wait_for_the_source_and_an_early_failure_is_an_http_error() -> None:
    source = RecordingSource()
    stream = open_stream(server_with(source))
    assert stream.status is None
    source.last.sink.fail(502, "upstream answered 500")
    assert stream.status == 502
    assert stream.body == b"upstream answered 500\n"
    assert source.last.cancelled


def test_success_has_event_stream_headers_and_events_in_zilla_format() -> None:
    source = RecordingSource()
    stream = open_stream(server_with(source))
    sink = source.last.sink
    sink.event("hello", id="1")
    sink.event("a\nb", event="update", id="2")
    sink.event(None, id="3")
    assert stream.status == 200
    assert dict(stream.headers) == {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "x-accel-buffering": "no",
    }
    assert stream.body == b"id:1\ndata:hello\n\nid:2\nevent:update\ndata:a\ndata:b\n\nid:3\n\n"


def test_retry_and_initial_comment_are_written_once_at_stream_start() -> None:
    source = RecordingSource()
    stream = open_stream(server_with(source, **{"retry": 3000, "initial-comment": "hi"}))
    source.last.sink.open()
    source.last.sink.open()
    source.last.sink.event("x")
    assert stream.body == b"retry:3000\n\n:hi\n\ndata:x\n\n"


def test_retry_is_not_written_when_not_configured() -> None:
    source = RecordingSource()
    stream = open_stream(server_with(source))
    source.last.sink.event("x")
    assert stream.body == b"data:x\n\n"


def test_keepalive_comment_is_sent_after_idle_time_only() -> None:
    clock = [100.0]
    sweep = StreamSweep(clock=lambda: clock[0])
    source = RecordingSource()
    server = SseServer("s", [SseRoute(None, source)], Metrics(), keepalive=15, sweep=sweep)
    stream = open_stream(server)
    sink = source.last.sink
    sink.open()
    sweep.sweep(110.0)
    assert stream.body == b""
    sink.event("x")
    sweep.sweep(114.0)  # written since the last visit: the idle time starts again
    sweep.sweep(128.0)
    assert stream.body == b"data:x\n\n"
    sweep.sweep(129.0)
    assert stream.body == b"data:x\n\n:\n\n"
    stream.peer_goes_away()
    assert len(sweep) == 0


def test_a_keepalive_carries_the_resume_point_the_source_hands_out() -> None:
    clock = [100.0]
    sweep = StreamSweep(clock=lambda: clock[0])
    source = RecordingSource()
    server = SseServer("s", [SseRoute(None, source)], Metrics(), keepalive=15, sweep=sweep)
    stream = open_stream(server)
    source.last.sink.open()
    source.last.resume_ids.append("AQIAFA==")
    sweep.sweep(115.0)
    assert stream.body == b"id:AQIAFA==\n\n"  # moves the client's last event id, fires nothing
    sweep.sweep(130.0)
    assert stream.body == b"id:AQIAFA==\n\n:\n\n"


def test_keepalive_zero_turns_keepalives_off() -> None:
    sweep = StreamSweep(clock=lambda: 0.0)
    source = RecordingSource()
    server = SseServer("s", [SseRoute(None, source)], Metrics(), keepalive=0, sweep=sweep)
    stream = open_stream(server)
    source.last.sink.open()
    sweep.sweep(1000.0)
    assert stream.body == b""


def test_slow_client_is_aborted_past_max_buffered() -> None:
    source = RecordingSource()
    server = server_with(source, **{"max-buffered": 100})
    stream = open_stream(server)
    sink = source.last.sink
    sink.event("x" * 50, id="1")
    assert not stream.closed
    stream.buffered = 101
    sink.event("y", id="2")
    assert stream.aborted_over == 100  # an HTTP/2 connection over this is reset as well
    assert not stream.was_reset
    assert sink.closed
    assert source.last.cancelled
    metrics = server.metrics
    assert metrics.counter("ssegate.sse.slow_clients", "north_sse_server", reason="bytes") == 1
    sink.event("z", id="3")  # ignored once closed


def slow_client_server(
    max_buffered: int = 1 << 20, timeout: float = 10
) -> tuple[StreamSweep, RecordingStream, SseSink, SseServer]:
    sweep = StreamSweep(clock=lambda: 100.0)
    source = RecordingSource()
    server = SseServer(
        "s",
        [SseRoute(None, source)],
        Metrics(),
        keepalive=0,
        max_buffered=max_buffered,
        slow_client_timeout=timeout,
        sweep=sweep,
    )
    stream = open_stream(server)
    source.last.sink.open()
    return sweep, stream, source.last.sink, server


def test_bytes_the_kernel_holds_unsent_count_toward_max_buffered_at_the_sweep() -> None:
    sweep, stream, sink, server = slow_client_server(max_buffered=1000)
    sink.event("x")
    stream.in_kernel = 1001  # nothing in ssegate's buffer: every write looks fine
    sink.event("y")
    assert stream.aborted_over is None
    sweep.sweep(101.0)
    assert stream.aborted_over == 1000
    assert server.metrics.counter("ssegate.sse.slow_clients", "s", reason="bytes") == 1
    assert len(sweep) == 0


def test_a_client_over_the_stall_mark_for_the_timeout_is_aborted_for_time() -> None:
    sweep, stream, sink, server = slow_client_server(timeout=10)
    stream.in_kernel = 64 * 1024 + 1
    sink.event("x")
    sweep.sweep(100.0)  # the stall starts here
    sweep.sweep(109.9)
    assert stream.aborted_over is None
    sweep.sweep(110.0)  # nothing written since: a stalled stream is still checked
    assert stream.aborted_over == 1 << 20
    assert server.metrics.counter("ssegate.sse.slow_clients", "s", reason="time") == 1
    assert server.metrics.counter("ssegate.sse.slow_clients", "s", reason="bytes") == 0


def test_a_stalled_client_whose_place_is_kept_is_dropped_a_timeout_after_it_is_not() -> None:
    clock = [100.0]
    sweep = StreamSweep(clock=lambda: clock[0])
    source = RecordingSource()
    server = SseServer(
        "s", [SseRoute(None, source)], Metrics(), keepalive=0, slow_client_timeout=10, sweep=sweep
    )
    stream = open_stream(server)
    subscribed = source.last
    subscribed.sink.open()
    subscribed.behind = None  # its source keeps its place: waiting costs nothing
    stream.in_kernel = 64 * 1024 + 1
    subscribed.sink.event("x")
    sweep.sweep(100.0)  # the stall starts here
    for now in (110.0, 130.0, 500.0):
        clock[0] = now
        sweep.sweep(now)
        assert stream.aborted_over is None  # stalled past the timeout, its place kept
    subscribed.behind = 505.0  # from here on its source no longer keeps its place
    for now in (506.0, 514.9):
        clock[0] = now
        sweep.sweep(now)
        assert stream.aborted_over is None
    clock[0] = 515.0
    sweep.sweep(515.0)  # behind for the timeout
    assert stream.aborted_over == 1 << 20
    assert server.metrics.counter("ssegate.sse.slow_clients", "s", reason="time") == 1


def test_a_stalled_client_is_dropped_when_its_timeout_is_up_not_at_a_later_sweep() -> None:
    async def scenario() -> tuple[int | None, float, int]:
        sweep, stream, sink, server = slow_client_server(timeout=0.2)
        stream.in_kernel = 64 * 1024 + 1
        sink.event("x")
        sweep.sweep(100.0)  # the stall starts; the sweep's clock stays at 100.0 from now on
        started = time.monotonic()
        while stream.aborted_over is None and time.monotonic() - started < 10:
            await asyncio.sleep(0.01)
        dropped = server.metrics.counter("ssegate.sse.slow_clients", "s", reason="time")
        return stream.aborted_over, time.monotonic() - started, dropped

    aborted_over, after, dropped = asyncio.run(scenario())
    # the sweep's own visits (its clock frozen) would never see the timeout up: the timer did
    assert aborted_over == 1 << 20 and dropped == 1
    assert 0.15 <= after < 5.0


def test_a_client_that_reads_again_before_its_timeout_is_not_dropped_by_the_timer() -> None:
    async def scenario() -> int | None:
        sweep, stream, sink, _ = slow_client_server(timeout=0.1)
        stream.in_kernel = 64 * 1024 + 1
        sink.event("x")
        sweep.sweep(100.0)
        stream.in_kernel = 0
        sweep.sweep(100.05)  # back under the mark: no longer stalled
        await asyncio.sleep(0.3)
        return stream.aborted_over

    assert asyncio.run(scenario()) is None


def test_draining_to_the_stall_mark_restarts_the_slow_client_clock() -> None:
    sweep, stream, sink, _ = slow_client_server(timeout=10)
    stream.in_kernel = 64 * 1024 + 1
    sink.event("x")
    sweep.sweep(100.0)
    stream.in_kernel = 64 * 1024
    sweep.sweep(105.0)
    stream.in_kernel = 64 * 1024 + 1
    sink.event("y")
    sweep.sweep(106.0)
    sweep.sweep(115.9)
    assert stream.aborted_over is None
    sweep.sweep(116.0)
    assert stream.aborted_over is not None


def test_a_stalled_client_gets_no_keep_alive_and_what_is_written_goes_to_its_connection() -> None:
    sweep, stream, sink, _ = slow_client_server(timeout=10)
    assert isinstance(sink, DownstreamStream)
    sink.keepalive = 1.0
    stream.in_kernel = 64 * 1024 + 1
    sink.event("a", id="1")
    sweep.sweep(100.0)  # over the mark: stalled, its source told to stop writing
    assert sink.stalled
    body = bytes(stream.body)
    sweep.sweep(102.0)
    sweep.sweep(104.0)  # idle past the keep-alive interval, but stalled: nothing written
    assert bytes(stream.body) == body
    sink.event("b", id="2")  # a source that cannot wait writes on: nothing is kept aside
    assert stream.body.endswith(b"id:2\ndata:b\n\n")
    stream.in_kernel = 64 * 1024  # the client read: back at the mark
    sweep.sweep(105.0)
    assert not sink.stalled


def on_own_socket(stream: RecordingStream) -> None:
    """The stream is a chunked cleartext HTTP/1.1 response: it has a socket of its own."""
    stream.direct = DirectSocket.of(cast(asyncio.Transport, FakeTransport.with_socket(7)))


def test_a_refused_direct_write_stalls_the_client_at_once_and_starts_its_clock() -> None:
    sweep, stream, sink, server = slow_client_server(timeout=10)
    assert isinstance(sink, DownstreamStream)
    on_own_socket(stream)
    sink.event("a", id="1")
    stream.in_kernel = RESUME_MARK + 1  # what the kernel took behind the shut window
    sink.refused()  # the kernel took part of a write: nothing swept yet
    assert sink.stalled and sink.stalled_since == 100.0
    sweep.sweep(105.0)  # under the stall mark, over the resume mark: still stalled
    assert sink.stalled
    sweep.sweep(109.9)
    assert stream.aborted_over is None
    sweep.sweep(110.0)
    assert server.metrics.counter("ssegate.sse.slow_clients", "s", reason="time") == 1


def test_a_refused_client_reads_again_as_soon_as_its_connection_drains() -> None:
    _, stream, sink, _ = slow_client_server(timeout=10)
    assert isinstance(sink, DownstreamStream)
    on_own_socket(stream)
    stream.in_kernel = RESUME_MARK + 1
    sink.refused()
    stream.drains()  # what was refused went out, but the kernel still holds too much
    assert sink.stalled
    stream.in_kernel = 0  # the client read
    stream.drains()  # no sweep needed
    assert not sink.stalled


def test_a_refused_client_that_reads_again_is_found_at_the_next_sweep() -> None:
    sweep, stream, sink, _ = slow_client_server(timeout=10)
    assert isinstance(sink, DownstreamStream)
    sink.refused()
    stream.in_kernel = 0
    sweep.sweep(100.5)
    assert not sink.stalled and sink.stalled_since is None


def test_a_write_that_leaves_the_stream_not_writable_stalls_it_at_once() -> None:
    _, stream, sink, _ = slow_client_server(timeout=10)
    assert isinstance(sink, DownstreamStream)
    stream.buffered, stream.writable = 100, False  # a window or the TLS layer kept it back
    sink.event("a", id="1")
    assert sink.stalled and sink.stalled_since == 100.0
    assert cast(Subscribed, sink.subscription).paced == [True]


def test_a_write_taken_whole_does_not_stall_the_stream_whatever_it_holds() -> None:
    _, stream, sink, _ = slow_client_server(timeout=10)
    stream.buffered = 100  # held, but writable: the transport is not paused
    sink.event("a", id="1")
    assert not sink.stalled


def test_a_refused_stream_without_a_socket_of_its_own_reads_again_once_writable() -> None:
    sweep, stream, sink, _ = slow_client_server(timeout=10)
    assert isinstance(sink, DownstreamStream)
    stream.buffered, stream.writable = 100, False
    sink.event("a", id="1")
    stream.buffered, stream.in_kernel = 0, 32 * 1024  # the connection's share, under the mark
    stream.drains()
    sweep.sweep(101.0)
    assert sink.stalled  # its window is still shut
    stream.writable = True  # the window opened
    stream.drains()  # no sweep needed, and the connection's share need not be down to 4 KiB
    assert not sink.stalled
    assert cast(Subscribed, sink.subscription).paced == [True, False]


def test_a_stall_found_at_a_sweep_lasts_while_the_stream_is_not_writable() -> None:
    sweep, stream, sink, _ = slow_client_server(timeout=10)
    sink.event("a", id="1")
    stream.in_kernel = 64 * 1024 + 1
    sweep.sweep(101.0)
    assert sink.stalled
    stream.in_kernel, stream.writable = 0, False
    sweep.sweep(102.0)
    assert sink.stalled
    stream.writable = True
    sweep.sweep(103.0)
    assert not sink.stalled


def test_a_stalled_client_tells_its_source_and_again_when_it_reads() -> None:
    sweep = StreamSweep(clock=lambda: 100.0)
    source = RecordingSource()
    server = SseServer("s", [SseRoute(None, source)], Metrics(), keepalive=0, sweep=sweep)
    stream = open_stream(server)
    sink = source.last.sink
    sink.open()
    stream.in_kernel = 64 * 1024 + 1
    sink.event("a", id="1")
    sweep.sweep(100.0)
    assert source.last.paced == [True]
    stream.in_kernel = 0  # the client read everything
    sweep.sweep(101.0)
    assert source.last.paced == [True, False]
    sink.event("c", id="3")
    assert stream.body.endswith(b"id:3\ndata:c\n\n")


def test_bytes_written_to_a_stalled_client_count_toward_max_buffered() -> None:
    sweep, stream, sink, server = slow_client_server(max_buffered=128 * 1024, timeout=10)
    stream.in_kernel = 64 * 1024 + 1
    sink.event("a")
    sweep.sweep(100.0)
    stream.buffered = 100 * 1024
    sink.event("x" * (20 * 1024))
    assert stream.aborted_over is None
    stream.buffered = 130 * 1024  # what its connection holds now: over 128 KiB
    sink.event("y")
    assert stream.aborted_over == 128 * 1024  # and its connection too, if over the bound
    assert server.metrics.counter("ssegate.sse.slow_clients", "s", reason="bytes") == 1


def test_a_stalled_stream_ends_after_what_was_written_to_it() -> None:
    sweep, stream, sink, _ = slow_client_server(timeout=10)
    stream.in_kernel = 64 * 1024 + 1
    sink.event("a", id="1")
    sweep.sweep(100.0)
    sink.event("b", id="2")
    sink.end()
    assert stream.ended and stream.body.endswith(b"id:2\ndata:b\n\n")


def test_the_stall_mark_is_half_of_a_max_buffered_under_128_kib() -> None:
    sweep, stream, sink, _ = slow_client_server(max_buffered=1000, timeout=1)
    stream.in_kernel = 501
    sink.event("x")
    sweep.sweep(100.0)
    sweep.sweep(101.0)
    assert stream.aborted_over == 1000


def test_slow_client_timeout_zero_keeps_only_the_byte_bound() -> None:
    sweep, stream, sink, _ = slow_client_server(timeout=0)
    stream.in_kernel = 1 << 20
    sink.event("x")
    for now in (100.0, 1000.0, 10000.0):
        sweep.sweep(now)
    assert stream.aborted_over is None
    stream.in_kernel += 1
    sweep.sweep(10001.0)
    assert stream.aborted_over == 1 << 20


def test_slow_client_timeout_is_read_from_the_options_and_defaults_to_10_seconds() -> None:
    assert server_with(RecordingSource()).slow_client_timeout == 10
    assert server_with(RecordingSource(), **{"slow-client-timeout": 2.5}).slow_client_timeout == 2.5


def test_invalid_event_is_dropped_but_its_id_still_moves_the_cursor() -> None:
    source = RecordingSource()
    server = server_with(source, requests=[{"path": "/events", "content": {"model": "json"}}])
    stream = open_stream(server)
    sink = source.last.sink
    sink.event('{"ok":true}', id="1")
    sink.event("not json", id="2")
    sink.event("not json either")
    assert stream.body == b'id:1\ndata:{"ok":true}\n\nid:2\n\n'
    assert server.metrics.counter("ssegate.sse.invalid_events", "north_sse_server") == 2


def test_client_going_away_cancels_the_subscription() -> None:
    source = RecordingSource()
    stream = open_stream(server_with(source))
    source.last.sink.event("x")
    stream.peer_goes_away()
    assert source.last.cancelled
    assert source.last.sink.closed


def test_failure_after_open_resets_the_stream() -> None:
    source = RecordingSource()
    server = server_with(source)
    stream = open_stream(server)
    source.last.sink.event("x")
    source.last.sink.fail(502, "gone")
    assert stream.status == 200
    assert stream.was_reset
    assert server.metrics.counter("stream.errors.sent", "north_sse_server") == 1


def test_end_finishes_the_response_and_counts_stream_metrics() -> None:
    source = RecordingSource()
    server = server_with(source)
    stream = open_stream(server)
    source.last.sink.write_encoded(b"id:1\ndata:x\n\n")
    source.last.sink.end()
    assert stream.ended and not stream.was_reset
    assert stream.body == b"id:1\ndata:x\n\n"
    metrics = server.metrics
    assert metrics.counter("stream.opens.sent", "north_sse_server") == 1
    assert metrics.counter("stream.data.sent", "north_sse_server") == 13
    assert metrics.counter("stream.closes.sent", "north_sse_server") == 1
    assert metrics.gauge_value("stream.active.sent", "north_sse_server") == 0


def test_a_source_that_raises_gets_a_500_not_a_traceback() -> None:
    class Broken:
        def subscribe(self, request: Request, last_event_id: str | None, sink: SseSink) -> Any:
            raise RuntimeError("bug")

    binding = Binding("s", "sse", "server", exit="broken")
    stream = open_stream(build(binding, FakeContext({"broken": Broken()})))
    assert stream.status == 500


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"retry": -1}, "retry: -1 is less than the minimum of 0"),
        ({"keepalive": "soon"}, "keepalive: expected a number, got 'soon'"),
        ({"max-buffered": 1.5}, "max-buffered: expected a whole number, got 1.5"),
        ({"slow-client-timeout": -1}, "slow-client-timeout: -1 is less than the minimum of 0"),
    ],
)
def test_bad_options_are_config_errors_with_their_path(options: dict[str, Any], error: str) -> None:
    errors = binding_errors("s", "sse", "server", options=options, exit="x")
    assert errors == [f"bindings.s.options.{error}"]


def test_an_initial_comment_of_several_lines_is_a_config_error() -> None:
    binding = Binding("s", "sse", "server", options={"initial-comment": "a\nb"}, exit="x")
    with pytest.raises(ConfigError) as caught:
        build(binding, FakeContext({"x": None}))
    assert str(caught.value) == "bindings.s.options.initial-comment: must be one line of text"


class CountingMember:
    sweep_period = 4.0

    def __init__(self, visits: list[int], name: int) -> None:
        self.visits = visits
        self.name = name

    def visit(self, now: float) -> None:
        self.visits.append(self.name)


def test_a_sweep_round_is_spread_over_slices_of_the_tick() -> None:
    async def run() -> tuple[list[int], list[int]]:
        sweep = StreamSweep()
        visits: list[int] = []
        members = [CountingMember(visits, n) for n in range(100)]
        for member in members:
            sweep.add(member)  # type: ignore[arg-type]
        assert sweep.tick == 1.0
        await asyncio.sleep(sweep.tick / SWEEP_SLICES + 0.05)
        first_slice = list(visits)
        await asyncio.sleep(sweep.tick)
        for member in members:
            sweep.discard(member)  # type: ignore[arg-type]
        return first_slice, visits

    first_slice, visits = asyncio.run(run())
    assert len(first_slice) == 100 // SWEEP_SLICES  # one slice per callback, not the whole round
    assert sorted(visits[:100]) == list(range(100))  # then every member once per round


class SlowMember(CountingMember):
    """A member whose visit takes ``seconds`` (a keep-alive written over HTTP/2, say)."""

    def __init__(self, visits: list[int], name: int, seconds: float) -> None:
        super().__init__(visits, name)
        self.seconds = seconds

    def visit(self, now: float) -> None:
        time.sleep(self.seconds)
        super().visit(now)


def test_a_slice_over_its_budget_lets_the_loop_turn_before_it_goes_on() -> None:
    async def run() -> tuple[list[int], list[int], list[int]]:
        sweep = StreamSweep()
        visits: list[int] = []
        members = [SlowMember(visits, n, 0.0002) for n in range(2560)]
        for member in members:
            sweep.add(member)  # type: ignore[arg-type]
        # a slice of 256 visits at 0.2 ms is 51 ms: over SLICE_BUDGET after 64 visits
        seen_between: list[int] = []

        def between() -> None:
            seen_between.append(len(visits))
            if len(visits) < 256:
                asyncio.get_running_loop().call_soon(between)

        await asyncio.sleep(sweep.tick / SWEEP_SLICES - 0.01)
        asyncio.get_running_loop().call_soon(between)
        await asyncio.sleep(0.2)
        first_slice = list(visits)
        for member in members:
            sweep.discard(member)  # type: ignore[arg-type]
        return first_slice, seen_between, visits

    first_slice, seen_between, _ = asyncio.run(run())
    assert len(first_slice) >= 256  # the whole slice was visited, in parts
    parts = sorted({n for n in seen_between if 0 < n < 256})
    assert parts and all(n % 64 == 0 for n in parts)  # the loop turned between the parts
    assert SLICE_BUDGET < 0.0002 * 64


def test_what_its_source_owes_a_stopped_stream_counts_toward_max_buffered() -> None:
    _, stream, sink, server = slow_client_server(max_buffered=128 * 1024, timeout=10)
    assert isinstance(sink, DownstreamStream)
    stream.buffered = 100 * 1024
    sink.owed(20 * 1024)
    assert stream.aborted_over is None
    sink.owed(30 * 1024)  # as if written: over 128 KiB with what its connection holds
    # Its connection is reset too if over the bound less what it was owed.
    assert stream.aborted_over == 128 * 1024 - 30 * 1024
    assert server.metrics.counter("ssegate.sse.slow_clients", "s", reason="bytes") == 1


def test_a_stall_that_begins_within_a_second_of_the_last_ones_end_keeps_its_clock() -> None:
    sweep, stream, sink, server = slow_client_server(timeout=10)
    assert isinstance(sink, DownstreamStream)
    stream.in_kernel = 64 * 1024 + 1
    sink.event("a")
    sweep.sweep(100.0)  # stalls
    stream.in_kernel = 0
    sweep.sweep(105.0)  # its kernel took a little: it counts as reading
    assert not sink.stalled
    stream.in_kernel = 64 * 1024 + 1
    sink.event("b")
    sweep.sweep(105.5)  # stalled again at once: the same stall goes on, from 100
    assert sink.stalled_since == 100.0
    sweep.sweep(109.9)
    assert stream.aborted_over is None
    sweep.sweep(110.0)
    assert server.metrics.counter("ssegate.sse.slow_clients", "s", reason="time") == 1


def test_a_stall_that_begins_well_after_the_last_ones_end_starts_its_own_clock() -> None:
    sweep, stream, sink, _ = slow_client_server(timeout=10)
    assert isinstance(sink, DownstreamStream)
    stream.in_kernel = 64 * 1024 + 1
    sink.event("a")
    sweep.sweep(100.0)
    stream.in_kernel = 0
    sweep.sweep(105.0)
    stream.in_kernel = 64 * 1024 + 1
    sink.event("b")
    sweep.sweep(106.5)  # it read for a second and a half: a stall of its own
    assert sink.stalled_since == 106.5
    sweep.sweep(110.0)
    assert stream.aborted_over is None
