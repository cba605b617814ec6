"""The ``http`` server binding: one request at a time from HTTP/1.1 or HTTP/2 to its route's exit.

:func:`build` resolves everything once at start-up: the compiled routes, the CORS policy, the
versions offered, and the handler behind every route's exit. :meth:`HttpServer.dispatch` is the
one place a request is decided: a CORS preflight is answered here, a refused origin gets 403,
then ``options.authorization`` looks up each guard's credentials (cookie, header, query) and
leaves what the guard (:class:`~ssegate.contract.guard.Guard`, whatever its type) made of them in
``request.identities`` (credentials their guard may accept once refreshed, such as a token whose
``kid`` is unknown, wait for the guard's bounded refresh without blocking the connection). A
challenge answer (``POST``, ``content-type: application/x-challenge-response``) is answered
then, before any route, as Zilla does: the fresh token extends the streams its guard keeps
authorized (:mod:`ssegate.guards.streams`), 204, or the answer is 401/403 with the reason.
Routes are then tried in order: the first whose ``when`` matches and whose ``guarded`` accepts
the identities (role expressions evaluated for this request) answers, on a stream that adds the
CORS response headers, and its guards keep authorized the stream the request opens; when routes
matched but only their guards refused, the answer is 401 (no credentials) or 403 (bad
credentials, missing roles) with ``www-authenticate``; no route is 404. The route's exit gets
the request with ``options.overrides`` set on it (:mod:`ssegate.bindings.http.overrides`), and
only once it is held to ``options.requests`` (:mod:`ssegate.bindings.http.requests`): one that
fails its rule is answered 400 (413 for a body too large to check) naming what failed and the
rule's config path, logged, counted in ``http.requests.invalid``, and never handed to the exit.
Bodies arrive complete (the protocols buffer them up to ``HttpLimits.max_body_bytes``), so
``content`` is checked before the exit sees the request. A handler that raises becomes a 500 and
one log line, and so does any other exception on the way (a guard that fails other than by
refusing the token, say): nothing a request causes escapes into the connection's protocol
callbacks. Every exchange is measured and logged when its stream closes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ssegate.bindings.http.connection import (
    ALL_VERSIONS,
    ConnectionRegistry,
    HttpConnectionProtocol,
)
from ssegate.bindings.http.cors import AccessControl
from ssegate.bindings.http.h2_floods import FrameBudgets
from ssegate.bindings.http.overrides import HeaderOverrides
from ssegate.bindings.http.routing import HttpRoutes, RouteMatch
from ssegate.bindings.http.types import HttpLimits
from ssegate.config.model import Binding
from ssegate.contract.exchange import (
    DirectSocket,
    HttpHandler,
    Request,
    ResponseStream,
    simple_response,
)
from ssegate.contract.guard import Answered, Guard, RelayedAnswer
from ssegate.contract.identity import CredentialsRejected, Identity
from ssegate.engine.context import BuildContext, ExitKind
from ssegate.guards import Refusal, answer_refusal, check_guarded
from ssegate.guards.credentials import CredentialsLookup
from ssegate.guards.streams import is_challenge_answer
from ssegate.host.turns import TurnBudget, shared_turns
from ssegate.telemetry import log
from ssegate.telemetry.metrics import SIZE_BUCKETS, Metrics

if TYPE_CHECKING:
    from ssegate.bindings.http.requests import RequestProblem, RequestRules


class ObservedStream:
    """A handler's view of a response: adds CORS headers and counts what is sent."""

    def __init__(self, stream: ResponseStream, request: Request, access: AccessControl) -> None:
        self._stream = stream
        self._request = request
        self._access = access
        self.status = 0
        self._sent = 0
        self._direct: DirectSocket | None = None
        """The socket handed out for direct writes (one per response), whose bytes count too."""
        self.cors = True
        """False for answers that carry their own CORS headers (preflights)."""

    @property
    def headers_sent(self) -> bool:
        return self.status != 0

    @property
    def sent_bytes(self) -> int:
        """Body bytes sent, through the stream and directly to its socket."""
        direct = self._direct
        return self._sent + (direct.sent if direct is not None else 0)

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
        self._sent += len(data)
        self._stream.send_data(data, end=end)

    def reset(self) -> None:
        self._stream.reset()

    def abort(self, connection_limit: int) -> None:
        self._stream.abort(connection_limit)

    @property
    def buffered(self) -> int:
        return self._stream.buffered

    @property
    def unsent(self) -> int:
        return self._stream.unsent

    @property
    def closed(self) -> bool:
        return self._stream.closed

    def on_close(self, callback: Callable[[], None]) -> None:
        self._stream.on_close(callback)

    def direct_socket(self) -> DirectSocket | None:
        direct = self._stream.direct_socket()
        if direct is not None:
            self._direct = direct
        return direct

    def on_drain(self, callback: Callable[[], None]) -> None:
        self._stream.on_drain(callback)


