"""``x-ssegate-quotas`` in front of an ``sse`` server: a stream over a quota is answered 429.

:func:`build` is the runtime's factory for the ``sse`` server binding: it builds the server
(:func:`ssegate.bindings.sse.server.build`) and, when the binding's options have
``x-ssegate-quotas`` (:mod:`ssegate.quotas` says why there), puts a :class:`QuotaGate` in
front of it. The gate is an :class:`~ssegate.contract.exchange.HttpHandler` like the server.

Per ``GET`` it resolves the client address (:mod:`ssegate.quotas.address`), takes the
identities the http server's guards established (``request.identities``), and asks the
binding's :class:`~ssegate.quotas.policy.QuotaBook`. Admitted, the stream holds its slots
until it closes for any reason (the client goes, the server ends or drains it, its guard's
expiry ends it, or the server answers it at once: 401, 404), when they are released exactly
once; then the sse server handles the request as it would without quotas. Refused, it is
answered with the refusal's status (429; 503 when the table has no room), ``Retry-After`` and
the reason naming the quota in the body, counted in ``ssegate.quota.refused{quota}`` and logged
as ``sse.quota_refused`` at most once per quota every ten seconds (with how many were left out:
:class:`~ssegate.telemetry.quiet_log.QuietLog`). An HTTP/2 stream is answered on its own; the
connection and its other streams go on. The quota is asked before the routes: a client over
its quota gets 429 whatever path it asks for. Other methods go straight to the server (405).
An ``X-Forwarded-For`` from a trusted proxy that does not parse counts the peer, and is counted
in ``ssegate.quota.forwarded_malformed`` and logged the same quiet way.
"""

from __future__ import annotations

from ssegate.bindings.sse import server as sse_server
from ssegate.config.model import Binding
from ssegate.contract.exchange import HttpHandler, Request, ResponseStream, simple_response
from ssegate.contract.identity import Identity
from ssegate.engine.context import BuildContext
from ssegate.quotas.address import client_address
from ssegate.quotas.policy import QuotaBook, parse_policy
from ssegate.quotas.shared import OPTION, attach
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.quiet_log import QuietLog


class QuotaGate:
    """An sse server behind its binding's quotas (an :class:`HttpHandler`)."""

    __slots__ = ("book", "metrics", "name", "quiet", "server")

    def __init__(self, server: HttpHandler, name: str, book: QuotaBook, metrics: Metrics) -> None:
        self.server = server
        self.name = name
        self.book = book
        self.metrics = metrics
        self.quiet = QuietLog()

    def handle(self, request: Request, body: bytes, stream: ResponseStream) -> None:
        if request.method != "GET":
            self.server.handle(request, body, stream)
            return
        address = client_address(
            request.remote,
            request.headers.get("x-forwarded-for"),
            self.book.policy.trusted_proxies,
        )
        if address.malformed:
            self.metrics.inc("ssegate.quota.forwarded_malformed", self.name)
            self.quiet.warning(
                "sse.forwarded_for_malformed",
                "forwarded",
                binding=self.name,
                remote=request.remote,
                reason="X-Forwarded-For from a trusted proxy does not parse: the peer counts",
            )
        identities = [
            f"{guard} {established.identity}"
            for guard, established in request.identities.items()
            if isinstance(established, Identity)
        ]
        held, refusal = self.book.admit(address.address, identities)
        if refusal is not None:
            self.metrics.inc("ssegate.quota.refused", self.name, quota=refusal.quota)
            self.metrics.inc("stream.errors.sent", self.name)
            self.quiet.warning(
                "sse.quota_refused",
                refusal.quota,
                binding=self.name,
                quota=refusal.quota,
                status=refusal.status,
                key=refusal.key,
                remote=request.remote,
                reason=refusal.reason,
            )
            simple_response(
                stream,
                refusal.status,
                f"{refusal.reason}\n".encode(),
                [("retry-after", str(refusal.retry_after))],
            )
            return
        if held:
            book = self.book

            def release() -> None:
                nonlocal held
                keys, held = held, []
                book.release(keys)

            stream.on_close(release)
        self.server.handle(request, body, stream)


def build(binding: Binding, ctx: BuildContext) -> HttpHandler:
    """The ``sse`` server, behind a :class:`QuotaGate` when its options have quotas."""
    quotas = binding.options.get(OPTION)
    policy = None if quotas is None else parse_policy(quotas, f"{binding.path}.options.{OPTION}")
    server = sse_server.build(binding, ctx)
    if policy is None:
        return server
    return QuotaGate(server, binding.name, QuotaBook(binding.name, policy, attach()), ctx.metrics)
