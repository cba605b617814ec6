"""The ``http`` server binding: one request at a time from HTTP/1.1 or HTTP/2 to its route's exit.

:func:`build` resolves everything once at start-up: the compiled routes, the CORS policy, the
versions offered, and the handler behind every route's exit. :meth:`HttpServer.answer` is the
one place a request is decided, one coroutine that takes the steps in order. A CORS preflight
is answered here, a refused origin gets 403. Then ``options.authorization`` looks up each
guard's credentials (cookie, header, query) and passes on a request whose ``identities`` say
what the guard (:class:`~ssegate.contract.guard.Guard`, whatever its type) made of them
(credentials their guard may accept once refreshed, such as a token whose ``kid`` is unknown,
wait for the guard's bounded refresh without blocking the connection). A challenge answer
(``POST``, ``content-type: application/x-challenge-response``) is answered then, before any
route, as Zilla does: the fresh token extends the streams its guard keeps authorized
(:mod:`ssegate.guards.streams`), 204, or the answer is 401/403 with the reason. Routes are then
tried in order: the first whose ``when`` matches and whose ``guarded`` accepts the identities
(role expressions evaluated for this request) answers, on a stream that adds the CORS response
headers (:mod:`ssegate.bindings.http.observed`), and its guards keep authorized the stream the
request opens; when routes matched but only their guards refused, the answer is 401 (no
credentials) or 403 (bad credentials, missing roles) with ``www-authenticate``; no route is
404. The route's exit gets the request with its parameters and ``options.overrides`` set on it
(:mod:`ssegate.bindings.http.overrides`), and only once it is held to ``options.requests``
(:mod:`ssegate.bindings.http.requests`): one that fails its rule is answered 400 (413 for a
body too large to check) naming what failed and the rule's config path, logged, counted in
``http.requests.invalid``, and never handed to the exit. Bodies arrive complete (the protocols
buffer them up to ``HttpLimits.max_body_bytes``), so ``content`` is checked before the exit
sees the request. A handler that raises becomes a 500 and one log line, and so does any other
exception on the way (a guard that fails other than by refusing the token, say): nothing a
request causes escapes into the connection's protocol callbacks. Every exchange is measured
and logged when its stream closes.

A request is never changed once built (:class:`~ssegate.contract.exchange.Request` is frozen):
each step that learns something passes on a copy that says it, and the exchange is measured and
logged as the request arrived. :meth:`HttpServer.dispatch` runs the coroutine eagerly
(:mod:`ssegate.host.eager`): a request that waits for nothing, nearly all, is answered within
the call that parsed it, inside the loop turn's budget for new requests
(:mod:`ssegate.host.turns`); one that waits for a key refresh or for the other processes'
replies to a challenge answer goes on when they are done, again within the budget.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ssegate.bindings.http.challenge import (
    GuardCredentials,
    answer_challenge,
    challenge_outcomes,
    pending,
)
from ssegate.bindings.http.connection import (
    ALL_VERSIONS,
    ConnectionRegistry,
    HttpConnectionProtocol,
)
from ssegate.bindings.http.cors import AccessControl
from ssegate.bindings.http.h2_floods import FrameBudgets
from ssegate.bindings.http.observed import ObservedStream
from ssegate.bindings.http.overrides import HeaderOverrides
from ssegate.bindings.http.routing import HttpRoutes
from ssegate.bindings.http.types import HttpLimits
from ssegate.config.model import Binding
from ssegate.contract.exchange import HttpHandler, Request, ResponseStream, simple_response
from ssegate.contract.guard import Guard
from ssegate.contract.identity import Authorization, CredentialsRejected
from ssegate.engine.context import BuildContext, ExitKind
from ssegate.guards import Refusal, answer_refusal
from ssegate.guards.credentials import CredentialsLookup
from ssegate.guards.streams import is_challenge_answer
from ssegate.host.eager import run_eagerly
from ssegate.host.turns import TurnBudget, shared_turns
from ssegate.telemetry import log
from ssegate.telemetry.metrics import SIZE_BUCKETS, Metrics

if TYPE_CHECKING:
    from ssegate.bindings.http.requests import RequestProblem, RequestRules

__all__ = ["HTTP_HANDLER", "GuardCredentials", "HttpServer", "ObservedStream", "build"]

HTTP_HANDLER: ExitKind[HttpHandler] = ExitKind(
    HttpHandler,
    "a binding that answers HTTP requests (an sse server, an http-filesystem proxy,"
    " an asyncapi server)",
)
"""What an http server route exits to."""


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
        """Answer one request: :meth:`answer`, run eagerly (:mod:`ssegate.host.eager`) within
        the loop turn's budget for new requests or in a later turn (:mod:`ssegate.host.turns`).
        Never raises."""
        observed = ObservedStream(stream, request, self.access)
        self._measure(request, body, observed)
        if not run_eagerly(self.turns, lambda: self.answer(request, body, observed)):
            self.metrics.inc("ssegate.http.requests.deferred", self.name)

    async def answer(self, arrived: Request, body: bytes, observed: ObservedStream) -> None:
        """Decide the request that ``arrived`` step by step, as the module docstring tells;
        each step that learns something passes on a copy of the request that says it. A
        request whose stream closed while it waited is not answered; an exception on the way
        is a 500 and a log line."""
        request = arrived
        try:
            if observed.closed:
                return
            preflight = self.access.preflight(request)
            if preflight is not None:
                observed.cors = False
                simple_response(observed, preflight[0], headers=preflight[1])
                return
            if not self.access.allows_request(request):
                simple_response(observed, 403, b"origin not allowed\n")
                return
            identities: dict[str, Authorization] = dict(request.identities)
            for entry in self.authorization:
                credentials = entry.lookup.find(request)
                if credentials is None:
                    continue
                outcome = entry.guard.authorize(credentials)
                if isinstance(outcome, CredentialsRejected) and outcome.refreshable:
                    refresh = entry.guard.refresh()  # keys to fetch first, bounded by the guard
                    if refresh is not None:
                        await asyncio.wait((refresh,))  # whatever its outcome
                        if observed.closed:
                            return
                        outcome = entry.guard.authorize(credentials)
                identities[entry.name] = self._established(entry, outcome, request)
            request = dataclasses.replace(
                request, identities=identities, credentials_hints=self.credentials_hints
            )
            if self.authorization and is_challenge_answer(request.method, request.headers):
                outcomes = challenge_outcomes(
                    self.authorization, self.guards, request, observed, self.name
                )
                if outcomes is None:
                    return
                waiting = pending(outcomes)
                if waiting:  # the other processes' replies
                    await asyncio.gather(*waiting)
                    if observed.closed:
                        return
                answer_challenge(outcomes, request, observed, self.name)
                return
            routed = self._route(request, observed)
            if routed is None:
                return
            request, handler, exit_name = routed
            if self.overrides is not None:
                request = self.overrides.apply(request)
            problem = None if self.requests is None else self.requests.check(request, body)
            if problem is not None:
                self._refuse_invalid(request, problem, observed)
                return
            try:
                handler.handle(request, body, observed)
            except Exception as exc:
                self._fail(request, observed, exc, "http.handler_failed", exit=exit_name)
        except Exception as exc:
            self._fail(arrived, observed, exc, "http.dispatch_failed")

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

    def _established(
        self, entry: GuardCredentials, outcome: Authorization, request: Request
    ) -> Authorization:
        """``outcome`` of ``entry``'s credentials, counted and logged when the guard rejected
        them (the credentials themselves are never logged)."""
        if isinstance(outcome, CredentialsRejected):
            self.metrics.inc("ssegate.guard.rejected", self.name)
            log.warning(
                "http.credentials_rejected",
                binding=self.name,
                guard=entry.name,
                reason=outcome.reason,
                path=request.path,
                remote=request.remote,
            )
        return outcome

    def _route(
        self, request: Request, observed: ObservedStream
    ) -> tuple[Request, HttpHandler, str] | None:
        """The first route that matches and whose guards admit ``request``: the request to
        pass on (with the route's parameters and guards), the exit's handler and name; else
        ``None``, answered 401/403 (routes matched, only their guards refused) or 404."""
        refusal: Refusal | None = None
        for candidate in self.routes.candidates(request):
            admitted, refused = candidate.guards.admit(request, self.guards)
            if refused is None:
                exit_name = candidate.route.exit or ""
                handler = self.handlers.get(exit_name)
                if handler is None:
                    break  # admitted by a route that exits nowhere: no route
                return (
                    dataclasses.replace(admitted, params=dict(candidate.params)),
                    handler,
                    exit_name,
                )
            refusal = refusal or refused
        else:
            if refusal is not None:
                answer_refusal(observed, refusal, binding=self.name, request=request)
                return None
        simple_response(observed, 404, b"no route\n")
        return None

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