HTTP_HANDLER: ExitKind[HttpHandler] = ExitKind(
    HttpHandler,
    "a binding that answers HTTP requests (an sse server, an http-filesystem proxy,"
    " an asyncapi server)",
)
"""What an http server route exits to."""


class GuardCredentials:
    """One entry of ``options.authorization``: a built guard and where its credentials are."""

    __slots__ = ("guard", "lookup", "name")

    def __init__(self, name: str, guard: Guard, lookup: CredentialsLookup) -> None:
        self.name = name
        self.guard = guard
        self.lookup = lookup


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
        authorization: list[GuardCredentials] | None = None,
        requests: RequestRules | None = None,
        overrides: HeaderOverrides | None = None,
        guards: dict[str, Guard] | None = None,
        turns: TurnBudget | None = None,
    ) -> None:
        self.name = name
        self.turns = turns or shared_turns()
        """The loop turn's budget for new requests, shared by the process's servers."""
        self.authorization = authorization or []
        self.guards = {**(guards or {}), **{e.name: e.guard for e in self.authorization}}
        """The built guards of ``options.authorization`` and of the routes, by name."""
        self.overrides = overrides
        """``options.overrides``: headers set on the request handed to an exit."""
        self.credentials_hints = {entry.name: entry.lookup.hint() for entry in self.authorization}
        """How to present each guard's credentials, for the body of a 401 or 403."""
        self.requests = requests
        """``options.requests``, compiled; ``None`` when the binding has none."""
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
        """Answer one request, within the loop turn's budget for new requests or in a later
        turn (:mod:`ssegate.host.turns`); never raises (an unexpected exception is a 500 and
        a log line). A request whose stream closed while it waited is not answered."""
        observed = ObservedStream(stream, request, self.access)
        self._measure(request, body, observed)

        def answer() -> None:
            if not observed.closed:
                self._answer_safely(
                    request, observed, lambda: self._decide(request, body, observed)
                )

        if not self.turns.run(answer):
            self.metrics.inc("ssegate.http.requests.deferred", self.name)

    def _decide(self, request: Request, body: bytes, observed: ObservedStream) -> None:
        preflight = self.access.preflight(request)
        if preflight is not None:
            status, headers = preflight
            observed.cors = False
            simple_response(observed, status, headers=headers)
            return
        if not self.access.allows_request(request):
            simple_response(observed, 403, b"origin not allowed\n")
            return
        waiting = self._authorize(request, may_wait=True)
        if waiting is None:
            self._answer_or_route(request, body, observed)
            return

        def resume() -> None:
            self._authorize(request, may_wait=False)
            self._answer_or_route(request, body, observed)

        def keys_fetched(_: object) -> None:
            if not observed.closed:
                self._answer_safely(request, observed, resume)

        waiting.add_done_callback(keys_fetched)

    def _answer_safely(
        self, request: Request, observed: ObservedStream, step: Callable[[], None]
    ) -> None:
        """Run ``step``; an exception it lets out (a failing guard, say) answers 500."""
        try:
            step()
        except Exception as exc:
            self._fail(request, observed, exc, "http.dispatch_failed")

    def _fail(
        self,
        request: Request,
        observed: ObservedStream,
        exc: Exception,
        event: str,
        **context: object,
    ) -> None:
        """Log one line for ``exc`` and end the exchange: 500, or a reset once headers went."""
        log.error(
            event,
            binding=self.name,
            **context,
            path=request.path,
            error=f"{type(exc).__name__}: {exc}"[:300],
        )
        self.metrics.inc("stream.errors.sent", self.name)
        if observed.headers_sent:
            observed.reset()
        elif not observed.closed:
            simple_response(observed, 500, b"internal error\n")

    def _answer_or_route(self, request: Request, body: bytes, observed: ObservedStream) -> None:
        if self.authorization and is_challenge_answer(request.method, request.headers):
            self._answer_challenge(request, observed)
        else:
            self._route(request, body, observed)

    def _answer_challenge(self, request: Request, observed: ObservedStream) -> None:
        """A challenge answer, before any route: the fresh token extends the streams its guard
        keeps authorized (204), or the answer says why not (401/403). An HTTP/1.1 answer also
        reaches the other processes sharing the listening address (:mod:`ssegate.guards.relay`)
        and is decided once they replied."""
        http2 = request.version == "2"
        outcomes: list[tuple[GuardCredentials, asyncio.Future[RelayedAnswer] | Answered]] = []
        for entry in self.authorization:
            refusal = check_guarded(request.identities, {entry.name: ()}, self.guards)
            fresh = request.identities.get(entry.name)
            if refusal is not None:
                answer_refusal(observed, refusal, binding=self.name, request=request)
                return
            if not isinstance(fresh, Identity):  # cannot be: check_guarded found an identity
                continue
            here = entry.guard.streams.answer(
                fresh, connection_id=request.connection_id, http2=http2
            )
            relay = entry.guard.streams.relay
            token = entry.lookup.find(request)
            if http2 or relay is None or token is None:
                outcomes.append((entry, here))
            else:
                outcomes.append((entry, relay.relay(entry.name, token, fresh, here)))
        waiting = [o for _, o in outcomes if isinstance(o, asyncio.Future) and not o.done()]
        if not waiting:
            self._answered(request, observed, outcomes)
            return

        def replied(_: object) -> None:
            if not observed.closed:
                self._answer_safely(
                    request, observed, lambda: self._answered(request, observed, outcomes)
                )

        asyncio.gather(*waiting).add_done_callback(replied)

    def _answered(
        self,
        request: Request,
        observed: ObservedStream,
        outcomes: list[tuple[GuardCredentials, asyncio.Future[RelayedAnswer] | Answered]],
    ) -> None:
        """204 when every guard's token extended a stream somewhere, else the first refusal."""
        extended = relayed = 0
        for entry, outcome in outcomes:
            done = outcome.result() if isinstance(outcome, asyncio.Future) else outcome
            if not done.extended:
                refusal = Refusal(
                    403,
                    entry.name,
                    done.reason or "nothing to extend",
                    "invalid_token",
                    scheme=entry.guard.scheme,
                )
                answer_refusal(observed, refusal, binding=self.name, request=request)
                return
            extended += done.extended
            relayed += done.relayed if isinstance(done, RelayedAnswer) else 0
        log.event(
            "guard.authorization_extended",
            binding=self.name,
            streams=extended,
            elsewhere=relayed,
            remote=request.remote,
        )
        simple_response(observed, 204)

    def _route(self, request: Request, body: bytes, observed: ObservedStream) -> None:
        match: RouteMatch | None = None
        refusal: Refusal | None = None
        for candidate in self.routes.candidates(request):
            refused = candidate.guards.admit(request, self.guards)
            if refused is None:
                match = candidate
                break
            refusal = refusal or refused
        if match is None and refusal is not None:
            answer_refusal(observed, refusal, binding=self.name, request=request)
            return
        handler = None if match is None else self.handlers.get(match.route.exit or "")
        if match is None or handler is None:
            simple_response(observed, 404, b"no route\n")
            return
        request.params = dict(match.params)
        if self.overrides is not None:
            request = self.overrides.apply(request)
        if self.requests is not None:
            problem = self.requests.check(request, body)
            if problem is not None:
                self._refuse_invalid(request, problem, observed)
                return
        try:
            handler.handle(request, body, observed)
        except Exception as exc:
            self._fail(request, observed, exc, "http.handler_failed", exit=match.route.exit)

    def _refuse_invalid(
        self, request: Request, problem: RequestProblem, observed: ObservedStream
    ) -> None:
        self.metrics.inc("http.requests.invalid", self.name)
        log.warning(
            "http.request_invalid",
            binding=self.name,
            method=request.method,
            path=request.path,
            problem=str(problem),
            rule=problem.rule,
            remote=request.remote,
        )
        simple_response(observed, problem.status, f"{problem.message}\n".encode())

    def _authorize(self, request: Request, *, may_wait: bool) -> asyncio.Future[None] | None:
        """Fill ``request.identities`` from the configured guards' credentials.

        Returns a guard's refresh to wait for (then call again with ``may_wait=False``) when
        it rejected credentials it may accept once refreshed (a token naming a ``kid`` it does
        not hold yet); else ``None``. The credentials themselves are never logged.
        """
        request.credentials_hints = self.credentials_hints
        for entry in self.authorization:
            credentials = entry.lookup.find(request)
            if credentials is None:
                continue
            outcome = entry.guard.authorize(credentials)
            if isinstance(outcome, CredentialsRejected):
                if outcome.refreshable and may_wait:
                    waiting = entry.guard.refresh()
                    if waiting is not None:
                        return waiting
                self.metrics.inc("ssegate.guard.rejected", self.name)
                log.warning(
                    "http.credentials_rejected",
                    binding=self.name,
                    guard=entry.name,
                    reason=outcome.reason,
                    path=request.path,
                    remote=request.remote,
                )
            request.identities[entry.name] = outcome
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


