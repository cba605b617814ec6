"""Route patterns and the http server's route table: what matches, what is captured."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.schema_errors import binding_errors

from ssegate.bindings.http.routing import HttpRoutes, Pattern
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Route
from ssegate.contract.exchange import Request


def _request(
    target: str,
    *,
    method: str = "GET",
    scheme: str = "https",
    authority: str = "localhost:7143",
    headers: dict[str, str] | None = None,
) -> Request:
    return Request(method, scheme, authority, target, headers or {})


def _binding(routes: list[Route], exit: str | None = None) -> Binding:
    return Binding("north_http_server", "http", "server", routes=routes, exit=exit)


def _route(exit: str, *when: dict[str, Any], index: int = 0) -> Route:
    return Route(exit=exit, when=list(when), path=f"bindings.north_http_server.routes[{index}]")


# -- patterns ---------------------------------------------------------------------------------


def test_literal_pattern_matches_only_the_same_text() -> None:
    pattern = Pattern.compile("/events")
    assert pattern.match("/events") == {}
    assert pattern.match("/events/1") is None
    assert pattern.match("/event") is None


def test_dots_and_regex_characters_in_a_pattern_are_literal() -> None:
    assert Pattern.compile("/index.html").match("/indexXhtml") is None
    assert Pattern.compile("/a+b(c)?").match("/a+b(c)?") == {}
    assert Pattern.compile("/a+b").match("/aab") is None


def test_star_matches_any_run_including_slashes_and_nothing() -> None:
    pattern = Pattern.compile("/static/*")
    assert pattern.match("/static/css/app.css") == {}
    assert pattern.match("/static/") == {}
    assert pattern.match("/other/x") is None
    assert Pattern.compile("*").match("localhost:7143") == {}


def test_trailing_parameter_captures_the_rest_including_slashes() -> None:
    assert Pattern.compile("/{path}").match("/css/app.css") == {"path": "css/app.css"}
    assert Pattern.compile("/{path}").match("/index.html") == {"path": "index.html"}


def test_a_parameter_needs_at_least_one_character_so_root_does_not_match() -> None:
    assert Pattern.compile("/{path}").match("/") is None


def test_middle_parameter_stops_at_the_next_literal() -> None:
    assert Pattern.compile("/{topic}/events").match("/orders/events") == {"topic": "orders"}
    assert Pattern.compile("/{a}-{b}").match("/x-y-z") == {"a": "x", "b": "y-z"}
    assert Pattern.compile("/{topic}/events").match("/orders/other") is None


def test_pattern_lists_its_parameter_names() -> None:
    assert Pattern.compile("/{tenant}/{topic}").params == ("tenant", "topic")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("/{}", "p: '{}' in pattern '/{}' is not a parameter name"),
        ("/{1x}", "p: '{1x}' in pattern '/{1x}' is not a parameter name"),
        ("/{a}/{a}", "p: parameter 'a' appears twice in pattern '/{a}/{a}'"),
        ("/{a", "p: unbalanced brace in pattern '/{a'"),
        ("/a}", "p: unbalanced brace in pattern '/a}'"),
    ],
)
def test_malformed_patterns_are_config_errors_with_their_path(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Pattern.compile(text, "p")
    assert str(caught.value) == message


# -- routes -----------------------------------------------------------------------------------

SEED_003_ROUTES = [
    _route(
        "north_sse_server",
        {"headers": {":scheme": "http", ":authority": "localhost:7114", ":path": "/events"}},
        {"headers": {":scheme": "https", ":authority": "localhost:7143", ":path": "/events"}},
    ),
    _route(
        "east_http_filesystem_mapping",
        {"headers": {":scheme": "http", ":authority": "localhost:7114"}},
        {"headers": {":scheme": "https", ":authority": "localhost:7143"}},
        index=1,
    ),
]


def test_seed_003_sends_events_to_sse_and_everything_else_to_files() -> None:
    routes = HttpRoutes(_binding(SEED_003_ROUTES))
    events = routes.match(_request("/events", scheme="http", authority="localhost:7114"))
    assert events is not None and events.route.exit == "north_sse_server"
    page = routes.match(_request("/index.html"))
    assert page is not None and page.route.exit == "east_http_filesystem_mapping"


def test_headers_inside_one_entry_must_all_match() -> None:
    routes = HttpRoutes(_binding(SEED_003_ROUTES))
    assert routes.match(_request("/events", scheme="http", authority="localhost:7143")) is None


def test_path_pattern_matches_when_a_query_string_follows() -> None:
    routes = HttpRoutes(_binding(SEED_003_ROUTES))
    found = routes.match(_request("/events?lastEventId=AQQABAIC"))
    assert found is not None and found.exit == "north_sse_server"


def test_path_parameters_are_captured_without_the_query_string() -> None:
    routes = HttpRoutes(_binding([_route("sse", {"headers": {":path": "/{topic}"}})]))
    found = routes.match(_request("/orders?lastEventId=1"))
    assert found is not None
    assert found.exit == "sse"
    assert found.params == {"topic": "orders"}


def test_header_names_compare_case_insensitively_and_values_exactly() -> None:
    routes = HttpRoutes(_binding([_route("api", {"headers": {"X-Tenant": "acme-*"}})]))
    assert routes.match(_request("/", headers={"x-tenant": "acme-eu"})) is not None
    assert routes.match(_request("/", headers={"x-tenant": "ACME-eu"})) is None


def test_a_header_the_request_lacks_does_not_match() -> None:
    routes = HttpRoutes(_binding([_route("api", {"headers": {"x-tenant": "*"}})]))
    assert routes.match(_request("/")) is None


def test_method_pseudo_header_is_matched() -> None:
    routes = HttpRoutes(
        _binding([_route("sse", {"headers": {":method": "GET", ":path": "/events"}})])
    )
    assert routes.match(_request("/events")) is not None
    assert routes.match(_request("/events", method="POST")) is None


def test_a_route_without_when_matches_every_request() -> None:
    routes = HttpRoutes(_binding([Route(exit="files")]))
    found = routes.match(_request("/anything", method="DELETE", scheme="http"))
    assert found is not None and found.params == {}


def test_candidates_yields_every_matching_route_in_order() -> None:
    routes = HttpRoutes(
        _binding(
            [
                Route(
                    exit="guarded_sse",
                    when=[{"headers": {":path": "/events"}}],
                    guarded={"authn_jwt": ["read"]},
                ),
                Route(exit="public", when=[{"headers": {":path": "/*"}}]),
                Route(exit="other", when=[{"headers": {":path": "/nope"}}]),
            ]
        )
    )
    assert [m.route.exit for m in routes.candidates(_request("/events"))] == [
        "guarded_sse",
        "public",
    ]
    first = routes.match(_request("/events"))
    assert first is not None and first.guarded == {"authn_jwt": ["read"]}


def test_the_plain_exit_is_the_route_of_last_resort() -> None:
    routes = HttpRoutes(_binding([_route("sse", {"headers": {":path": "/events"}})], exit="files"))
    assert [r.exit for r in routes.routes] == ["sse", "files"]
    found = routes.match(_request("/app.js"))
    assert found is not None and found.exit == "files"


def test_unknown_pseudo_header_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError) as caught:
        HttpRoutes(_binding([_route("x", {"headers": {":host": "a"}})]))
    assert caught.value.path == "bindings.north_http_server.routes[0].when[0].headers.:host"


def test_a_bad_pattern_names_the_route_entry_and_header() -> None:
    routes = [{"exit": "x", "when": [{"port": 1}]}]
    assert binding_errors("north_http_server", "http", "server", routes=routes) == [
        "bindings.north_http_server.routes[0].when[0].port: 'port' is not allowed here"
        " (allowed: headers)"
    ]
    with pytest.raises(ConfigError) as caught:
        HttpRoutes(_binding([_route("x", {"headers": {":path": "/{a"}})]))
    assert str(caught.value) == (
        "bindings.north_http_server.routes[0].when[0].headers.:path: "
        "unbalanced brace in pattern '/{a'"
    )
