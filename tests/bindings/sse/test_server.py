"""The sse server binding against a recording response stream: no sockets, no event loop."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from ssegate.bindings.sse.server import KeepaliveSweep, SseRoute, SseServer, build
from ssegate.bindings.sse.source import SseSink
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Component, Config, Route
from ssegate.engine.exchange import Request
from ssegate.telemetry.metrics import Metrics


class RecordingStream:
    """A ResponseStream that keeps what was sent; ``buffered`` is set by the test."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: list[tuple[str, str]] = []
        self.body = b""
        self.ended = False
        self.was_reset = False
        self.buffered = 0
        self._close_callbacks: list[Callable[[], None]] = []

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

    @property
    def closed(self) -> bool:
        return self.ended or self.was_reset

    def on_close(self, callback: Callable[[], None]) -> None:
        self._close_callbacks.append(callback)

    def on_drain(self, callback: Callable[[], None]) -> None:
        pass

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

    def cancel(self) -> None:
        self.cancelled = True

    def resume_id(self) -> str | None:
        return self.resume_ids.pop(0) if self.resume_ids else None


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

    def exit(self, name: str) -> Any:
        return self._exits[name]

    def vault(self, name: str) -> Any:
        raise KeyError(name)

    def guard(self, name: str) -> Any:
        return None  # a guard with no challenge

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
    assert b"254 bytes" in stream.body
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
    guarded.identities["authn_jwt"] = SimpleNamespace(roles=frozenset({"proxy:stream"}))
    open_stream(server, guarded)
    assert len(events.subscriptions) == 1
    assert len(other.subscriptions) == 1
    assert server.routes[1].guarded == {"authn_jwt": ["proxy:stream"]}
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
    sweep = KeepaliveSweep(clock=lambda: clock[0])
    source = RecordingSource()
    server = SseServer("s", [SseRoute(None, source, {})], Metrics(), keepalive=15, sweep=sweep)
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
    sweep = KeepaliveSweep(clock=lambda: clock[0])
    source = RecordingSource()
    server = SseServer("s", [SseRoute(None, source, {})], Metrics(), keepalive=15, sweep=sweep)
    stream = open_stream(server)
    source.last.sink.open()
    source.last.resume_ids.append("AQIAFA==")
    sweep.sweep(115.0)
    assert stream.body == b"id:AQIAFA==\n\n"  # moves the client's last event id, fires nothing
    sweep.sweep(130.0)
    assert stream.body == b"id:AQIAFA==\n\n:\n\n"


def test_keepalive_zero_turns_keepalives_off() -> None:
    sweep = KeepaliveSweep(clock=lambda: 0.0)
    source = RecordingSource()
    server = SseServer("s", [SseRoute(None, source, {})], Metrics(), keepalive=0, sweep=sweep)
    open_stream(server)
    source.last.sink.open()
    assert len(sweep) == 0


def test_slow_client_is_closed_past_max_buffered() -> None:
    source = RecordingSource()
    server = server_with(source, **{"max-buffered": 100})
    stream = open_stream(server)
    sink = source.last.sink
    sink.event("x" * 50, id="1")
    assert not stream.closed
    stream.buffered = 101
    sink.event("y", id="2")
    assert stream.was_reset
    assert sink.closed
    assert source.last.cancelled
    assert server.metrics.counter("ssegate.sse.slow_clients", "north_sse_server") == 1
    sink.event("z", id="3")  # ignored once closed


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
    ("options", "path"),
    [
        ({"retry": -1}, "bindings.s.options.retry"),
        ({"keepalive": "soon"}, "bindings.s.options.keepalive"),
        ({"initial-comment": "a\nb"}, "bindings.s.options.initial-comment"),
        ({"max-buffered": 1.5}, "bindings.s.options.max-buffered"),
    ],
)
def test_bad_options_are_config_errors_with_their_path(options: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build(Binding("s", "sse", "server", options=options, exit="x"), FakeContext({"x": None}))
    assert caught.value.path == path
