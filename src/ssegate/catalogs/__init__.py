"""Schema catalogs: where models find their schemas (``catalogs`` in ``zilla.yaml``).

:func:`build_catalogs` turns ``Config.catalogs`` into a :class:`CatalogSet`, built once per
process (the runtime's ``catalogs``) or once per Spark executor (rebuild it from the config, or
unpickle it: a set and the schemas it has cached travel with pickle). ``CatalogSet.resolve``
is synchronous: local catalogs answer from memory, registry catalogs fetch a schema the first
time it is asked for and then answer from their cache (see :mod:`ssegate.catalogs.cache`).
``prefetch`` does those first fetches off the event loop at start-up; ``prefetch_sync`` is the
same for a pipeline.

Types: ``inline`` and ``filesystem`` (:mod:`~ssegate.catalogs.local`), ``schema-registry`` and
``karapace`` (Confluent API) and ``apicurio`` (:mod:`~ssegate.catalogs.registry`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping

from ssegate.catalogs.local import build_filesystem, build_inline
from ssegate.catalogs.registry import Fetch, build_registry
from ssegate.catalogs.schema import (
    Catalog,
    CatalogError,
    CatalogUnavailable,
    Schema,
    SchemaRef,
    UnknownSchema,
)
from ssegate.config.errors import ConfigError
from ssegate.config.model import Component, Config

__all__ = [
    "Catalog",
    "CatalogError",
    "CatalogSet",
    "CatalogUnavailable",
    "Schema",
    "SchemaRef",
    "UnknownSchema",
    "build_catalog",
    "build_catalogs",
]


class CatalogSet:
    """The built catalogs of one config, by name."""

    def __init__(self, catalogs: Mapping[str, Catalog] | None = None) -> None:
        self.catalogs: dict[str, Catalog] = dict(catalogs or {})

    def __contains__(self, name: object) -> bool:
        return name in self.catalogs

    def catalog(self, name: str) -> Catalog:
        try:
            return self.catalogs[name]
        except KeyError:
            raise UnknownSchema(f"catalog '{name}' is not defined") from None

    def resolve(self, name: str, ref: SchemaRef) -> Schema:
        """The schema ``ref`` names in catalog ``name``. Raises CatalogError."""
        return self.catalog(name).resolve(ref)

    def by_id(self, name: str, schema_id: int) -> Schema:
        """The schema with id ``schema_id`` (the id a Confluent-framed message carries)."""
        return self.catalog(name).by_id(schema_id)

    def prefetch_sync(self, refs: Iterable[tuple[str, SchemaRef]]) -> list[Schema]:
        """Resolve every ``(catalog, ref)`` now; raises the first CatalogError."""
        return [self.resolve(name, ref) for name, ref in refs]

    async def prefetch(self, refs: Iterable[tuple[str, SchemaRef]]) -> list[Schema]:
        """:meth:`prefetch_sync` in a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.prefetch_sync, list(refs))


def build_catalog(
    component: Component, resolve_path: Callable[[str], str], fetch: Fetch | None = None
) -> Catalog:
    # A pipeline file has no JSON Schema (ssegate.pipeline.config): its catalogs reach here
    # unchecked, so the catalogs check their options even where zilla.yaml's schema already did.
    path = component.path or f"catalogs.{component.name}"
    if component.type == "inline":
        return build_inline(component.name, component.options, path)
    if component.type == "filesystem":
        return build_filesystem(component.name, component.options, path, resolve_path)
    if component.type in ("schema-registry", "karapace", "apicurio"):
        if not component.options.get("url"):
            raise ConfigError(f"{path}.options.url", "a registry catalog needs a url")
        return build_registry(component.name, component.type, component.options, fetch)
    raise ConfigError(f"{path}.type", f"catalog type '{component.type}' is not supported")


def build_catalogs(
    config: Config, resolve_path: Callable[[str], str], fetch: Fetch | None = None
) -> CatalogSet:
    """Every catalog of ``config``; filesystem schemas are read now, registries asked later."""
    return CatalogSet(
        {
            name: build_catalog(component, resolve_path, fetch)
            for name, component in config.catalogs.items()
        }
    )
