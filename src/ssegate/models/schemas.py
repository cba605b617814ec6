"""How a model gets from its ``catalog`` block to compiled schemas, and the Confluent framing.

:class:`CompiledSchemas` holds a model's schema as named in the config (resolved at build time,
so a wrong subject or an unreachable registry stops start-up with the YAML path), and every
schema a message has named by id since, each compiled once by the model's ``compile`` function
(one that does not compile is refused from then on, without compiling it again).

Confluent wire format: byte 0 is the magic ``0``, bytes 1-4 the schema id (big-endian), then
the payload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from ssegate.catalogs import CatalogError, CatalogSet, Schema, SchemaRef
from ssegate.config.errors import ConfigError

Compiled = TypeVar("Compiled")

MAGIC = 0
HEADER_SIZE = 5


def split_frame(data: bytes) -> tuple[int, bytes] | None:
    """``(schema id, payload)`` of a Confluent-framed message, else ``None``."""
    if len(data) < HEADER_SIZE or data[0] != MAGIC:
        return None
    return int.from_bytes(data[1:HEADER_SIZE], "big"), data[HEADER_SIZE:]


def frame(schema_id: int, payload: bytes) -> bytes:
    """``payload`` in the Confluent wire format for ``schema_id``."""
    return bytes([MAGIC]) + schema_id.to_bytes(4, "big") + payload


def configured_ref(
    spec: Mapping[str, Any], path: str, topic: str | None, role: str
) -> tuple[str, SchemaRef] | None:
    """The first ``catalog.<name>[]`` entry of a model block, or ``None`` without one."""
    catalog = spec.get("catalog")
    if not catalog:
        return None
    name, entries = next(iter(catalog.items()))
    where = f"{path}.catalog.{name}"
    if not entries:
        raise ConfigError(where, "names no schema: give {id}, {subject} or {strategy: topic}")
    try:
        return name, SchemaRef.parse(entries[0]).for_topic(topic, role)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}[0]", str(exc)) from None


class CompiledSchemas(Generic[Compiled]):
    """The schemas one model uses, compiled once each."""

    def __init__(
        self,
        catalogs: CatalogSet,
        catalog: str,
        ref: SchemaRef,
        compile: Callable[[Schema], Compiled],
        path: str,
    ) -> None:
        self.catalogs = catalogs
        self.catalog = catalog
        self._compile = compile
        self._by_id: dict[int, Compiled] = {}
        self._refused: dict[int, str] = {}
        """Why each id's schema did not compile: an id's schema never changes, so it is not
        compiled again for every message that names it."""
        if catalog not in catalogs:
            raise ConfigError(f"{path}.catalog.{catalog}", f"catalog '{catalog}' is not defined")
        try:
            self.schema = catalogs.resolve(catalog, ref)
        except CatalogError as exc:
            raise ConfigError(f"{path}.catalog.{catalog}", str(exc)) from None
        try:
            self.configured = self._by_id[self.schema.id] = compile(self.schema)
        except ValueError as exc:
            raise ConfigError(
                f"{path}.catalog.{catalog}", f"{ref.describe()} is not a usable schema: {exc}"
            ) from None

    def by_id(self, schema_id: int) -> Compiled:
        """The compiled schema with this id. Raises CatalogError (unknown id, registry down)
        or ValueError (the registry's schema does not compile)."""
        compiled = self._by_id.get(schema_id)
        if compiled is not None:
            return compiled
        refused = self._refused.get(schema_id)
        if refused is not None:
            raise ValueError(refused)
        schema = self.catalogs.by_id(self.catalog, schema_id)
        try:
            compiled = self._by_id[schema_id] = self._compile(schema)
        except ValueError as exc:
            self._refused[schema_id] = str(exc)
            raise
        return compiled
