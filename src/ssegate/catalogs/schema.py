"""What a catalog hands out: a :class:`Schema`, asked for with a :class:`SchemaRef`.

A model names its schema the way ``zilla.yaml`` does, one entry of ``catalog{<name>: [...]}``:
``{id}``, ``{subject, version}`` or ``{strategy: topic, version}``. The topic strategy becomes a
subject (``<topic>-key`` / ``<topic>-value``) once the model knows its topic, so a catalog only
ever sees ids and subjects.

Errors: :class:`UnknownSchema` when the catalog answered and has no such schema (the message
that named it is invalid), :class:`CatalogUnavailable` when it could not be asked (the registry
is down and nothing is cached).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

LATEST = "latest"


@dataclass(frozen=True, slots=True)
class Schema:
    """One schema document and where it came from."""

    id: int
    """The registry's id (the one the Confluent wire format carries); local catalogs number
    their subjects from 1 in the order the config lists them."""
    text: str
    type: str = "AVRO"
    """``AVRO``, ``JSON`` or ``PROTOBUF`` (what the registry says; local catalogs guess)."""
    subject: str | None = None
    version: int | None = None


@dataclass(frozen=True, slots=True)
class SchemaRef:
    """One ``catalog.<name>[]`` entry: an id, or a subject and version (``latest`` by default)."""

    id: int | None = None
    subject: str | None = None
    version: str = LATEST
    strategy: str | None = None

    @classmethod
    def parse(cls, entry: Mapping[str, Any]) -> SchemaRef:
        version = str(entry.get("version", LATEST))
        if "id" in entry:
            return cls(id=int(entry["id"]))
        if "strategy" in entry:
            return cls(strategy=str(entry["strategy"]), version=version)
        return cls(subject=str(entry["subject"]), version=version)

    def for_topic(self, topic: str | None, role: str) -> SchemaRef:
        """The ref with ``strategy: topic`` turned into the subject ``<topic>-<role>``."""
        if self.strategy != "topic":
            return self
        if topic is None:
            raise ValueError("strategy 'topic' needs a topic, and this model has none")
        return SchemaRef(subject=f"{topic}-{role}", version=self.version)

    def describe(self) -> str:
        if self.id is not None:
            return f"id {self.id}"
        if self.strategy is not None:
            return f"strategy {self.strategy}, version {self.version}"
        return f"subject '{self.subject}' version {self.version}"


class CatalogError(Exception):
    """A schema could not be had from a catalog."""


class UnknownSchema(CatalogError):
    """The catalog answered: it has no such schema."""


class CatalogUnavailable(CatalogError):
    """The catalog could not be asked (connection refused, timeout, 5xx) and has no copy."""


class Catalog(Protocol):
    """One built catalog. ``resolve`` is synchronous and may block on a registry fetch the first
    time a schema is asked for; afterwards it answers from memory."""

    name: str

    def resolve(self, ref: SchemaRef) -> Schema: ...

    def by_id(self, schema_id: int) -> Schema: ...


def guess_type(text: str) -> str:
    """``JSON`` for a JSON Schema document, ``AVRO`` for an Avro one, else ``PROTOBUF``."""
    if not text.lstrip().startswith(("{", "[", '"')):  # not JSON: a .proto file
        return "PROTOBUF"
    if '"$schema"' in text or '"properties"' in text:
        return "JSON"
    return "AVRO"
