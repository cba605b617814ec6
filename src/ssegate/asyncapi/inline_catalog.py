"""The inline catalogs an expansion writes message schemas into, and the models that name them.

Both sides of an expansion use them: an asyncapi **server** puts the payload schema of each SSE
channel in ``<server>_catalog`` (checked by the sse server's ``requests``), an asyncapi
**client** with a Kafka spec puts the payload and key schemas of each topic in
``<client>_catalog`` (checked by the kafka cache_server's ``topics``). They are ordinary
``inline`` catalogs of the expanded config, so ``ssegate asyncapi expand`` shows them and the
resolver checks them like hand-written ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ssegate.asyncapi.model import MessageSchema
from ssegate.asyncapi.specs import Spec


def catalog_model(
    catalogs: dict[str, Any], catalog: str, subject: str, schema: Any, model: str = "json"
) -> dict[str, Any]:
    """A ``model`` block naming ``schema``, stored as ``subject`` of the inline ``catalog``."""
    entry = catalogs.setdefault(catalog, {"type": "inline", "options": {"subjects": {}}})
    entry["options"]["subjects"][subject] = {"schema": json.dumps(schema, sort_keys=True)}
    return {"model": model, "catalog": {catalog: [{"subject": subject, "version": "latest"}]}}


def json_schema_of(parts: Sequence[tuple[Spec, MessageSchema | None]], refusal: str) -> Any:
    """One JSON Schema for a part (payload or key) of a channel's messages: the schema they
    share, else ``anyOf`` their schemas (a message is any one of them, and schemas may
    overlap); ``None`` when there is no message or one of them leaves the part open. An Avro
    schema is refused at its pointer, ``refusal`` saying why.
    """
    for spec, part in parts:
        if part is not None and part.format != "json":
            raise spec.error(part.where, f"an {part.format.capitalize()} schema {refusal}")
    if not parts or any(part is None for _, part in parts):
        return None
    distinct: dict[str, Any] = {}
    for _, part in parts:
        assert part is not None
        distinct.setdefault(json.dumps(part.schema, sort_keys=True), part.schema)
    schemas = list(distinct.values())
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
