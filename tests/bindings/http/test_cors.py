"""The ``access-control`` option: preflights, refusals and headers on normal responses."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.schema_errors import binding_errors

from ssegate.bindings.http.cors import AccessControl, normalize_origin
from ssegate.config.errors import ConfigError
from ssegate.contract.exchange import Request

PATH = "bindings.north_http_server.options.access-control"
OTHER = "https://example.net:9090"

EXPLICIT = {
    "policy": "cross-origin",
    "allow": {
        "origins": ["https://example.net:9090"],
        "methods": ["GET", "DELETE"],
        "headers": ["x-api-key"],
    },
}
CREDENTIALS = {"policy": "cross-origin", "allow": {"credentials": True}}


def _access(options: dict[str, Any] | None) -> AccessControl:
    return AccessControl.from_options(options, PATH)


def _request(method: str = "GET", **headers: str) -> Request:
    named = {name.replace("_", "-"): value for name, value in headers.items()}
    return Request(method, "https", "example.com:9090", "/", named)


def _preflight(origin: str = OTHER, method: str | None = "GET", **headers: str) -> Request:
    if method is not None:
        headers["access_control_request_method"] = method
    return _request("OPTIONS", origin=origin, **headers)


# -- preflights -------------------------------------------------------------------------------


def test_wildcard_policy_answers_preflight_with_stars() -> None:
    access = _access({"policy": "cross-origin"})
    answer = access.preflight(_preflight(method="DELETE"))
    assert answer == (
        204,
        [("access-control-allow-origin", "*"), ("access-control-allow-methods", "*")],
    )


def test_wildcard_policy_answers_requested_headers_with_a_star() -> None:
    answer = _access({"policy": "cross-origin"}).preflight(
        _preflight(access_control_request_headers="X-Api-Key")
    )
    assert answer is not None
    assert ("access-control-allow-headers", "*") in answer[1]


def test_wildcard_allow_headers_names_authorization_which_a_star_never_covers() -> None:
    answer = _access({"policy": "cross-origin"}).preflight(
        _preflight(access_control_request_headers="authorization")
    )
    assert answer is not None
    assert ("access-control-allow-headers", "*, authorization") in answer[1]


def test_explicit_lists_echo_origin_method_and_headers_with_vary() -> None:
    answer = _access(EXPLICIT).preflight(
        _preflight(method="DELETE", access_control_request_headers="X-Api-Key")
    )
    assert answer == (
        204,
        [
            ("access-control-allow-origin", OTHER),
            ("access-control-allow-methods", "DELETE"),
            ("access-control-allow-headers", "X-Api-Key"),
            ("vary", "origin"),
        ],
    )


def test_last_event_id_is_allowed_whenever_headers_are_listed() -> None:
    answer = _access(EXPLICIT).preflight(
        _preflight(access_control_request_headers="Last-Event-ID, x-api-key")
    )
    assert answer is not None and answer[0] == 204
    assert ("access-control-allow-headers", "Last-Event-ID, x-api-key") in answer[1]


def test_credentials_make_a_preflight_explicit_without_allow_credentials() -> None:
    answer = _access(CREDENTIALS).preflight(
        _preflight(access_control_request_headers="authorization")
    )
    assert answer == (
        204,
        [
            ("access-control-allow-origin", OTHER),
            ("access-control-allow-methods", "GET"),
            ("access-control-allow-headers", "authorization"),
            ("vary", "origin"),
        ],
    )


def test_max_age_is_sent_on_preflights() -> None:
    answer = _access({"policy": "cross-origin", "max-age": 10}).preflight(_preflight())
    assert answer is not None
    assert ("access-control-max-age", "10") in answer[1]


@pytest.mark.parametrize(
    "request_",
    [
        _preflight(origin="https://example.org:9090"),
        _preflight(method="PUT"),
        _preflight(access_control_request_headers="Not-Allowed"),
        _preflight(access_control_request_headers="x-api-key, Not-Allowed"),
    ],
    ids=["origin", "method", "header", "one-of-several-headers"],
)
def test_disallowed_preflight_is_403(request_: Request) -> None:
    assert _access(EXPLICIT).preflight(request_) == (403, [])


def test_listed_origin_matches_with_or_without_its_default_port() -> None:
    access = _access({"policy": "cross-origin", "allow": {"origins": ["https://app.example"]}})
    for origin in ("https://app.example", "https://app.example:443"):
        answer = access.preflight(_preflight(origin=origin))
        assert answer is not None and answer[0] == 204
        assert ("access-control-allow-origin", origin) in answer[1]
    assert access.preflight(_preflight(origin="http://app.example")) == (403, [])


def test_same_origin_policy_refuses_cross_origin_preflights() -> None:
    assert _access(None).preflight(_preflight()) == (403, [])
    assert _access({"policy": "same-origin"}).preflight(_preflight()) == (403, [])


def test_a_same_origin_preflight_is_answered_without_cors_headers() -> None:
    answer = _access(None).preflight(_preflight(origin="https://example.com:9090"))
    assert answer == (204, [])


def test_requests_that_are_not_preflights_give_none() -> None:
    access = _access({"policy": "cross-origin"})
    assert access.preflight(_request("GET", origin=OTHER)) is None
    assert access.preflight(_request("OPTIONS", origin=OTHER)) is None
    assert access.preflight(_request("OPTIONS", access_control_request_method="GET")) is None


def test_a_preflight_asking_only_for_headers_is_still_a_preflight() -> None:
    answer = _access({"policy": "cross-origin"}).preflight(
        _preflight(method=None, access_control_request_headers="x-api-key")
    )
    assert answer == (
        204,
        [("access-control-allow-origin", "*"), ("access-control-allow-headers", "*")],
    )


# -- normal requests --------------------------------------------------------------------------


def test_requests_without_origin_or_from_the_same_origin_are_always_allowed() -> None:
    for access in (_access(None), _access(EXPLICIT)):
        assert access.allows_request(_request())
        assert access.allows_request(_request(origin="https://example.com:9090"))


def test_same_origin_matches_implicit_default_ports() -> None:
    request = Request("POST", "http", "example.com:80", "/", {"origin": "http://example.com"})
    assert _access(None).allows_request(request)
    assert _access(None).response_headers(request) == []


def test_other_origins_are_refused_under_same_origin_and_unlisted_under_cross_origin() -> None:
    assert not _access(None).allows_request(_request(origin=OTHER))
    assert not _access(EXPLICIT).allows_request(_request(origin="https://example.org:9090"))
    assert _access(EXPLICIT).allows_request(_request(origin=OTHER))
    assert _access({"policy": "cross-origin"}).allows_request(_request(origin="null"))


def test_wildcard_response_gets_a_star_and_no_vary() -> None:
    headers = _access({"policy": "cross-origin"}).response_headers(_request(origin=OTHER))
    assert headers == [("access-control-allow-origin", "*")]


def test_explicit_origin_is_echoed_with_vary_origin() -> None:
    headers = _access(EXPLICIT).response_headers(_request(origin=OTHER))
    assert headers == [("access-control-allow-origin", OTHER), ("vary", "origin")]


def test_credentials_echo_the_origin_and_allow_credentials() -> None:
    headers = _access(CREDENTIALS).response_headers(_request(origin=OTHER))
    assert headers == [
        ("access-control-allow-origin", OTHER),
        ("access-control-allow-credentials", "true"),
        ("vary", "origin"),
    ]


def test_a_request_without_origin_gets_a_wildcard_under_cross_origin_as_in_zilla() -> None:
    wildcard = [("access-control-allow-origin", "*")]
    assert _access({"policy": "cross-origin"}).response_headers(_request()) == wildcard
    listed = _access({"policy": "cross-origin", "allow": {"origins": [OTHER]}})
    assert listed.response_headers(_request()) == wildcard
    assert _access(None).response_headers(_request()) == []


def test_no_cors_headers_for_same_origin_or_under_the_same_origin_policy() -> None:
    assert (
        _access({"policy": "cross-origin"}).response_headers(
            _request(origin="https://example.com:9090")
        )
        == []
    )
    assert _access(None).response_headers(_request(origin=OTHER)) == []


RESPONSE = [("content-type", "text/plain"), ("content-length", "12"), ("x-custom-header", "v")]


def test_non_safelisted_response_headers_are_exposed_with_a_star() -> None:
    headers = _access({"policy": "cross-origin"}).response_headers(_request(origin=OTHER), RESPONSE)
    assert ("access-control-expose-headers", "*") in headers
    safelisted_only = _access({"policy": "cross-origin"}).response_headers(
        _request(origin=OTHER), RESPONSE[:2]
    )
    assert all(name != "access-control-expose-headers" for name, _ in safelisted_only)


def test_expose_list_names_the_listed_headers_present_in_the_response() -> None:
    access = _access({"policy": "cross-origin", "expose": {"headers": ["x-custom-header"]}})
    headers = access.response_headers(_request(origin=OTHER), [*RESPONSE, ("x-secret", "s")])
    assert ("access-control-expose-headers", "x-custom-header") in headers


def test_credentials_expose_each_header_by_name_because_a_star_is_literal_then() -> None:
    headers = _access(CREDENTIALS).response_headers(_request(origin=OTHER), RESPONSE)
    assert ("access-control-expose-headers", "x-custom-header") in headers


# -- options ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "path", "message"),
    [
        (
            {"allow": {"origins": ["https://ok.example", "example.net"]}},
            f"{PATH}.allow.origins[1]",
            "'example.net' is not an origin",
        ),
        ({"allow": {"methods": ["GET", ""]}}, f"{PATH}.allow.methods", "non-empty strings"),
        ({"max-age": 10.0}, f"{PATH}.max-age", "whole number of seconds"),
    ],
)
def test_bad_options_are_config_errors_with_their_path(
    options: dict[str, Any], path: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _access(options)
    assert caught.value.path == path
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"policy": "any"}, "policy: 'any' is not one of ['same-origin', 'cross-origin']"),
        ({"allow": {"origins": "x"}}, "allow.origins: expected a list, got 'x'"),
        ({"allow": {"credentials": "yes"}}, "allow.credentials: expected true or false, got 'yes'"),
        ({"max-age": -1}, "max-age: -1 is less than the minimum of 0"),
        ({"max-age": "10"}, "max-age: expected a whole number, got '10'"),
        ({"expose": {"headers": [1]}}, "expose.headers[0]: expected a string, got 1"),
        (
            {"allowed": {}},
            "allowed: 'allowed' is not allowed here; did you mean 'allow'?"
            " (allowed: policy, allow, max-age, expose)",
        ),
    ],
)
def test_options_of_another_shape_are_refused_by_the_schema_at_their_path(
    options: dict[str, Any], error: str
) -> None:
    errors = binding_errors(
        "north_http_server", "http", "server", options={"access-control": options}
    )
    assert errors == [f"{PATH}.{error}"]


def test_default_is_same_origin() -> None:
    assert _access(None).policy == "same-origin"
    assert _access({}).policy == "same-origin"


def test_origins_normalize_to_scheme_host_and_explicit_port() -> None:
    assert normalize_origin("https://App.example") == "https://app.example:443"
    assert normalize_origin("http://[::1]:8080") == "http://[::1]:8080"
    assert normalize_origin("null") is None
    assert normalize_origin("https://a.example/path") is None
    assert normalize_origin("ftp://a.example") is None
    assert normalize_origin("https://a.example:99999") is None
