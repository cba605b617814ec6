"""What a binding factory receives: its config, and a way to reach what it points at.

Every binding module exposes ``build(binding: Binding, ctx: BuildContext) -> object``. The
runtime calls it once per binding at start-up (not per request). ``ctx.exit(name)`` builds, or
returns the already-built, binding that a route exits to, so the whole graph becomes a graph of
plain objects before the first connection is accepted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ssegate.config.model import Binding, Component, Config
from ssegate.telemetry.metrics import Metrics

if TYPE_CHECKING:
    from ssegate.catalogs import CatalogSet


class BuildContext(Protocol):
    @property
    def config(self) -> Config: ...

    @property
    def metrics(self) -> Metrics: ...

    def exit(self, name: str) -> Any:
        """The built binding called ``name``."""

    def vault(self, name: str) -> Any:
        """The built vault called ``name`` (a ``FilesystemVault``)."""

    def guard(self, name: str) -> Any:
        """The built guard called ``name``."""

    @property
    def catalogs(self) -> CatalogSet:
        """Every catalog of the config, built once (:mod:`ssegate.catalogs`)."""

    def component(self, kind: str, name: str) -> Component:
        """The raw config of a guard, vault, catalog or exporter."""

    def resolve_path(self, path: str) -> str:
        """A path from the config, made absolute against the config file's directory."""

    def binding(self, name: str) -> Binding:
        """The raw config of binding ``name``."""
