"""The runtime: the resolved config turned into live objects and listening sockets.

:class:`Runtime` builds every binding once, through the factory its ``type`` and ``kind`` name
in :data:`FACTORIES`, following exits from the ``tcp`` servers inwards; it is the
:class:`~ssegate.engine.context.BuildContext` every factory is given, and checks each exit a
factory asks for against the kind the factory declares. Guards are built the same way through
:data:`GUARD_FACTORIES`. Then :meth:`Runtime.start` opens the listeners (with ``SO_REUSEPORT``
when several processes share the ports, and then the channel that carries HTTP/1.1 challenge
answers among them, :data:`ANSWER_RELAY`) and the telemetry endpoints, and :meth:`Runtime.stop`
drains them. The engine imports no binding and no guard: each is named here by its
``module:function`` and imported on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ssegate.config.errors import ConfigError, NotSupportedYet
from ssegate.config.model import Binding, Component, Config
from ssegate.config.unsupported import refuse_unsupported, refuse_unsupported_component
from ssegate.engine.context import ExitKind
from ssegate.engine.listeners import (
    CONNECTION_HANDLER,
    LISTENER_EXIT,
    TCP_SERVER,
    ConnectionHandler,
    ProtocolFactory,
    TcpListening,
    TlsTermination,
)
from ssegate.telemetry import log, scaling
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.selection import MetricSelection

if TYPE_CHECKING:
    from ssegate.catalogs import CatalogSet
    from ssegate.contract.guard import Guard
    from ssegate.host.worker_links import WorkerLink
    from ssegate.vaults.vault import Vault

T = TypeVar("T")

# (type, kind) → "module:function". Imported on first use, so a config that has no Kafka
# binding never imports the Kafka client.
FACTORIES: dict[tuple[str, str], str] = {
    ("tcp", "server"): "ssegate.bindings.tcp.server:build",
    ("tcp", "client"): "ssegate.bindings.tcp.client:build",
    ("tls", "server"): "ssegate.bindings.tls.server:build",
    ("tls", "client"): "ssegate.bindings.tls.client:build",
    ("http", "server"): "ssegate.bindings.http.server:build",
    ("http", "client"): "ssegate.bindings.http.client:build",
    ("http-filesystem", "proxy"): "ssegate.bindings.http_filesystem.proxy:build",
    ("filesystem", "server"): "ssegate.bindings.filesystem.server:build",
    ("sse", "server"): "ssegate.bindings.sse.quota_gate:build",  # the server, behind its quotas
    ("sse", "client"): "ssegate.bindings.sse.client:build",
    ("kafka", "client"): "ssegate.bindings.kafka.client:build",
    ("kafka", "cache_server"): "ssegate.bindings.kafka.cache_server:build",
    ("kafka", "cache_client"): "ssegate.bindings.kafka.cache_client:build",
    ("sse-kafka", "proxy"): "ssegate.bindings.sse_kafka.proxy:build",
    ("asyncapi", "server"): "ssegate.bindings.asyncapi.server:build",
    ("asyncapi", "proxy"): "ssegate.bindings.asyncapi.composite:build",
    ("asyncapi", "client"): "ssegate.bindings.asyncapi.composite:build",
}

VAULT_FACTORIES: dict[str, str] = {
    "filesystem": "ssegate.vaults.filesystem:build_vault",
}

GUARD_FACTORIES: dict[str, str] = {"jwt": "ssegate.guards.jwt_guard:build"}
"""Guard ``type`` → its ``build(component, ctx)``, which returns a
:class:`~ssegate.contract.guard.Guard`: the one place a new guard type is registered."""

ANSWER_RELAY = "ssegate.guards.relay:share_answers"
"""What opens the channel HTTP/1.1 challenge answers take among the processes sharing the
ports: ``(addresses, guards, metrics)`` → what closes it, or ``None`` when it cannot open."""

EXPORTER_STARTERS: dict[str, str] = {
    "stdout": "ssegate.telemetry.stdout:start_stdout",
    "prometheus": "ssegate.telemetry.prometheus:start_prometheus",
    "otlp": "ssegate.telemetry.otlp:start_otlp",
}

EXPORTER_OPTIONS: dict[str, str] = {"otlp": "ssegate.telemetry.otlp:otlp_options"}
"""Exporter ``type`` → the function that reads its options, raising ConfigError: run when the
exporter is checked, so ``validate`` reports what ``start`` would."""


def _load(target: str) -> Callable[..., Any]:
    """The factory a registry entry names (``module:function``, the entry-point notation),
    imported on first use."""
    function: Callable[..., Any] = EntryPoint(target, target, "ssegate.factories").load()
    return function


@runtime_checkable
class Closable(Protocol):
    """A built binding with something to stop when the gateway stops."""

    def close(self) -> object:
        """Stop; may return a coroutine to wait for."""


class Runtime:
    """One process's gateway: built bindings, listeners and exporters."""

    def __init__(
        self,
        config: Config,
        metrics: Metrics | None = None,
        *,
        links: Mapping[str, WorkerLink] | None = None,
    ) -> None:
        self._config = config
        self._links = dict(links or {})
        self._metrics = metrics or Metrics()
        scaling.install(self._metrics)
        self._built: dict[str, object] = {}
        self._building: set[str] = set()
        self._vaults: dict[str, Vault] = {}
        self._guards: dict[str, Guard] = {}
        self._catalogs: CatalogSet | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._close_relay: Callable[[], None] | None = None
        self._exporters: list[Closable] = []
        self.addresses: list[tuple[str, str, int]] = []
        """``(binding, host, port)`` for every listener opened, with the real port."""

    # -- BuildContext -------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        return self._config

    @property
    def metrics(self) -> Metrics:
        return self._metrics

    def binding(self, name: str) -> Binding:
        return self._config.bindings[name]

    def worker_link(self, binding: str) -> WorkerLink | None:
        return self._links.get(binding)

    def component(self, kind: str, name: str) -> Component:
        table: dict[str, dict[str, Component]] = {
            "guard": self._config.guards,
            "vault": self._config.vaults,
            "catalog": self._config.catalogs,
            "exporter": self._config.exporters,
        }
        return table[kind][name]

    def resolve_path(self, path: str) -> str:
        expanded = os.path.expanduser(path)
        if os.path.isabs(expanded):
            return expanded
        return os.path.normpath(os.path.join(self._config.base_dir, expanded))

    def exit(self, name: str, kind: ExitKind[T], where: str) -> T:
        binding = self._config.bindings[name]
        found = f"'{name}' ({binding.type} {binding.kind})"
        return kind.require(self.build_binding(name), where, found)

    def build_binding(self, name: str) -> object:
        """Build binding ``name`` (and what it exits to) once; later calls return it."""
        built = self._built.get(name)
        if built is not None:
            return built
        binding = self._config.bindings[name]
        if name in self._building:
            raise ConfigError(binding.path, "binding refers back to itself through its exits")
        target = FACTORIES.get((binding.type, binding.kind))
        refuse_unsupported(binding)
        if target is None:
            raise NotSupportedYet(
                f"{binding.path}.type",
                f"'{binding.type}' (kind {binding.kind}) is accepted by the schema but not"
                " supported yet by this version of ssegate",
            )
        self._building.add(name)
        try:
            built = _load(target)(binding, self)
        finally:
            self._building.discard(name)
        self._built[name] = built
        return built

    def vault(self, name: str) -> Vault:
        vault = self._vaults.get(name)
        if vault is None:
            component = self._config.vaults[name]
            refuse_unsupported_component("vault", component)
            target = VAULT_FACTORIES.get(component.type)
            if target is None:
                raise ConfigError(
                    f"vaults.{name}.type", f"vault type '{component.type}' is not supported"
                )
            built: Vault = _load(target)(component, self.resolve_path)
            vault = self._vaults[name] = built
        return vault

    def guard(self, name: str) -> Guard:
        guard = self._guards.get(name)
        if guard is None:
            component = self._config.guards[name]
            target = GUARD_FACTORIES.get(component.type)
            if target is None:
                raise NotSupportedYet(
                    f"guards.{name}.type",
                    f"guard type '{component.type}' is not supported yet by this version"
                    " of ssegate",
                )
            made: Guard = _load(target)(component, self)
            guard = self._guards[name] = made
        return guard

    @property
    def catalogs(self) -> CatalogSet:
        if self._catalogs is None:
            from ssegate.catalogs import build_catalogs

            for component in self._config.catalogs.values():
                refuse_unsupported_component("catalog", component)
            self._catalogs = build_catalogs(self._config, self.resolve_path)
        return self._catalogs

    # -- lifecycle ----------------------------------------------------------------------------

    def exporter(self, name: str) -> Callable[..., Any]:
        """The function that starts exporter ``name``; NotSupportedYet for a type ssegate does
        not have."""
        component = self._config.exporters[name]
        target = EXPORTER_STARTERS.get(component.type)
        if target is None:
            raise NotSupportedYet(
                f"telemetry.exporters.{name}.type",
                f"exporter type '{component.type}' is not supported yet by this version of ssegate",
            )
        refuse_unsupported_component("exporter", component)
        options = EXPORTER_OPTIONS.get(component.type)
        if options is not None:
            _load(options)(component)
        return _load(target)

    def build(self) -> list[TcpListening]:
        """Build every binding reachable from a tcp server and check the exporters. Raises
        ConfigError."""
        for name in self._config.exporters:
            self.exporter(name)
        servers = []
        for binding in self._config.bindings.values():
            if binding.type == "tcp" and binding.kind == "server":
                server = self.exit(binding.name, TCP_SERVER, binding.path)
                for listener in server.listeners:
                    self._listener_exit(server, listener.exit)
                servers.append(server)
        return servers

    def _listener_exit(self, tcp: TcpListening, name: str) -> TlsTermination | ConnectionHandler:
        return self.exit(name, LISTENER_EXIT, self._exit_path(tcp.name, name))

    def _exit_path(self, owner: str, name: str) -> str:
        """The config path of the ``exit`` of binding ``owner`` that names ``name``."""
        binding = self._config.bindings[owner]
        for route in binding.routes:
            if route.exit == name and route.path:
                return f"{route.path}.exit"
        return f"{binding.path}.exit"

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
            self._close_relay = _load(ANSWER_RELAY)(addresses, self._guards, self._metrics)

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
