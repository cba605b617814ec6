"""``options.overrides``: what the exit sees, and the config errors that name their path."""

from __future__ import annotations

import pytest

from ssegate.bindings.http.overrides import HeaderOverrides
from ssegate.config.errors import ConfigError
from ssegate.engine.exchange import Request

WHERE = "bindings.north_http_server.options.overrides"


def test_pseudo_headers_set_the_request_line_and_names_set_headers_on_a_copy() -> None:
    overrides = HeaderOverrides.parse(
        {
            ":authority": "otherhost:8181",
            ":path": "/api/v2?x=1",
            ":method": "get",
            "X-Tenant": "acme",
        },
        WHERE,
    )
    assert overrides is not None
    sent = Request("GET", "http", "localhost:8080", "/v1", {"x-tenant": "evil", "accept": "*/*"})
    seen = overrides.apply(sent)
    assert (seen.method, seen.authority, seen.target, seen.path) == (
        "GET",
        "otherhost:8181",
        "/api/v2?x=1",
        "/api/v2",
    )
    assert seen.headers == {"x-tenant": "acme", "accept": "*/*"}
    assert (sent.authority, sent.target, sent.headers["x-tenant"]) == (
        "localhost:8080",
        "/v1",
        "evil",
    )


def test_no_overrides_is_none() -> None:
    assert HeaderOverrides.parse(None, WHERE) is None
    assert HeaderOverrides.parse({}, WHERE) is None


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        (
            {":status": "200"},
            f"{WHERE}.:status: use one of :path, :method, :scheme, :authority or a header name",
        ),
        ({":path": "api"}, f"{WHERE}.:path: 'api' does not start with '/'"),
        ({":method": "GE T"}, f"{WHERE}.:method: 'GE T' is not a method"),
        ({"x tenant": "a"}, f"{WHERE}.x tenant: 'x tenant' is not a header name"),
        ({"x-tenant": "a\r\nx-injected: 1"}, f"{WHERE}.x-tenant: must be one line of text"),
    ],
)
def test_what_cannot_be_sent_is_a_config_error_naming_its_path(
    overrides: dict[str, str], error: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        HeaderOverrides.parse(overrides, WHERE)
    assert str(raised.value) == error
