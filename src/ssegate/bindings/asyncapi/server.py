"""The ``asyncapi`` server as an http route's exit: it answers with the AsyncAPI document.

An http route that exits to an ``asyncapi`` server binding (written by hand, or generated from
``options.http.document`` on an expanded one) answers ``GET`` and ``HEAD`` with the AsyncAPI
3.0.0 document of the running config's SSE endpoints (:mod:`ssegate.asyncapi.export`), as
``application/json``. The document is written once, when the binding is built. Any other
method is answered ``405`` with ``allow: GET, HEAD`` (event ``asyncapi.method_refused``, count
``ssegate.asyncapi.refused``).

Its listeners, routes and streams are the bindings the expansion generated
(:mod:`ssegate.asyncapi.expand`); they run without it.
"""

from __future__ import annotations

from ssegate.asyncapi.export import export_json
from ssegate.config.model import Binding
from ssegate.contract.exchange import Request, ResponseStream, simple_response
from ssegate.engine.context import BuildContext
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

CONTENT_TYPE = "application/json"


class AsyncApiDocumentHandler:
    """Serves one prepared document body."""

    def __init__(self, name: str, body: bytes, metrics: Metrics) -> None:
        self.name = name
        self.body = body
        self.metrics = metrics

    def handle(self, request: Request, body: bytes, stream: ResponseStream) -> None:
        if request.method not in ("GET", "HEAD"):
            log.event("asyncapi.method_refused", binding=self.name, method=request.method)
            self.metrics.inc("ssegate.asyncapi.refused", self.name)
            simple_response(stream, 405, b"method not allowed\n", [("allow", "GET, HEAD")])
            return
        headers = [
            ("content-type", CONTENT_TYPE),
            ("content-length", str(len(self.body))),
            ("cache-control", "no-cache"),
        ]
        if request.method == "HEAD":
            stream.send_headers(200, headers, end=True)
            return
        stream.send_headers(200, headers)
        stream.send_data(self.body, end=True)


def build(binding: Binding, ctx: BuildContext) -> AsyncApiDocumentHandler:
    return AsyncApiDocumentHandler(binding.name, export_json(ctx.config).encode(), ctx.metrics)
