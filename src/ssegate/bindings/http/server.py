"""The ``http`` server binding: one request at a time from HTTP/1.1 or HTTP/2 to its route's exit.

:func:`build` resolves everything once at start-up: the compiled routes, the CORS policy, the
versions offered, and the handler behind every route's exit. :meth:`HttpServer.dispatch` is the
one place a request is decided: a CORS preflight is answered here, a refused origin gets 403,
(authorization will decide 401/403 here, before routing), a matching route's handler answers
on a stream that adds the CORS response headers, and no route is 404. A handler that raises
becomes a 500 and one log line. Every exchange is measured and logged when its stream closes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ssegate.bindings.http.connection import (
    ALL_VERSIONS,
    ConnectionRegistry,
    HttpConnectionProtocol,
    HttpLimits,
)
from ssegate.bindings.http.cors import AccessControl
from ssegate.bindings.http.routing import HttpRoutes
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext
from ssegate.engine.exchange import HttpHandler, Request, ResponseStream, simple_response
from ssegate.telemetry import log
from ssegate.telemetry.metrics import SIZE_BUCKETS, Metrics


class ObservedStream:
    """A handler's view of a response: adds CORS headers and counts what is sent."""

    def __init__(self, stream: ResponseStream, request: Request, access: AccessControl) -> None:
        self._stream = stream
        self._request = request
        self._access = access
        self.status = 0
        self.sent_bytes = 0
        self.cors = True
        """False for answers that carry their own CORS headers (preflights)."""

    @property
    def headers_sent(self) -> bool:
        return self.status != 0

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        if self.status:
            return
        self.status = status
        extra = self._access.response_headers(self._request, headers) if self.cors else []
        self._stream.send_headers(status, [*headers, *extra] if extra else headers, end=end)

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        if not self.status:
            self.send_headers(200, [])
        self.sent_bytes += len(data)
        self._stream.send_data(data, end=end)

    def reset(self) -> None:
        self._stream.reset()

    @property
    def buffered(self) -> int:
        return self._stream.buffered

    @property
    def closed(self) -> bool:
        return self._stream.closed

    def on_close(self, callback: Callable[[], None]) -> None:
        self._stream.on_close(callback)

    def on_drain(self, callback: Callable[[], None]) -> None:
        self._stream.on_drain(callback)


class HttpServer:
    """A built ``http`` server binding."""

    def __init__(
        self,
        name: str,
        routes: HttpRoutes,
        access: AccessControl,
        handlers: dict[str, HttpHandler],
        metrics: Metrics,
        *,
        versions: frozenset[str] = ALL_VERSIONS,
        limits: HttpLimits | None = None,
    ) -> None:
        self.name = name
        self.routes = routes
        self.access = access
        self.handlers = handlers
        """Handler by exit binding name, resolved at build time."""
        self.metrics = metrics
        self.versions = versions
        self.limits = limits or HttpLimits()
        self.connections = ConnectionRegistry(name, metrics)

    def protocol_factory(self) -> Callable[[], asyncio.Protocol]:
        """What a listener calls for every accepted connection."""

        def create() -> asyncio.Protocol:
            return HttpConnectionProtocol(
                self.dispatch, self.limits, self.versions, self.connections
            )

        return create

    def close(self) -> None:
        """The gateway is stopping: close every connection this server holds."""
        self.connections.close_all()

    def dispatch(self, request: Request, body: bytes, stream: ResponseStream) -> None:
        """Answer one request; never raises."""
        observed = ObservedStream(stream, request, self.access)
        self._measure(request, body, observed)
        preflight = self.access.preflight(request)
        if preflight is not None:
            status, headers = preflight
            observed.cors = False
            simple_response(observed, status, headers=headers)
            return
        if not self.access.allows_request(request):
            simple_response(observed, 403, b"origin not allowed\n")
            return
        refusal = self._authorize(request)
        if refusal is not None:
            simple_response(observed, refusal, b"unauthorized\n" if refusal == 401 else b"")
            return
        match = self.routes.match(request)
        handler = None if match is None else self.handlers.get(match.route.exit or "")
        if match is None or handler is None:
            simple_response(observed, 404, b"no route\n")
            return
        request.params = dict(match.params)
        try:
            handler.handle(request, body, observed)
        except Exception as exc:
            log.error(
                "http.handler_failed",
                binding=self.name,
                exit=match.route.exit,
                path=request.path,
                error=f"{type(exc).__name__}: {exc}",
            )
            self.metrics.inc("stream.errors.sent", self.name)
            if observed.headers_sent:
                observed.reset()
            else:
                simple_response(observed, 500, b"internal error\n")

    def _authorize(self, request: Request) -> int | None:
        """The status refusing ``request`` before routing (401, 403), or None to go on.

        Guards are not wired yet: every request goes on. This is where ``authorization``
        will look up credentials and fill ``request.identities``.
        """
        return None

    def _measure(self, request: Request, body: bytes, observed: ObservedStream) -> None:
        metrics, name = self.metrics, self.name
        started = time.monotonic()
        metrics.inc("stream.opens.received", name)
        metrics.gauge("http.active.requests", name, 1)
        metrics.observe("http.request.size", len(body), name, buckets=SIZE_BUCKETS)

        def closed() -> None:
            duration = time.monotonic() - started
            metrics.inc("stream.closes.sent", name)
            metrics.gauge("http.active.requests", name, -1)
            metrics.observe("http.duration", duration, name)
            metrics.observe("http.response.size", observed.sent_bytes, name, buckets=SIZE_BUCKETS)
            log.event(
                "http.request",
                binding=name,
                method=request.method,
                path=request.path,
                status=observed.status,
                version=request.version,
                duration=round(duration, 6),
            )

        observed.on_close(closed)


def parse_versions(value: Any, path: str) -> frozenset[str]:
    """``options.versions``: a non-empty list of ``http/1.1`` and ``h2``; default both."""
    if value is None:
        return ALL_VERSIONS
    if not isinstance(value, list) or not value:
        raise ConfigError(path, "must be a non-empty list of 'http/1.1' and 'h2'")
    for index, item in enumerate(value):
        if item not in ALL_VERSIONS:
            raise ConfigError(f"{path}[{index}]", f"{item!r} is not 'http/1.1' or 'h2'")
    return frozenset(value)


def build(binding: Binding, ctx: BuildContext) -> HttpServer:
    options = binding.options or {}
    versions = parse_versions(options.get("versions"), f"{binding.path}.options.versions")
    access = AccessControl.from_options(
        options.get("access-control"), f"{binding.path}.options.access-control"
    )
    routes = HttpRoutes(binding)
    handlers: dict[str, HttpHandler] = {}
    for route in routes.routes:
        if route.exit and route.exit not in handlers:
            handler = ctx.exit(route.exit)
            if not callable(getattr(handler, "handle", None)):
                raise ConfigError(
                    f"{route.path or binding.path}.exit",
                    f"'{route.exit}' cannot answer HTTP requests",
                )
            handlers[route.exit] = handler
    return HttpServer(binding.name, routes, access, handlers, ctx.metrics, versions=versions)
