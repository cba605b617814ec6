"""The ``sse`` server binding: one downstream ``text/event-stream`` response per GET.

:class:`SseServer` is the :class:`~ssegate.contract.exchange.HttpHandler` an http server route
exits to. Per request it checks the method (GET only, else 405), reads the resume position
before any route is tried, as Zilla does (:mod:`ssegate.bindings.sse.last_event_id`: over 254
bytes is a 400 with no body, one holding CR, LF or NUL a 400 with the reason;
``sse.bad_last_event_id``, ``ssegate.sse.bad_last_event_ids``), picks a route by the path
without its query (``when[].path`` globs, else 404) and subscribes to the route's
:class:`~ssegate.bindings.sse.source.SseSource` with a :class:`DownstreamStream` as the sink.

A route with ``guarded`` refuses requests its guards do not accept (401/403, see
:mod:`ssegate.guards`). A stream is kept authorized by every guard that let its request
through, here or on the http server's or the sse-kafka proxy's route: challenge events before
the token expires and the end of the stream at ``exp`` (:mod:`ssegate.guards.streams`; the http
server answers the challenge answers).

A request whose ``accept`` asks for ``text/event-stream;ext=timestamp`` gets that content type
back, and every event whose source knows when it happened (a Kafka record's timestamp, the
moment an upstream event reached the gateway) starts with ``timestamp:0x<milliseconds since the
epoch, in lower-case hex>``, as Zilla writes it.

Options, Zilla's first then ssegate's own:

- ``retry`` (ms): written once as ``retry:<ms>`` at stream start, only when configured.
- ``requests[]{path, content}``: events on a matching path are checked against the model
  ``content`` names (:mod:`ssegate.bindings.sse.checks`), whichever source they come from; an
  invalid event is dropped (its id still moves the client's cursor), logged and counted.
- ``keepalive`` (seconds, default 15, ``0`` off): the comment ``:`` after that much idle time,
  or ``id:<resume point>`` when the source's resume point moved without an event.
  One :class:`~ssegate.bindings.sse.sweep.StreamSweep` timer per process visits every open
  stream; there is no timer and no task per stream, but for a stalled one's deadline (below).
- ``initial-comment``: a comment sent right after the headers.
- ``max-buffered`` (bytes, default 1 MiB) and ``slow-client-timeout`` (seconds, default 10,
  ``0`` off): the slow-client policy, below.

Slow clients: :mod:`~ssegate.bindings.sse.slow_clients` (the stall, the one backpressure signal a
source is given, and the drops).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ssegate.bindings.http.routing import Pattern
from ssegate.bindings.sse.checks import ContentCheck, compile_checks
from ssegate.bindings.sse.last_event_id import BadLastEventId, last_event_id_of
from ssegate.bindings.sse.slow_clients import (
    CLOSED,
    OPEN,
    PENDING,
    RESUME_MARK,
    STALL_MARK,
    SlowClientPolicy,
)
from ssegate.bindings.sse.source import SSE_SOURCE, EventCheck, SseSource, Subscription
from ssegate.bindings.sse.sweep import StreamSweep, shared_sweep
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.contract.exchange import DirectSocket, Request, ResponseStream, simple_response
from ssegate.contract.guard import Guard
from ssegate.contract.identity import Identity
from ssegate.engine.context import BuildContext
from ssegate.guards import answer_refusal
from ssegate.guards.guard import keep_authorized
from ssegate.guards.guarded import Guarded
from ssegate.guards.streams import StreamAuthorization
from ssegate.host.turns import TurnBudget, shared_turns
from ssegate.sse_codec.encoder import encode_comment, encode_event, encode_retry
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

DEFAULT_KEEPALIVE = 15.0
DEFAULT_MAX_BUFFERED = 1024 * 1024
DEFAULT_SLOW_CLIENT_TIMEOUT = 10.0
STREAM_HEADERS = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
]
TIMESTAMPED_STREAM_HEADERS = [("content-type", "text/event-stream;ext=timestamp")] + [
    header for header in STREAM_HEADERS if header[0] != "content-type"
]


@dataclass(frozen=True, slots=True)
class SseRoute:
    path: Pattern | None
    """``None`` matches every path."""
    source: SseSource
    guarded: Guarded = field(default_factory=Guarded)


class DownstreamStream(SlowClientPolicy):
    """One downstream SSE response: the :class:`SseSink` a source writes into."""

    __slots__ = (
        "_check",
        "_server",
        "_state",
        "_stream",
        "authorization",
        "idle_since",
        "keepalive",
        "last_id",
        "remote",
        "request",
        "subscription",
        "sweep_period",
        "timestamps",
        "wrote",
    )

    _server: SseServer

    def __init__(
        self,
        server: SseServer,
        stream: ResponseStream,
        remote: str,
        check: EventCheck | None,
        *,
        timestamps: bool = False,
    ) -> None:
        super().__init__()
        self._server = server
        self.timestamps = timestamps
        """The client asked for ``ext=timestamp``: events carry ``timestamp:`` lines."""
        self._stream = stream
        self._check = check
        self._state = PENDING
        self.wrote = False
        """Written since the sweep last visited it (by itself, or directly by a group write:
        :mod:`~ssegate.bindings.sse.fanout`), so the sweep checks it and keeps it alive later."""
        self.idle_since = 0.0
        self.keepalive = server.keepalive
        periods = (self.keepalive, server.slow_client_timeout)
        self.sweep_period = min((p for p in periods if p > 0), default=math.inf)
        """The shortest interval the sweep must keep for this stream; a quarter of it is the
        longest tick (inf: any, as long as it still visits to check the byte bound)."""
        self.last_id: str | None = None
        self.remote = remote
        self.subscription: Subscription | None = None
        self.authorization: StreamAuthorization | None = None
        self.request: Request | None = None
        """The request as the source's guarded route admitted it (:meth:`admitted`)."""

    # -- SseSink ----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._state == CLOSED or self._stream.closed

    @property
    def check(self) -> EventCheck | None:
        """The ``requests[].content`` check of this stream's path, if any."""
        return self._check

    def open(self) -> None:
        if self._state != PENDING or self._stream.closed:
            return
        self._state = OPEN
        server = self._server
        self._stream.send_headers(
            200, TIMESTAMPED_STREAM_HEADERS if self.timestamps else STREAM_HEADERS
        )
        self._stream.direct_socket()  # its kernel takes little unsent from now on: writable
        server.metrics.inc("stream.opens.sent", server.name)
        server.metrics.gauge("stream.active.sent", server.name, 1)
        if server.preamble:
            self._write(server.preamble)
        if self._state == OPEN:
            self.idle_since = server.sweep.clock()
            server.sweep.add(self)
            self._stream.on_drain(self._drained)

    def event(
        self,
        data: str | None,
        *,
        event: str | None = None,
        id: str | None = None,
        timestamp: int = 0,
    ) -> None:
        if self._state == CLOSED:
            return
        check = self._check
        if data is not None and check is not None:
            reason = check(data)
            if reason is not None:
                check.refused(reason, remote=self.remote, id=id)
                if id is None:
                    return
                data = event = None
        if self._state == PENDING:
            self.open()
        if id is not None:
            self.last_id = id
        self._write(
            encode_event(data, event=event, id=id, timestamp=timestamp if self.timestamps else 0)
        )

    def write_encoded(self, data: bytes) -> None:
        if self._state == PENDING:
            self.open()
        self._write(data)

    def admitted(self, request: Request) -> None:
        self.request = request

    def direct_socket(self) -> DirectSocket | None:
        """The socket a group write may send this open stream's chunks to itself
        (:mod:`ssegate.bindings.sse.fanout`), where its response has one."""
        return self._stream.direct_socket() if self._state == OPEN else None

    def comment(self, text: str = "") -> None:
        if self._state == OPEN:
            self._write(encode_comment(text))

    def end(self) -> None:
        if self._state == CLOSED:
            return
        if self._state == PENDING:
            self.open()
        if self._state == OPEN and not self._stream.closed:
            self._stream.send_data(b"", end=True)
            self._server.metrics.inc("stream.closes.sent", self._server.name)
        self._close()

    def fail(self, status: int, reason: str) -> None:
        if self._state == CLOSED:
            return
        server = self._server
        server.metrics.inc("stream.errors.sent", server.name)
        if self._state == PENDING and not self._stream.closed:
            log.warning("sse.refused", binding=server.name, status=status, reason=reason)
            simple_response(self._stream, status, reason.encode() + b"\n")
        elif not self._stream.closed:
            log.warning("sse.aborted", binding=server.name, reason=reason, last_id=self.last_id)
            self._stream.reset()
        self._close()

    def expire(self, reason: str) -> None:
        """The stream's authorization ran out: end it (HTTP/2 RST_STREAM, HTTP/1.1 close)."""
        if self._state == CLOSED:
            return
        server = self._server
        log.warning(
            "sse.authorization_expired",
            binding=server.name,
            remote=self.remote,
            reason=reason,
            last_id=self.last_id,
        )
        server.metrics.inc("ssegate.sse.authorization_expired", server.name)
        if self._state == PENDING and not self._stream.closed:
            simple_response(self._stream, 403, reason.encode() + b"\n")
        elif not self._stream.closed:
            self._stream.reset()
        self._close()

    # -- server side ------------------------------------------------------------------------

    def visit(self, now: float) -> None:
        """Called by the sweep: drop the client if it is too far behind, tell its source once it
        reads again, else keep it alive (a stalled stream needs no keep-alive)."""
        wrote = self.wrote
        if (wrote or self.stalled_since is not None) and self._dropped_as_slow(now):
            return
        if self.stalled_since is not None:
            self.wrote = False
            return
        if self.keepalive <= 0:
            self.wrote = False
        elif wrote:
            self.wrote = False
            self.idle_since = now
        elif now - self.idle_since >= self.keepalive:
            subscription = self.subscription
            resume_id = subscription.resume_id() if subscription is not None else None
            if resume_id is None:
                self._write(encode_comment())
            else:
                self.last_id = resume_id
                self._write(encode_event(None, id=resume_id))
            self.wrote = False
            self.idle_since = now

    def stream_closed(self) -> None:
        """The response stream closed (peer gone, reset, or our own end)."""
        self._close()

    def _write(self, data: bytes) -> None:
        stream = self._stream
        if self._state != OPEN or stream.closed:
            return
        self.wrote = True
        server = self._server
        stream.send_data(data)
        server.metrics.inc("stream.data.sent", server.name, len(data))
        self.written()

    def written(self) -> None:
        """After a write to it (its own, or a group's direct one): over ``max-buffered`` it is
        dropped (reason ``bytes``), not writable it stalls (:meth:`refused`)."""
        stream = self._stream
        buffered = stream.buffered
        if buffered:  # a stream that holds nothing is writable: no need to ask
            if buffered > self._server.max_buffered:
                self._drop_slow("bytes", buffered)
            elif not stream.writable:
                self.refused()  # what lies below did not take the write whole (see slow_clients)

    def _close(self) -> None:
        if self._state == CLOSED:
            return
        if self._state == OPEN:
            self._server.metrics.gauge("stream.active.sent", self._server.name, -1)
        self._state = CLOSED
        self._cancel_stall_timer()
        self._server.sweep.discard(self)
        authorization, self.authorization = self.authorization, None
        if authorization is not None:
            authorization.cancel()
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            subscription.cancel()


