"""What a binding factory receives: its config, and a way to reach what it points at.

Every binding module exposes ``build(binding: Binding, ctx: BuildContext) -> object``. The
runtime calls it once per binding at start-up (not per request). ``ctx.exit(name, kind, where)``
builds, or returns the already-built, binding that a route exits to, checked against the
:class:`ExitKind` the caller declares (``SSE_SOURCE``: what an sse server may exit to), so the
whole graph becomes a graph of plain, typed objects before the first connection is accepted,
and an exit of the wrong kind is a :class:`~ssegate.config.errors.ConfigError` naming the
config path of the exit (``bindings.north_sse_server.exit``). ``ctx.guard(name)`` is a
:class:`~ssegate.contract.guard.Guard` whatever the guard's type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from ssegate.config.errors import ConfigError
from ssegate.config.model import Binding, Component, Config
from ssegate.telemetry.metrics import Metrics

if TYPE_CHECKING:
    from ssegate.catalogs import CatalogSet
    from ssegate.contract.guard import Guard
    from ssegate.host.worker_links import WorkerLink
    from ssegate.vaults.vault import Vault

T = TypeVar("T")


class ExitKind(Generic[T]):
    """What a binding needs its exit to be: a class or ``runtime_checkable`` protocol (or a
    tuple of them), and how to name it in a config error.

    Declare one next to the protocol, with its type spelled out (a protocol cannot be inferred
    from its class object)::

        SSE_SOURCE: ExitKind[SseSource] = ExitKind(SseSource, "an sse source (...)")
    """

    __slots__ = ("checked", "label")

    def __init__(self, checked: type[Any] | tuple[type[Any], ...], label: str) -> None:
        self.checked = checked
        self.label = label
        """A noun phrase with its article: ``an sse source (an sse client or ...)``."""

    def require(self, built: object, where: str, found: str) -> T:
        """``built`` as this kind; else a ConfigError at ``where`` saying it is ``found``
        (``'south_http_client' (http client)``) and not this kind."""
        if not isinstance(built, self.checked):
            raise ConfigError(where, f"{found} is not {self.label}")
        return cast(T, built)


class BuildContext(Protocol):
    @property
    def config(self) -> Config: ...

    @property
    def metrics(self) -> Metrics: ...

    def exit(self, name: str, kind: ExitKind[T], where: str) -> T:
        """The built binding called ``name``, which the config at ``where`` (an ``exit``) names;
        a ConfigError at ``where`` when it is not of ``kind``."""

    def vault(self, name: str) -> Vault:
        """The built vault called ``name``."""

    def guard(self, name: str) -> Guard:
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

    def worker_link(self, binding: str) -> WorkerLink | None:
        """This worker's links to the other workers for ``binding``, when it is one of several
        and the binding's kind is linked (:mod:`ssegate.host.worker_links`)."""
