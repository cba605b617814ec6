"""Exits of the wrong kind, caught when the runtime builds the graph.

A loaded config is already checked against the table of which binding may exit to which
(:mod:`ssegate.config.resolve`); these configs are put together by hand to skip that table, so
what is shown is the runtime's own check: every factory names the kind of exit it needs, and an
exit of another kind is a config error at the path of that ``exit``, before any connection.
"""

from __future__ import annotations

import pytest

from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Config, Route
from ssegate.engine.runtime import Runtime

SOUTH = [
    Binding("south_sse_client", "sse", "client", exit="south_http_client"),
    Binding("south_http_client", "http", "client", exit="south_tcp_client"),
    Binding("south_tcp_client", "tcp", "client", {"host": "127.0.0.1", "port": 7114}),
]


def runtime(*bindings: Binding) -> Runtime:
    return Runtime(Config("exit-kinds", {b.name: b for b in [*bindings, *SOUTH]}))


def test_an_sse_server_exiting_to_an_http_client_is_an_error_at_its_exit() -> None:
    built = runtime(Binding("north_sse_server", "sse", "server", exit="south_http_client"))
    with pytest.raises(ConfigError) as raised:
        built.build_binding("north_sse_server")
    assert raised.value.path == "bindings.north_sse_server.exit"
    assert raised.value.message == (
        "'south_http_client' (http client) is not an sse source"
        " (an sse client or an sse-kafka proxy)"
    )


def test_a_route_exit_of_the_wrong_kind_is_named_by_its_route() -> None:
    path = "bindings.north_sse_kafka_mapping.routes[0]"
    route = Route("south_sse_client", when=[{"path": "/{topic}"}], path=path)
    built = runtime(Binding("north_sse_kafka_mapping", "sse-kafka", "proxy", routes=[route]))
    with pytest.raises(ConfigError) as raised:
        built.build_binding("north_sse_kafka_mapping")
    assert raised.value.path == f"{path}.exit"
    assert raised.value.message == "'south_sse_client' (sse client) is not a kafka cache_client"


def test_an_exit_of_the_right_kind_builds() -> None:
    built = runtime(Binding("north_sse_server", "sse", "server", exit="south_sse_client"))
    assert built.build_binding("north_sse_server") is built.build_binding("north_sse_server")