class SseServer:
    """The built ``sse`` server binding (an :class:`HttpHandler`)."""

    def __init__(
        self,
        name: str,
        routes: list[SseRoute],
        metrics: Metrics,
        *,
        retry: int | None = None,
        keepalive: float = DEFAULT_KEEPALIVE,
        initial_comment: str | None = None,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
        slow_client_timeout: float = DEFAULT_SLOW_CLIENT_TIMEOUT,
        checks: list[tuple[Pattern, ContentCheck]] | None = None,
        sweep: StreamSweep | None = None,
        guards: dict[str, Guard] | None = None,
        turns: TurnBudget | None = None,
    ) -> None:
        self.name = name
        self.guards = guards or {}
        """Built guards of the guarded routes, by name (they keep the streams authorized)."""
        self.routes = routes
        self.metrics = metrics
        self.retry = retry
        self.keepalive = keepalive
        self.max_buffered = max_buffered
        self.slow_client_timeout = slow_client_timeout
        self.stall_mark = min(STALL_MARK, max_buffered // 2)
        self.resume_mark = min(RESUME_MARK, self.stall_mark)
        self.checks = checks or []
        """``requests[].content``: the check of the first entry whose path matches."""
        self.sweep = sweep if sweep is not None else shared_sweep()
        self.turns = turns or shared_turns()
        """The loop turn's budget for deferrable work: slow clients' drops at their timeout."""
        preamble = b""
        if retry is not None:
            preamble += encode_retry(retry)
        if initial_comment is not None:
            preamble += encode_comment(initial_comment)
        self.preamble = preamble

    def handle(self, request: Request, body: bytes, stream: ResponseStream) -> None:
        if request.method != "GET":
            simple_response(stream, 405, headers=[("allow", "GET")])
            return
        try:
            last_id = last_event_id_of(request)
        except BadLastEventId as exc:
            reason = str(exc)
            log.warning(
                "sse.bad_last_event_id", binding=self.name, remote=request.remote, reason=reason
            )
            self.metrics.inc("ssegate.sse.bad_last_event_ids", self.name)
            self.metrics.inc("stream.errors.sent", self.name)
            simple_response(stream, exc.status, exc.body)
            return
        path = request.path
        route = self.route(path)
        if route is None:
            simple_response(stream, 404)
            return
        request, refusal = route.guarded.admit(request, self.guards)
        if refusal is not None:
            self.metrics.inc("stream.errors.sent", self.name)
            answer_refusal(stream, refusal, binding=self.name, request=request)
            return
        check = next((c for p, c in self.checks if p.match(path) is not None), None)
        sink = DownstreamStream(
            self, stream, request.remote, check, timestamps=wants_timestamps(request)
        )
        stream.on_close(sink.stream_closed)
        try:
            subscription = route.source.subscribe(request, last_id or None, sink)
        except Exception as exc:  # a source bug must not take the connection down unanswered
            log.error("sse.subscribe_failed", binding=self.name, error=repr(exc))
            sink.fail(500, "internal error")
            return
        if sink.closed:
            subscription.cancel()
            return
        sink.subscription = subscription
        request = sink.request or request
        grants = [
            (guard, grant)
            for name, guard in request.authorized_by.items()
            if isinstance(grant := request.identities.get(name), Identity)
        ]
        if grants:
            sink.authorization = keep_authorized(
                sink, grants, connection_id=request.connection_id, http2=request.version == "2"
            )

    def route(self, path: str) -> SseRoute | None:
        for route in self.routes:
            if route.path is None or route.path.match(path) is not None:
                return route
        return None

    def slow_client(
        self, sink: SlowClientPolicy, reason: str, unsent: int, stalled_for: float
    ) -> None:
        log.warning(
            "sse.slow_client_closed",
            binding=self.name,
            remote=sink.remote,
            reason=reason,
            buffered=unsent,
            limit=self.max_buffered,
            stalled_for=round(stalled_for, 1),
            timeout=self.slow_client_timeout,
            last_id=sink.last_id,
        )
        self.metrics.inc("ssegate.sse.slow_clients", self.name, reason=reason)


def wants_timestamps(request: Request) -> bool:
    """The client asked for ``text/event-stream;ext=timestamp`` (Zilla's test: the ``accept``
    header holds ``ext=timestamp``)."""
    return "ext=timestamp" in request.headers.get("accept", "")


def build(binding: Binding, ctx: BuildContext) -> SseServer:
    options = binding.options
    where = f"{binding.path}.options"
    retry = options.get("retry")  # the schema bounds these numbers
    keepalive = options.get("keepalive", DEFAULT_KEEPALIVE)
    max_buffered = options.get("max-buffered", DEFAULT_MAX_BUFFERED)
    slow_client_timeout = options.get("slow-client-timeout", DEFAULT_SLOW_CLIENT_TIMEOUT)
    initial_comment = options.get("initial-comment")
    if initial_comment is not None and ("\n" in initial_comment or "\r" in initial_comment):
        raise ConfigError(f"{where}.initial-comment", "must be one line of text")
    routes: list[SseRoute] = []
    for route in binding.routes:
        if not route.exit:
            continue
        source = ctx.exit(route.exit, SSE_SOURCE, f"{route.path or binding.path}.exit")
        patterns: list[Pattern | None] = [
            Pattern.compile(str(w["path"]), f"{route.path}.when[{i}].path")
            for i, w in enumerate(route.when)
            if "path" in w
        ] or [None]
        guarded = Guarded.compile(route.guarded, f"{route.path}.guarded")
        routes.extend(SseRoute(p, source, guarded) for p in patterns)
    if binding.exit:
        source = ctx.exit(binding.exit, SSE_SOURCE, f"{binding.path}.exit")
        routes.append(SseRoute(None, source, Guarded()))
    guards = {g: ctx.guard(g) for route in routes for g in route.guarded}
    checks = compile_checks(options.get("requests"), f"{where}.requests", binding.name, ctx)
    return SseServer(
        binding.name,
        routes,
        ctx.metrics,
        retry=None if retry is None else int(retry),
        keepalive=float(keepalive or 0),
        initial_comment=initial_comment,
        max_buffered=int(max_buffered or DEFAULT_MAX_BUFFERED),
        slow_client_timeout=float(slow_client_timeout or 0),
        checks=checks,
        guards=guards,
    )
