"""``options.overrides``: what the exit sees, and the config errors that name their path."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssegate.bindings.http.overrides import HeaderOverrides
from ssegate.cli import EXIT_CONFIG, main
from ssegate.config.errors import ConfigError
from ssegate.contract.exchange import Request

WHERE = "bindings.north_http_server.options.overrides"
NOT_A_TARGET = "holds a character it may not"
NOT_A_VALUE = "holds a character a field value may not (CR, LF, NUL, VT or FF)"


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
        ({":method": "GE T"}, f"{WHERE}.:method: cannot be sent: method 'GE T' is not a token"),
        (
            {"x tenant": "a"},
            f"{WHERE}.x tenant: cannot be sent: header name 'x tenant' is not a token",
        ),
        (
            {"x-tenant": "a\r\nx-injected: 1"},
            f"{WHERE}.x-tenant: cannot be sent: header 'x-tenant' value 'a\\r\\nx-injected: 1'"
            f" {NOT_A_VALUE}",
        ),
        ({":path": "/a b"}, f"{WHERE}.:path: cannot be sent: request target '/a b' {NOT_A_TARGET}"),
        (
            {":path": "/\x01"},
            f"{WHERE}.:path: cannot be sent: request target '/\\x01' {NOT_A_TARGET}",
        ),
        (
            {":path": "/café"},
            f"{WHERE}.:path: cannot be sent: request target '/café' {NOT_A_TARGET}",
        ),
        (
            {":path": "/日本"},
            f"{WHERE}.:path: cannot be sent: request target '/日本' is not the bytes of a request",
        ),
        (
            {":authority": "host:80\x00"},
            f"{WHERE}.:authority: cannot be sent: header 'host' value 'host:80\\x00' {NOT_A_VALUE}",
        ),
        (
            {":authority": "ホスト"},
            f"{WHERE}.:authority: cannot be sent: authority 'ホスト' is not the bytes of a request",
        ),
        (
            {":scheme": "ht tp"},
            f"{WHERE}.:scheme: cannot be sent: scheme 'ht tp' is not a URI scheme",
        ),
        (
            {"x-tenant": "a\x0bb"},
            f"{WHERE}.x-tenant: cannot be sent: header 'x-tenant' value 'a\\x0bb' {NOT_A_VALUE}",
        ),
    ],
)
def test_what_cannot_be_sent_is_a_config_error_naming_its_path(
    overrides: dict[str, str], error: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        HeaderOverrides.parse(overrides, WHERE)
    assert str(raised.value) == error


def test_text_beyond_latin_1_in_a_header_value_is_sent_as_utf_8() -> None:
    overrides = HeaderOverrides.parse({"x-city": "Zürich 東京"}, WHERE)
    assert overrides is not None and overrides.headers == {"x-city": "Zürich 東京"}


CONFIG = """\
name: overrides
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {host: 127.0.0.1, port: 8080}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    options:
      overrides:
        ":path": "/events?who=a b"
    routes:
      - exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    exit: south_sse_client
  south_sse_client:
    type: sse
    kind: client
    exit: south_http_client
  south_http_client:
    type: http
    kind: client
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
    options: {host: 127.0.0.1, port: 7001}
"""


def test_validate_refuses_an_override_the_writer_cannot_send_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "zilla.yaml"
    config.write_text(CONFIG)
    assert main(["validate", "-c", str(config)]) == EXIT_CONFIG
    assert capsys.readouterr().err == (
        f"ssegate: {WHERE}.:path: cannot be sent: request target '/events?who=a b' {NOT_A_TARGET}\n"
    )
