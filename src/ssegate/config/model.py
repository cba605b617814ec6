"""The resolved configuration: plain values, built once at start-up from ``zilla.yaml``.

The loader checks the document against the JSON Schema and resolves the binding graph; what it
returns is this model. Option shapes are left as the (schema-checked) mappings they were in the
YAML: each binding module turns its own ``options`` into typed objects when the runtime builds
it, and reports problems with the ``path`` it is given (``bindings.north_tls_server.options``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Route:
    """One entry of a binding's ``routes`` (or its plain ``exit``, as a route with no ``when``)."""

    exit: str | None
    when: list[dict[str, Any]] = field(default_factory=list)
    with_: dict[str, Any] | None = None
    guarded: dict[str, list[str]] = field(default_factory=dict)
    path: str = ""
    """YAML path of this route, ``bindings.north_http_server.routes[1]``."""


@dataclass(frozen=True, slots=True)
class Binding:
    name: str
    type: str
    kind: str
    options: dict[str, Any] = field(default_factory=dict)
    routes: list[Route] = field(default_factory=list)
    exit: str | None = None
    vault: str | None = None
    telemetry: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return f"bindings.{self.name}"

    def exits(self) -> list[str]:
        """Every binding this one can hand a stream to, routes first, then ``exit``."""
        names = [r.exit for r in self.routes if r.exit]
        if self.exit:
            names.append(self.exit)
        return names


@dataclass(frozen=True, slots=True)
class Component:
    """A guard, vault, catalog or telemetry exporter: a name, a type and its options."""

    name: str
    type: str
    options: dict[str, Any] = field(default_factory=dict)
    path: str = ""


@dataclass(frozen=True, slots=True)
class Config:
    name: str
    bindings: dict[str, Binding]
    guards: dict[str, Component] = field(default_factory=dict)
    vaults: dict[str, Component] = field(default_factory=dict)
    catalogs: dict[str, Component] = field(default_factory=dict)
    exporters: dict[str, Component] = field(default_factory=dict)
    telemetry: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    """Where the config came from (a file path), for messages."""
    base_dir: str = "."
    """Directory that relative paths in the config (keystores, locations) are relative to."""
