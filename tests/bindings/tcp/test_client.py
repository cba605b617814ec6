"""The tcp client binding: options, and real connections on 127.0.0.1."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ssegate.bindings.tcp.client import ConnectError, TcpClient, build, require_address
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.runtime import free_port
from ssegate.telemetry.metrics import Metrics


class Context:
    metrics = Metrics()


def make(options: dict[str, Any]) -> TcpClient:
    return build(Binding("south_tcp_client", "tcp", "client", options), Context())  # type: ignore[arg-type]


def test_host_and_port_come_from_the_options() -> None:
    client = make({"host": "sse-server", "port": 8001})
    assert (client.host, client.port) == ("sse-server", 8001)
    assert make({"host": "h", "port": "8001"}).port == 8001


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ({"port": 1}, "bindings.south_tcp_client.options.host"),
        ({"host": "h"}, "bindings.south_tcp_client.options.port"),
        ({"host": "h", "port": "1-2"}, "bindings.south_tcp_client.options.port"),
    ],
)
def test_missing_or_ambiguous_address_is_a_config_error(options: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make(options)
    assert caught.value.path == path


def test_connect_reaches_a_listening_server() -> None:
    async def scenario() -> None:
        received: list[bytes] = []

        class Echo(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                received.append(data)

        server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport, _ = await make({"host": "127.0.0.1", "port": port}).connect(asyncio.Protocol)
        transport.write(b"ping")
        for _ in range(100):
            if received:
                break
            await asyncio.sleep(0.01)
        assert received == [b"ping"]
        transport.close()
        server.close()

    asyncio.run(scenario())


def test_connect_failure_is_a_connect_error_naming_the_address() -> None:
    port = free_port()
    client = make({"host": "127.0.0.1", "port": port})

    async def scenario() -> None:
        with pytest.raises(ConnectError, match=f"cannot connect to 127.0.0.1:{port}"):
            await client.connect(asyncio.Protocol)

    asyncio.run(scenario())
    assert client.metrics.counter("stream.errors.received", "south_tcp_client") >= 1


def test_a_tcp_client_without_an_address_is_refused_where_an_http_client_needs_one() -> None:
    with pytest.raises(ConfigError) as caught:
        require_address(TcpClient("south_tcp_client", "", 0))
    assert caught.value.path == "bindings.south_tcp_client.options.host"
