"""The ``avro`` model: Avro binary in the Confluent wire format, read with ``fastavro``.

A message is valid when it is framed (magic byte ``0``, 4-byte big-endian schema id), its id
names a schema in the model's catalog, and the payload decodes with that schema using every
byte. ``view: json`` turns the record into JSON text for an SSE event (the record as plain JSON:
unions are written as their value, ``bytes`` and ``fixed`` as strings of code points 0-255 as
in Avro's JSON encoding, decimals as strings, dates and times in ISO 8601, UUIDs as strings);
without a view the event carries the message as base64.

The framing, schema ids, the view and pickling are shared with ``protobuf``
(:mod:`~ssegate.models.framed`); this module reads the Avro payload.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid
from typing import Any

import fastavro

from ssegate.catalogs import Schema
from ssegate.models.framed import FramedModel, InvalidMessage


def compile_avro_schema(schema: Schema) -> Any:
    """The parsed fastavro schema. Raises ValueError for a bad schema."""
    try:
        return fastavro.parse_schema(json.loads(schema.text))
    except ValueError:
        raise
    except Exception as exc:  # fastavro raises its own SchemaParseException and KeyErrors
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


class AvroModel(FramedModel[Any, Any]):
    """``model: avro`` with a ``catalog`` and an optional ``view: json``."""

    model = "avro"
    schema_kind = "Avro"

    def compile(self, schema: Schema) -> Any:
        return compile_avro_schema(schema)

    def decode_payload(self, schema_id: int, schema: Any, payload: bytes) -> Any:
        stream = io.BytesIO(payload)
        try:
            value = fastavro.schemaless_reader(stream, schema, None)
        except Exception as exc:  # any decoding failure of untrusted bytes is "invalid"
            raise InvalidMessage(
                f"not Avro of schema id {schema_id}: {type(exc).__name__} {exc}"
            ) from None
        left = len(payload) - stream.tell()
        if left:
            raise InvalidMessage(
                f"{left} bytes left over after an Avro record of schema id {schema_id}"
            )
        return value

    def json_text(self, value: Any) -> str:
        return json.dumps(value, default=_json_default, separators=(",", ":"), ensure_ascii=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} has no JSON form")
