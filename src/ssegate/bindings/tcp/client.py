"""The ``tcp`` client binding: where outgoing connections go.

``options{host, port}`` name the upstream; :meth:`TcpClient.connect` opens one connection with
an :class:`asyncio.Protocol` of the caller's choosing (TLS is layered on by passing ``ssl``,
which the ``tls`` client binding supplies). Failures are logged, counted and re-raised as
:class:`ConnectError` with a message that names the address.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ssegate.bindings.tcp.server import parse_ports
from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding
from ssegate.engine.context import BuildContext
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

DEFAULT_CONNECT_TIMEOUT = 10.0

P = TypeVar("P", bound=asyncio.BaseProtocol)


class ConnectError(ConnectionError):
    """The upstream could not be reached."""


@dataclass(slots=True)
class TcpClient:
    name: str
    host: str
    port: int
    """``host`` empty and ``port`` 0 when the config names none: a kafka client's tcp exit
    takes its addresses from ``servers``; an http client refuses such an exit at build time."""
    metrics: Metrics = field(default_factory=Metrics)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    async def connect(
        self,
        protocol_factory: Callable[[], P],
        *,
        ssl: ssl_module.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> tuple[asyncio.Transport, P]:
        """Connect to ``host:port``; raises :class:`ConnectError`."""
        loop = asyncio.get_running_loop()
        extra: dict[str, Any] = {}
        if ssl is not None:
            extra["server_hostname"] = server_hostname or self.host
        try:
            transport, protocol = await asyncio.wait_for(
                loop.create_connection(protocol_factory, self.host, self.port, ssl=ssl, **extra),
                self.connect_timeout,
            )
        except (OSError, TimeoutError) as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else str(exc)
            self.metrics.inc("stream.errors.received", self.name)
            log.warning(
                "tcp.connect_failed",
                binding=self.name,
                host=self.host,
                port=self.port,
                error=reason,
            )
            raise ConnectError(f"cannot connect to {self.host}:{self.port}: {reason}") from None
        self.metrics.inc("stream.opens.sent", self.name)
        return transport, protocol


def require_address(client: TcpClient) -> TcpClient:
    """``client``, or a ConfigError naming its options when it has no host and port."""
    if not client.host:
        raise ConfigError(
            f"bindings.{client.name}.options.host", "a tcp client needs a host and a port here"
        )
    return client


def build(binding: Binding, ctx: BuildContext) -> TcpClient:
    options = binding.options
    where = f"{binding.path}.options"
    host = options.get("host")
    if host is None and "port" not in options:
        # Seed 003's south_tcp_client: the kafka client before it knows the brokers.
        return TcpClient(binding.name, "", 0, ctx.metrics)
    if not host:
        raise ConfigError(f"{where}.host", "a tcp client needs a host")
    if "port" not in options:
        raise ConfigError(f"{where}.port", "a tcp client needs a port")
    ports = parse_ports(options["port"], f"{where}.port")
    if len(ports) != 1:
        raise ConfigError(f"{where}.port", "a tcp client connects to exactly one port")
    return TcpClient(binding.name, host, ports[0], ctx.metrics)
