"""The config's bindings and guards, built once each: the build half of the runtime.

:class:`Assembly` builds every binding once, through the factory its ``type`` and ``kind`` name
in :data:`FACTORIES`, following exits from the ``tcp`` servers inwards; it is the
:class:`~ssegate.engine.context.BuildContext` every factory is given, and checks each exit a
factory asks for against the kind the factory declares. Guards, vaults and the catalogs are
built the same way, once each, on first use (:data:`GUARD_FACTORIES`, :data:`VAULT_FACTORIES`),
and each exporter is checked through :data:`EXPORTER_STARTERS` and :data:`EXPORTER_OPTIONS`.
:meth:`Assembly.build` does all of it and raises ConfigError (or NotSupportedYet) naming the
config path of the first problem; it opens no socket and starts nothing, which is what
:class:`~ssegate.engine.runtime.Runtime` adds. The engine imports no binding and no guard: each
is named here by its ``module:function`` and imported on first use (:func:`load_factory`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint
from typing import TYPE_CHECKING, Any, TypeVar

from ssegate.config.errors import ConfigError, NotSupportedYet
from ssegate.config.model import Binding, Component, Config
from ssegate.config.unsupported import refuse_unsupported, refuse_unsupported_component
from ssegate.engine.context import ExitKind
from ssegate.engine.listeners import (
    LISTENER_EXIT,
    TCP_SERVER,
    ConnectionHandler,
    TcpListening,
    TlsTermination,
)
from ssegate.telemetry.metrics import Metrics

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

EXPORTER_STARTERS: dict[str, str] = {
    "stdout": "ssegate.telemetry.stdout:start_stdout",
    "prometheus": "ssegate.telemetry.prometheus:start_prometheus",
    "otlp": "ssegate.telemetry.otlp:start_otlp",
}

EXPORTER_OPTIONS: dict[str, str] = {"otlp": "ssegate.telemetry.otlp:otlp_options"}
"""Exporter ``type`` → the function that reads its options, raising ConfigError: run when the
exporter is checked, so ``validate`` reports what ``start`` would."""


def load_factory(target: str) -> Callable[..., Any]:
    """The factory a registry entry names (``module:function``, the entry-point notation),
    imported on first use."""
    function: Callable[..., Any] = EntryPoint(target, target, "ssegate.factories").load()
    return function


class Assembly:
    """The built bindings, guards, vaults and catalogs of one process's config."""

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
        self._built: dict[str, object] = {}
        self._building: set[str] = set()
        self._vaults: dict[str, Vault] = {}
        self._guards: dict[str, Guard] = {}
        self._catalogs: CatalogSet | None = None

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
            built = load_factory(target)(binding, self)
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
            built: Vault = load_factory(target)(component, self.resolve_path)
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
            made: Guard = load_factory(target)(component, self)
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

    # -- the whole graph ---------------------------------------------------------------------------

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
            load_factory(options)(component)
        return load_factory(target)

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
