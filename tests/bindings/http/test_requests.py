"""``options.requests`` of the http server: which rule applies, each check, the messages, and
the config errors; then the server answering 400 before the exit sees the request."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from tests.support.schema_errors import binding_errors

from ssegate.bindings.http.requests import (
    MAX_CONTENT_BYTES,
    RequestPath,
    RequestProblem,
    RequestRules,
)
from ssegate.bindings.http.server import build
from ssegate.catalogs import CatalogSet
from ssegate.catalogs.local import build_inline
from ssegate.config.errors import ConfigError, NotSupportedYet
from ssegate.config.model import Binding, Config, Route
from ssegate.contract.exchange import DirectSocket, Request
from ssegate.engine.context import ExitKind
from ssegate.telemetry.metrics import Metrics

T = TypeVar("T")

NAME = "north_http_server"
WHERE = f"bindings.{NAME}.options.requests"
ORDER_SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"price": {"type": "integer", "minimum": 0}},
        "required": ["price"],
    }
)
DIGITS = {"model": "string", "pattern": "[0-9]{1,3}"}
LOWER = {"model": "string", "pattern": "[a-z ]+"}


def catalogs() -> CatalogSet:
    subjects = {"order": {"schema": ORDER_SCHEMA}}
    return CatalogSet({"local": build_inline("local", {"subjects": subjects}, "catalogs.local")})


def rules(*entries: dict[str, Any]) -> RequestRules:
    return RequestRules.compile(list(entries), WHERE, catalogs())


def request(target: str, method: str = "GET", headers: dict[str, str] | None = None) -> Request:
    return Request(method, "http", "localhost", target, headers or {})


# -- which rule applies ------------------------------------------------------------------------


def test_a_path_pattern_captures_its_params_and_ignores_the_query_and_one_trailing_slash() -> None:
    path = RequestPath("/items/{item-id}/parts/{part}", "p")
    assert path.match("/items/7/parts/a") == {"item-id": "7", "part": "a"}
    assert path.match("/items/7/parts/a/") == {"item-id": "7", "part": "a"}
    assert path.match("/items//parts/a") is None
    assert path.match("/items/7/parts") is None
    compiled = rules({"path": "/items/{id}", "params": {"path": {"id": DIGITS}}})
    assert compiled.rule_for(request("/items/42?limit=x")) is not None


def test_text_outside_the_holes_is_literal() -> None:
    path = RequestPath("/a.b/{x}", "p")
    assert path.match("/a.b/1") == {"x": "1"}
    assert path.match("/aXb/1") is None


def test_method_and_content_type_select_the_rule_and_the_first_that_applies_is_used() -> None:
    compiled = rules(
        {"path": "/orders", "method": "POST", "content-type": ["application/json"]},
        {"path": "/orders", "params": {"query": {"limit": DIGITS}}},
    )
    json_post = request("/orders", "POST", {"content-type": "Application/JSON; charset=utf-8"})
    text_post = request("/orders", "POST", {"content-type": "text/plain"})
    untyped_post = request("/orders", "POST")
    get = request("/orders", "GET")
    first, second = compiled.rules
    assert compiled.rule_for(json_post) == (first, {})
    assert compiled.rule_for(untyped_post) == (first, {})
    assert compiled.rule_for(text_post) == (second, {})
    assert compiled.rule_for(get) == (second, {})
    assert compiled.check(json_post) is None  # the first rule checks no query parameter


def test_a_request_no_rule_applies_to_is_not_checked() -> None:
    compiled = rules({"path": "/orders", "params": {"query": {"limit": DIGITS}}})
    assert compiled.rule_for(request("/other?limit=many")) is None
    assert compiled.check(request("/other?limit=many")) is None


# -- each check --------------------------------------------------------------------------------


def test_a_header_is_checked_against_its_model() -> None:
    compiled = rules({"path": "/orders", "headers": {"X-Tenant": LOWER}})
    assert compiled.check(request("/orders", headers={"x-tenant": "acme"})) is None
    problem = compiled.check(request("/orders", headers={"x-tenant": "ACME"}))
    assert problem == RequestProblem(
        400,
        "header 'x-tenant'",
        "does not match pattern '[a-z ]+'",
        f"{WHERE}[0].headers.X-Tenant",
    )


def test_a_pseudo_header_reads_the_request_line() -> None:
    authority = {"model": "string", "pattern": "localhost(:[0-9]+)?"}
    compiled = rules({"path": "/orders", "headers": {":authority": authority}})
    assert compiled.check(Request("GET", "http", "localhost:8080", "/orders", {})) is None
    problem = compiled.check(Request("GET", "http", "evil.example", "/orders", {}))
    assert problem is not None and problem.subject == "header ':authority'"


def test_a_path_parameter_is_checked_percent_decoded() -> None:
    compiled = rules({"path": "/items/{name}", "params": {"path": {"name": LOWER}}})
    assert compiled.check(request("/items/blue%20tea")) is None
    problem = compiled.check(request("/items/tea42"))
    assert problem is not None
    assert str(problem) == "path parameter 'name': does not match pattern '[a-z ]+'"
    assert problem.rule == f"{WHERE}[0].params.path.name"


def test_every_value_of_a_query_parameter_is_checked_url_decoded() -> None:
    compiled = rules({"path": "/orders", "params": {"query": {"q": LOWER, "limit": DIGITS}}})
    assert compiled.check(request("/orders?q=green+tea&limit=10&other=%ZZ")) is None
    assert compiled.check(request("/orders?q=green%20tea&limit=10")) is None
    problem = compiled.check(request("/orders?q=tea&limit=10&limit=1000"))
    assert problem is not None
    assert str(problem) == "query parameter 'limit': does not match pattern '[0-9]{1,3}'"
    assert problem.rule == f"{WHERE}[0].params.query.limit"


def test_a_named_header_or_parameter_that_is_absent_is_invalid() -> None:
    compiled = rules(
        {
            "path": "/orders",
            "headers": {"x-tenant": LOWER},
            "params": {"query": {"limit": DIGITS}},
        }
    )
    no_header = compiled.check(request("/orders?limit=1"))
    no_query = compiled.check(request("/orders", headers={"x-tenant": "acme"}))
    blank_query = compiled.check(request("/orders?limit", headers={"x-tenant": "acme"}))
    assert str(no_header) == "header 'x-tenant': is missing"
    assert str(no_query) == "query parameter 'limit': is missing"
    assert str(blank_query) == "query parameter 'limit': does not match pattern '[0-9]{1,3}'"


def test_content_is_checked_against_its_schema() -> None:
    content = {"model": "json", "catalog": {"local": [{"subject": "order"}]}}
    compiled = rules({"path": "/orders", "method": "POST", "content": content})
    post = request("/orders", "POST")
    assert compiled.check(post, b'{"price": 3}') is None
    problem = compiled.check(post, b'{"price": -1}')
    assert problem is not None
    assert problem.status == 400
    assert str(problem).startswith("content: /price: -1 is less than the minimum of 0")
    assert problem.rule == f"{WHERE}[0].content"
    not_json = compiled.check(post, b"")
    assert not_json is not None and str(not_json).startswith("content: not JSON")


def test_content_over_the_limit_is_413() -> None:
    compiled = rules({"path": "/upload", "content": {"model": "string"}})
    problem = compiled.check(request("/upload", "PUT"), b"a" * (MAX_CONTENT_BYTES + 1))
    assert problem is not None
    assert (problem.status, problem.subject) == (413, "content")


def test_checks_run_headers_then_path_then_query_then_content() -> None:
    compiled = rules(
        {
            "path": "/items/{id}",
            "headers": {"x-tenant": LOWER},
            "params": {"path": {"id": DIGITS}, "query": {"q": LOWER}},
            "content": "json",
        }
    )
    problems = [
        compiled.check(request("/items/x?q=1", "POST", {"x-tenant": "1"}), b"{"),
        compiled.check(request("/items/x?q=1", "POST", {"x-tenant": "a"}), b"{"),
        compiled.check(request("/items/1?q=1", "POST", {"x-tenant": "a"}), b"{"),
        compiled.check(request("/items/1?q=a", "POST", {"x-tenant": "a"}), b"{"),
        compiled.check(request("/items/1?q=a", "POST", {"x-tenant": "a"}), b"{}"),
    ]
    assert [p.subject if p else None for p in problems] == [
        "header 'x-tenant'",
        "path parameter 'id'",
        "query parameter 'q'",
        "content",
        None,
    ]


def test_the_message_names_what_failed_why_and_the_rule() -> None:
    compiled = rules({"path": "/orders", "params": {"query": {"limit": DIGITS}}})
    problem = compiled.check(request("/orders?limit=lots"))
    assert problem is not None
    assert problem.message == (
        "invalid request: query parameter 'limit': does not match pattern '[0-9]{1,3}'"
        f" ({WHERE}[0].params.query.limit)"
    )


# -- config errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "path", "message"),
    [
        (
            {
                "path": "/a",
                "headers": {"x-id": {"model": "json", "catalog": {"nowhere": [{"id": 1}]}}},
            },
            f"{WHERE}[0].headers.x-id.catalog.nowhere",
            "catalog 'nowhere' is not defined",
        ),
        (
            {"path": "/a", "params": {"query": {"q": {"model": "string", "pattern": "("}}}},
            f"{WHERE}[0].params.query.q.pattern",
            "not a regular expression",
        ),
        (
            {"path": "/a", "content": {"model": "json", "catalog": {"local": [{"subject": "x"}]}}},
            f"{WHERE}[0].content.catalog.local",
            "",
        ),
        (
            {"path": "/a", "headers": {"x.y": "yaml"}},
            f"{WHERE}[0].headers['x.y'].model",
            "'yaml' is not a model",
        ),
        (
            {"path": "/items/{id}", "params": {"path": {"name": "string"}}},
            f"{WHERE}[0].params.path.name",
            "'name' is not a parameter of path '/items/{id}'",
        ),
        ({"path": "/a/{b c}"}, f"{WHERE}[0].path", "a '{name}' holds letters"),
        ({"path": "/{a}/{a}"}, f"{WHERE}[0].path", "parameter 'a' appears twice"),
        ({"path": "/a", "headers": {":status": "string"}}, f"{WHERE}[0].headers.:status", ""),
    ],
)
def test_a_bad_rule_is_a_config_error_at_its_path(
    entry: dict[str, Any], path: str, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        rules({"path": "/ok"}, entry)
    assert raised.value.path == path.replace("[0]", "[1]")
    assert message in raised.value.message


def test_a_method_outside_http_s_is_refused_by_the_schema() -> None:
    options = {"requests": [{"path": "/ok"}, {"path": "/a", "method": "FETCH"}]}
    assert binding_errors("north_http_server", "http", "server", options=options) == [
        f"{WHERE}[1].method: 'FETCH' is not one of"
        " ['GET', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH', 'TRACE']"
    ]


def test_a_rule_with_responses_is_refused_as_not_supported_yet() -> None:
    with pytest.raises(NotSupportedYet) as raised:
        rules({"path": "/a", "responses": [{"status": 200, "content": "json"}]})
    assert raised.value.path == f"{WHERE}[0].responses"


# -- through the server ------------------------------------------------------------------------


class Handler:
    def __init__(self) -> None:
        self.requests: list[Request] = []

    def handle(self, request: Request, body: bytes, stream: Any) -> None:
        self.requests.append(request)
        stream.send_headers(204, [], end=True)


class RecordingStream:
    """Keeps the one response a request gets (a fake edge for the server's pure decisions)."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""
        self.closed = False
        self.buffered = 0

    def send_headers(
        self, status: int, headers: list[tuple[str, str]], *, end: bool = False
    ) -> None:
        self.status, self.headers, self.closed = status, dict(headers), end

    def send_data(self, data: bytes, *, end: bool = False) -> None:
        self.body += data
        self.closed = end

    def reset(self) -> None:
        self.closed = True

    def on_close(self, callback: Callable[[], None]) -> None:
        pass

    def on_drain(self, callback: Callable[[], None]) -> None:
        pass

    def direct_socket(self) -> DirectSocket | None:
        return None


class Context:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.metrics = Metrics()
        self.config = Config(name="test", bindings={})
        self.catalogs = catalogs()

    def exit(self, name: str, kind: ExitKind[T], where: str) -> T:
        return kind.require(self.handler, where, repr(name))


def test_the_server_answers_400_before_the_exit_and_counts_and_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler = Handler()
    ctx = Context(handler)
    options = {"requests": [{"path": "/items/{id}", "params": {"path": {"id": DIGITS}}}]}
    route = Route(exit="app", when=[{"headers": {":path": "/items/*"}}])
    server = build(Binding(NAME, "http", "server", options=options, routes=[route]), ctx)  # type: ignore[arg-type]
    valid, invalid = RecordingStream(), RecordingStream()
    with caplog.at_level(logging.WARNING, logger="ssegate"):
        server.dispatch(request("/items/12"), b"", valid)
        server.dispatch(request("/items/twelve"), b"", invalid)
    assert valid.status == 204
    assert [r.target for r in handler.requests] == ["/items/12"]
    assert invalid.status == 400
    assert invalid.headers["content-type"].startswith("text/plain")
    assert invalid.body == (
        b"invalid request: path parameter 'id': does not match pattern '[0-9]{1,3}'"
        b" (bindings.north_http_server.options.requests[0].params.path.id)\n"
    )
    assert ctx.metrics.counters[("http.requests.invalid", (("binding", NAME),))] == 1
    logged = [r.getMessage() for r in caplog.records if "http.request_invalid" in r.getMessage()]
    assert len(logged) == 1
    assert "path parameter 'id'" in logged[0] and "requests[0].params.path.id" in logged[0]


def test_a_server_without_requests_does_not_need_catalogs() -> None:
    handler = Handler()
    ctx = Context(handler)
    del ctx.catalogs
    server = build(Binding(NAME, "http", "server", exit="app"), ctx)  # type: ignore[arg-type]
    assert server.requests is None