def parse_versions(value: list[str] | None) -> frozenset[str]:
    """``options.versions``: some of ``http/1.1`` and ``h2``; default both."""
    return ALL_VERSIONS if value is None else frozenset(value)


def parse_http2(value: dict[str, Any] | None) -> HttpLimits:
    """``options.http2``: each connection's HTTP/2 frame budgets, acknowledgement backlog and
    request timeout; what is left out keeps the default of :class:`HttpLimits`. The schema
    bounds every value."""
    limits = HttpLimits()
    if value is None:
        return limits
    rates = value.get("frames-per-second") or {}
    defaults = limits.frames
    budgets = {
        kind.replace("-", "_"): float(rates.get(kind, default))
        for kind, default in defaults.rates().items()
    }
    frames = FrameBudgets(**budgets, burst=float(value.get("frame-burst", defaults.burst)))
    return dataclasses.replace(
        limits,
        frames=frames,
        max_unread_acks=int(value.get("max-unread-acks", limits.max_unread_acks)),
        request_timeout=float(value.get("request-timeout", limits.request_timeout)),
    )


def parse_http1(value: dict[str, Any] | None, limits: HttpLimits) -> HttpLimits:
    """``options.http1``: each HTTP/1.1 connection's request timeout; left out, ``limits``'.
    The schema bounds it."""
    if value is None:
        return limits
    timeout = float(value.get("request-timeout", limits.http1_request_timeout))
    return dataclasses.replace(limits, http1_request_timeout=timeout)


