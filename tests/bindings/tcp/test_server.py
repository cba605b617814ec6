"""The tcp server binding: port forms and which exit each port leads to."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.schema_errors import binding_errors

from ssegate.bindings.tcp.server import build, parse_ports
from ssegate.config.errors import ConfigError, NotSupportedYet
from ssegate.config.model import Binding, Route


def test_port_as_int_string_range_and_list() -> None:
    assert parse_ports(7143, "p") == [7143]
    assert parse_ports("7143", "p") == [7143]
    assert parse_ports("8000-8002", "p") == [8000, 8001, 8002]
    assert parse_ports([7114, "9000-9001"], "p") == [7114, 9000, 9001]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("70000", "p: port 70000 is outside 0-65535"),
        ("80-70000", "p: port 70000 is outside 0-65535"),
        ("9-1", "p: port range '9-1' ends before it starts"),
    ],
)
def test_ports_the_schema_cannot_bound_are_refused_with_their_path(
    value: Any, message: str
) -> None:
    # Other shapes (a word, true, a number over 65535) are the schema's: test_validate.py.
    with pytest.raises(ConfigError) as caught:
        parse_ports(value, "p")
    assert str(caught.value) == message


def test_a_bad_port_inside_a_list_names_its_index() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_ports([80, "70000"], "bindings.t.options.port")
    assert caught.value.path == "bindings.t.options.port[1]"


def _server(options: dict[str, Any], routes: list[Route], exit: str | None = None) -> Binding:
    return Binding("north_tcp_server", "tcp", "server", options=options, routes=routes, exit=exit)


def test_routes_pick_the_exit_by_port_and_exit_takes_the_rest() -> None:
    binding = _server(
        {"host": "127.0.0.1", "port": [7143, 7114]},
        [Route(exit="tls", when=[{"port": 7143}], path="bindings.north_tcp_server.routes[0]")],
        exit="http",
    )
    server = build(binding, None)  # type: ignore[arg-type]
    assert [(lst.port, lst.exit) for lst in server.listeners] == [(7143, "tls"), (7114, "http")]
    assert all(lst.host == "127.0.0.1" for lst in server.listeners)


def test_a_port_with_no_route_and_no_exit_is_an_error() -> None:
    binding = _server(
        {"port": [7143, 7114]},
        [Route(exit="tls", when=[{"port": 7143}], path="bindings.north_tcp_server.routes[0]")],
    )
    with pytest.raises(ConfigError) as caught:
        build(binding, None)  # type: ignore[arg-type]
    assert str(caught.value) == (
        "bindings.north_tcp_server.routes: no route and no exit for port 7114"
    )


def test_routes_on_cidr_are_refused_as_not_supported_yet() -> None:
    binding = _server(
        {"port": 7143},
        [
            Route(
                exit="tls",
                when=[{"cidr": "127.0.0.0/8"}],
                path="bindings.north_tcp_server.routes[0]",
            )
        ],
    )
    with pytest.raises(NotSupportedYet) as caught:
        build(binding, None)  # type: ignore[arg-type]
    assert caught.value.path == "bindings.north_tcp_server.routes[0].when[0].cidr"


def test_a_host_longer_than_any_dns_name_is_refused_by_validate_naming_its_path() -> None:
    for kind in ("server", "client"):
        options = {"host": "h" * 1_000_000, "port": 7114}
        errors = binding_errors("t", "tcp", kind, options=options, exit="x")
        assert len(errors) == 1 and errors[0].startswith("bindings.t.options.host"), errors
    assert (
        binding_errors("t", "tcp", "server", options={"host": "h" * 253, "port": 7114}, exit="x")
        == []
    )
