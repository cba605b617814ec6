"""The runtime: the resolved config turned into live objects and listening sockets.

:class:`Runtime` is an :class:`~ssegate.engine.assembly.Assembly` (every binding and guard built
once, through the ``module:function`` tables there) that also listens: :meth:`Runtime.start`
builds the graph, opens the listeners (with ``SO_REUSEPORT`` when several processes share the
ports, and then the channel that carries HTTP/1.1 challenge answers among them,
:data:`ANSWER_RELAY`) and the telemetry endpoints, and :meth:`Runtime.stop` drains them and
closes what was built. The engine imports no binding and no guard: each is named by its
``module:function`` and imported on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ssegate.config.errors import ConfigError
from ssegate.config.model import Config
from ssegate.engine.assembly import Assembly, load_factory
from ssegate.engine.listeners import (
    CONNECTION_HANDLER,
    ConnectionHandler,
    ProtocolFactory,
    TlsTermination,
)
from ssegate.telemetry import log, scaling
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.selection import MetricSelection

if TYPE_CHECKING:
    from ssegate.host.worker_links import WorkerLink

ANSWER_RELAY = "ssegate.guards.relay:share_answers"
"""What opens the channel HTTP/1.1 challenge answers take among the processes sharing the
ports: ``(addresses, guards, metrics)`` → what closes it, or ``None`` when it cannot open."""


@runtime_checkable
class Closable(Protocol):
    """A built binding with something to stop when the gateway stops."""

    def close(self) -> object:
        """Stop; may return a coroutine to wait for."""


class Runtime(Assembly):
    """One process's gateway: built bindings, listeners and exporters."""

    def __init__(
        self,
        config: Config,
        metrics: Metrics | None = None,
        *,
        links: Mapping[str, WorkerLink] | None = None,
    ) -> None:
        super().__init__(config, metrics, links=links)
        scaling.install(self._metrics)
        self._servers: list[asyncio.AbstractServer] = []
        self._close_relay: Callable[[], None] | None = None
        self._exporters: list[Closable] = []
        self.addresses: list[tuple[str, str, int]] = []
        """``(binding, host, port)`` for every listener opened, with the real port."""

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, *, reuse_port: bool = False) -> None:
        loop = asyncio.get_running_loop()
        for tcp in self.build():
            for listener in tcp.listeners:
                exit_obj = self._listener_exit(tcp, listener.exit)
                ssl_context = None
                if isinstance(exit_obj, TlsTermination):
                    exit_obj.prepare_loop(loop, self._metrics)
                    ssl_context = exit_obj.ssl_context
                factory = self._protocol_factory(exit_obj)
                server = await self._listen(
                    loop, factory, listener.host, listener.port, ssl_context, reuse_port, tcp.name
                )
                self._servers.append(server)
                for sock in server.sockets:
                    host, port = sock.getsockname()[:2]
                    self.addresses.append((tcp.name, host, port))
                    log.event(
                        "tcp.listen",
                        binding=tcp.name,
                        host=host,
                        port=port,
                        tls=ssl_context is not None,
                    )
        telemetry = self._config.telemetry
        selection = MetricSelection.of(
            telemetry, {b.name: b.telemetry for b in self._config.bindings.values()}
        )
        for name, component in self._config.exporters.items():
            started = self.exporter(name)
            if component.type == "prometheus":
                self._servers.extend(
                    await started(
                        self._metrics, component, reuse_port=reuse_port, selection=selection
                    )
                )
            elif component.type == "otlp":
                self._exporters.append(
                    started(
                        self._metrics,
                        component,
                        attributes=telemetry.get("attributes"),
                        selection=selection,
                    )
                )
            else:
                started(component, telemetry.get("attributes"))
        if reuse_port and self._guards:
            # Ports shared with other processes: HTTP/1.1 challenge answers need a way to reach
            # the process holding their streams.
            addresses = sorted({(host, port) for _, host, port in self.addresses})
            self._close_relay = load_factory(ANSWER_RELAY)(addresses, self._guards, self._metrics)

    def _protocol_factory(self, exit_obj: TlsTermination | ConnectionHandler) -> ProtocolFactory:
        """What a listener creates per connection: the http server's protocol, chosen by ALPN
        when a tls server routes protocols to different bindings."""
        if not isinstance(exit_obj, TlsTermination):
            return exit_obj.protocol_factory()
        factories = {
            name: self.exit(
                name, CONNECTION_HANDLER, self._exit_path(exit_obj.name, name)
            ).protocol_factory()
            for name in exit_obj.exits()
        }
        return exit_obj.dispatch(factories)

    async def _listen(
        self,
        loop: asyncio.AbstractEventLoop,
        factory: Callable[[], asyncio.Protocol],
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        reuse_port: bool,
        binding: str,
    ) -> asyncio.Server:
        try:
            return await loop.create_server(
                factory,
                host,
                port,
                ssl=ssl_context,
                reuse_port=reuse_port or None,
                backlog=4096,
                ssl_handshake_timeout=10.0 if ssl_context is not None else None,
            )
        except OSError as exc:
            raise ConfigError(
                f"bindings.{binding}.options.port",
                f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            ) from None

    async def stop(self, grace: float = 3.0) -> None:
        """Stop accepting, then close what is open; returns within about ``grace`` seconds."""
        for server in self._servers:
            server.close()
        if self._close_relay is not None:
            self._close_relay()
            self._close_relay = None
        closables = [b for b in self._built.values() if isinstance(b, Closable)]
        for built in [*closables, *self._exporters]:
            result = built.close()
            if asyncio.iscoroutine(result):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(result, grace)
        self._exporters.clear()
        waits = [server.wait_closed() for server in self._servers]
        if waits:
            await asyncio.wait([asyncio.ensure_future(w) for w in waits], timeout=grace)
        self._servers.clear()


def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (for tests and examples)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def free_ports(count: int) -> list[int]:
    """``count`` distinct unused TCP ports on 127.0.0.1 (held together while picked)."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(count):
            sock = held.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
    return ports
