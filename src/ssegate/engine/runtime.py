"""The runtime: the resolved config turned into live objects and listening sockets.

:class:`Runtime` builds every binding once, through the factory its ``type`` and ``kind`` name
in :data:`FACTORIES`, following exits from the ``tcp`` servers inwards. Then :meth:`Runtime.start`
opens the listeners (with ``SO_REUSEPORT`` when several worker processes share the ports) and
the telemetry endpoints, and :meth:`Runtime.stop` drains them.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ssegate.bindings.tcp.server import TcpServer
from ssegate.config.errors import ConfigError, NotSupportedYet
from ssegate.config.model import Binding, Component, Config
from ssegate.config.unsupported import refuse_unsupported, refuse_unsupported_component
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.selection import MetricSelection

if TYPE_CHECKING:
    from ssegate.catalogs import CatalogSet

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
    ("sse", "server"): "ssegate.bindings.sse.server:build",
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

EXPORTER_STARTERS: dict[str, str] = {
    "stdout": "ssegate.telemetry.stdout:start_stdout",
    "prometheus": "ssegate.telemetry.prometheus:start_prometheus",
}


def _load(target: str) -> Callable[..., Any]:
    module_name, _, attr = target.partition(":")
    function: Callable[..., Any] = getattr(importlib.import_module(module_name), attr)
    return function


class Runtime:
    """One process's gateway: built bindings, listeners and exporters."""

    def __init__(self, config: Config, metrics: Metrics | None = None) -> None:
        self._config = config
        self._metrics = metrics or Metrics()
        self._built: dict[str, Any] = {}
        self._building: set[str] = set()
        self._vaults: dict[str, Any] = {}
        self._guards: dict[str, Any] = {}
        self._catalogs: CatalogSet | None = None
        self._servers: list[asyncio.AbstractServer] = []
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

    def exit(self, name: str) -> Any:
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

    def vault(self, name: str) -> Any:
        vault = self._vaults.get(name)
        if vault is None:
            component = self._config.vaults[name]
            refuse_unsupported_component("vault", component)
            target = VAULT_FACTORIES.get(component.type)
            if target is None:
                raise ConfigError(
                    f"vaults.{name}.type", f"vault type '{component.type}' is not supported"
                )
            vault = self._vaults[name] = _load(target)(component, self.resolve_path)
        return vault

    def guard(self, name: str) -> Any:
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
            guard = self._guards[name] = _load(target)(component, self)
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
        return _load(target)

    def build(self) -> list[TcpServer]:
        """Build every binding reachable from a tcp server and check the exporters. Raises
        ConfigError."""
        for name in self._config.exporters:
            self.exporter(name)
        servers = []
        for binding in self._config.bindings.values():
            if binding.type == "tcp" and binding.kind == "server":
                server = self.exit(binding.name)
                for listener in server.listeners:
                    self.exit(listener.exit)
                servers.append(server)
        return servers

    async def start(self, *, reuse_port: bool = False) -> None:
        loop = asyncio.get_running_loop()
        from ssegate.bindings.tls.server import install_loop_exception_filter

        install_loop_exception_filter(loop, self._metrics)
        for tcp in self.build():
            for listener in tcp.listeners:
                exit_obj = self.exit(listener.exit)
                ssl_context = getattr(exit_obj, "ssl_context", None)
                factory = self._protocol_factory(exit_obj)
                server = await self._listen(
                    loop, factory, listener.host, listener.port, ssl_context, reuse_port, tcp.name
                )
                self._servers.append(server)
                for sock in getattr(server, "sockets", None) or ():
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
        for name, component in self._config.exporters.items():
            started = self.exporter(name)
            if component.type == "prometheus":
                selection = MetricSelection.of(
                    telemetry, {b.name: b.telemetry for b in self._config.bindings.values()}
                )
                self._servers.extend(
                    await started(
                        self._metrics, component, reuse_port=reuse_port, selection=selection
                    )
                )
            else:
                started(component, telemetry.get("attributes"))

    def _protocol_factory(self, exit_obj: Any) -> Callable[[], asyncio.Protocol]:
        """What a listener creates per connection: the http server's protocol, chosen by ALPN
        when a tls server routes protocols to different bindings."""
        if getattr(exit_obj, "ssl_context", None) is None:
            factory: Callable[[], asyncio.Protocol] = exit_obj.protocol_factory()
            return factory
        names = {route.exit for route in exit_obj.routes} | {exit_obj.exit}
        if len(names) == 1:
            return self._protocol_factory(self.exit(exit_obj.exit))
        from ssegate.bindings.tls.alpn import alpn_factory

        factories = {name: self.exit(name).protocol_factory() for name in names}
        return alpn_factory(exit_obj.exit_for_alpn, factories)

    async def _listen(
        self,
        loop: asyncio.AbstractEventLoop,
        factory: Callable[[], asyncio.Protocol],
        host: str,
        port: int,
        ssl_context: Any,
        reuse_port: bool,
        binding: str,
    ) -> asyncio.AbstractServer:
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
        for built in self._built.values():
            closer = getattr(built, "close", None)
            if closer is not None:
                result = closer()
                if asyncio.iscoroutine(result):
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(result, grace)
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
