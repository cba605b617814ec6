"""What the models of Confluent-framed binary messages (``avro``, ``protobuf``) share.

Such a model needs a catalog entry that names its schema; that schema is resolved and compiled
when the model is built (a bad one stops start-up with its YAML path). A message must carry the
Confluent frame (magic byte ``0``, 4-byte big-endian schema id): its id picks the schema, each
id's schema is compiled once, and the subclass decodes the payload with it. A message without
the frame is invalid, whatever the catalog type: the id is what says which schema wrote it.

:meth:`FramedModel.validate` keeps the value it decoded last, so :meth:`FramedModel.to_text`,
handed the same bytes object next (as the Kafka path does), does not decode again. With
``view: json`` an SSE event carries the value as JSON text; without a view, the message as
received, in base64.

Models pickle as the arguments that build them (see :mod:`ssegate.models`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar, cast

from ssegate.catalogs import CatalogError, CatalogSet, Schema
from ssegate.config.errors import ConfigError
from ssegate.models.schemas import CompiledSchemas, configured_ref, split_frame

Compiled = TypeVar("Compiled")
Value = TypeVar("Value")

MAX_REASON = 200
NOT_FRAMED = "not in the Confluent wire format (magic byte 0 and a 4-byte schema id)"


class InvalidMessage(ValueError):
    """Raised by :meth:`FramedModel.decode_payload`: the reason a payload is invalid."""


class FramedModel(Generic[Compiled, Value]):
    """A model of Confluent-framed messages; subclasses say how to compile a schema, decode a
    payload and write a value as JSON."""

    model: ClassVar[str]
    """The model's name in ``zilla.yaml`` (``avro``)."""
    schema_kind: ClassVar[str]
    """What its schemas are called in reasons (``Avro``)."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        path: str,
        catalogs: CatalogSet,
        topic: str | None = None,
        role: str = "value",
    ) -> None:
        self._args = (dict(spec), path, catalogs, topic, role)
        named = configured_ref(spec, path, topic, role)
        if named is None:
            raise ConfigError(path, f"model '{self.model}' needs a catalog that names its schema")
        self.catalog_entry = f"{path}.catalog.{named[0]}[0]"
        self.schemas: CompiledSchemas[Compiled] = CompiledSchemas(
            catalogs, named[0], named[1], self.compile, path
        )
        self.view = spec.get("view")
        self._last: tuple[bytes, Value] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self._args)

    def compile(self, schema: Schema) -> Compiled:
        """The compiled form of a schema document. Raises ValueError for a bad schema."""
        raise NotImplementedError

    def decode_payload(self, schema_id: int, schema: Compiled, payload: bytes) -> Value:
        """The value of a payload (what follows the frame). Raises InvalidMessage."""
        raise NotImplementedError

    def json_text(self, value: Value) -> str:
        """A decoded value as one line of JSON text."""
        raise NotImplementedError

    def decode(self, data: bytes) -> tuple[str | None, Value | None]:
        """``(None, value)`` for a valid message, ``(reason, None)`` for an invalid one."""
        framed = split_frame(data)
        if framed is None:
            return NOT_FRAMED, None
        schema_id, payload = framed
        try:
            schema = self.schemas.by_id(schema_id)
        except CatalogError as exc:
            return f"schema id {schema_id}: {exc}", None
        except ValueError as exc:
            reason = f"schema id {schema_id} is not a usable {self.schema_kind} schema: {exc}"
            return reason[:MAX_REASON], None
        try:
            value = self.decode_payload(schema_id, schema, payload)
        except InvalidMessage as exc:
            return str(exc)[:MAX_REASON], None
        self._last = (data, value)
        return None, value

    def validate(self, data: bytes) -> str | None:
        return self.decode(data)[0]

    def to_text(self, data: bytes) -> str:
        if self.view != "json":
            return base64.b64encode(data).decode("ascii")
        last = self._last
        if last is not None and last[0] is data:
            return self.json_text(last[1])
        reason, value = self.decode(data)
        if reason is not None:
            raise ValueError(reason)
        return self.json_text(cast(Value, value))