def build(binding: Binding, ctx: BuildContext) -> HttpServer:
    options = binding.options or {}
    versions = parse_versions(options.get("versions"))
    limits = parse_http1(options.get("http1"), parse_http2(options.get("http2")))
    access = AccessControl.from_options(
        options.get("access-control"), f"{binding.path}.options.access-control"
    )
    routes = HttpRoutes(binding)
    handlers: dict[str, HttpHandler] = {}
    for route in routes.routes:
        if route.exit and route.exit not in handlers:
            where = f"{route.path or binding.path}.exit"
            handlers[route.exit] = ctx.exit(route.exit, HTTP_HANDLER, where)
    authorization = [
        GuardCredentials(
            guard,
            ctx.guard(guard),
            CredentialsLookup.from_options(entry, f"{binding.path}.options.authorization.{guard}"),
        )
        for guard, entry in (options.get("authorization") or {}).items()
    ]
    requests = None
    if options.get("requests") is not None:
        from ssegate.bindings.http.requests import RequestRules

        requests = RequestRules.compile(
            options["requests"], f"{binding.path}.options.requests", ctx.catalogs
        )
    return HttpServer(
        binding.name,
        routes,
        access,
        handlers,
        ctx.metrics,
        versions=versions,
        limits=limits,
        authorization=authorization,
        requests=requests,
        overrides=HeaderOverrides.parse(
            options.get("overrides"), f"{binding.path}.options.overrides"
        ),
        guards={name: ctx.guard(name) for route in routes.routes for name in route.guarded},
    )
