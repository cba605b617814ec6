"""The ``avro`` model: Avro binary in the Confluent wire format, read with ``fastavro``.

A message is valid when it is framed (magic byte ``0``, 4-byte big-endian schema id), its id
names a schema in the model's catalog, and the payload decodes with that schema using every
byte. ``view: json`` turns the record into JSON text for an SSE event (the record as plain JSON:
unions are written as their value, ``bytes`` and ``fixed`` as strings of code points 0-255 as
in Avro's JSON encoding, decimals as strings, dates and times in ISO 8601, UUIDs as strings);
without a view the event carries the message as base64.

Validation and the view both decode the message; :meth:`AvroModel.to_text` reuses the value
:meth:`AvroModel.validate` decoded when it is handed the same bytes object.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import uuid
from collections.abc import Mapping
from typing import Any

import fastavro

from ssegate.catalogs import CatalogError, CatalogSet, Schema
from ssegate.config.errors import ConfigError
from ssegate.models.schemas import CompiledSchemas, configured_ref, split_frame

MAX_REASON = 200


def compile_avro_schema(schema: Schema) -> Any:
    """The parsed fastavro schema. Raises ValueError for a bad schema."""
    try:
        return fastavro.parse_schema(json.loads(schema.text))
    except ValueError:
        raise
    except Exception as exc:  # fastavro raises its own SchemaParseException and KeyErrors
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


class AvroModel:
    """``model: avro`` with a ``catalog`` and an optional ``view: json``."""

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
            raise ConfigError(path, "model 'avro' needs a catalog that names its schema")
        self.schemas: CompiledSchemas[Any] = CompiledSchemas(
            catalogs, named[0], named[1], compile_avro_schema, path
        )
        self.view = spec.get("view")
        self._last: tuple[bytes, Any] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (AvroModel, self._args)

    def decode(self, data: bytes) -> tuple[str | None, Any]:
        """``(None, value)`` for a valid message, ``(reason, None)`` for an invalid one."""
        framed = split_frame(data)
        if framed is None:
            return "not in the Confluent wire format (magic byte 0 and a 4-byte schema id)", None
        schema_id, payload = framed
        try:
            writer = self.schemas.by_id(schema_id)
        except CatalogError as exc:
            return f"schema id {schema_id}: {exc}", None
        except ValueError as exc:
            return f"schema id {schema_id} is not a usable Avro schema: {exc}", None
        stream = io.BytesIO(payload)
        try:
            value = fastavro.schemaless_reader(stream, writer, None)
        except Exception as exc:  # any decoding failure of untrusted bytes is "invalid"
            reason = f"not Avro of schema id {schema_id}: {type(exc).__name__} {exc}"
            return reason[:MAX_REASON], None
        left = len(payload) - stream.tell()
        if left:
            return f"{left} bytes left over after an Avro record of schema id {schema_id}", None
        self._last = (data, value)
        return None, value

    def validate(self, data: bytes) -> str | None:
        return self.decode(data)[0]

    def to_text(self, data: bytes) -> str:
        if self.view != "json":
            return base64.b64encode(data).decode("ascii")
        last = self._last
        if last is not None and last[0] is data:
            value = last[1]
        else:
            reason, value = self.decode(data)
            if reason is not None:
                raise ValueError(reason)
        return json.dumps(value, default=_json_default, separators=(",", ":"), ensure_ascii=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} has no JSON form")
