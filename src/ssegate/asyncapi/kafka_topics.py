"""The ``topics[]`` models a Kafka spec gives the kafka cache_server of an asyncapi client.

Each channel of a Kafka spec is a topic, named by its ``address``. When the channel's messages
give a ``payload`` schema, the topic's ``value`` is a ``json`` model of it (several messages:
``oneOf``), subject ``<topic>-value`` of the client's inline catalog. When they give a Kafka
message binding key (``bindings.kafka.key``), the ``key`` is modelled too, subject
``<topic>-key``: a key whose schema is a string is plain text (a ``string`` model with its
``minLength``, ``maxLength``, ``pattern``, ``enum`` or ``const``), any other key is JSON text
(a ``json`` model). The cache server checks every message once, in its fetch thread, before any
subscriber sees it; an invalid one is skipped for all of them, logged and counted.

Left open: channels whose address has ``{params}`` (they name no one topic), and a part that
some message of the channel does not describe. Refused at the schema's pointer, unless
``options.kafka.topics`` models that part of the topic itself: Avro schemas (a framed Avro
message carries the id its registry gave the schema, which an inline catalog made from the
document cannot know) and string key schemas that combine subschemas (``allOf``, ``anyOf``,
``oneOf``, ``not``, ``if``), which a ``string`` model cannot check.

``options.kafka.topics`` entries win, by name: their ``key`` and ``value`` replace generated
ones, and their other settings (``defaultOffset``, ...) are kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ssegate.asyncapi.inline_catalog import catalog_model, json_schema_of
from ssegate.asyncapi.model import PARAMETER, ApiMessage, MessageSchema
from ssegate.asyncapi.specs import Spec

AVRO_REFUSAL = (
    "is not turned into a model: its messages carry the schema id their registry gave it,"
    " which the document does not know; model the topic in options.kafka.topics (with that"
    " registry's catalog)"
)
COMBINING = ("allOf", "anyOf", "oneOf", "not", "if")
"""Keywords a ``string`` model cannot check on a plain-text key."""

Part = tuple[Spec, MessageSchema | None]


def kafka_topics(
    name: str,
    specs: Sequence[Spec],
    given: Sequence[Mapping[str, Any]],
    catalogs: dict[str, Any],
) -> list[dict[str, Any]]:
    """``given`` (``options.kafka.topics``) merged with the models of the specs' topics."""
    messages: dict[str, list[tuple[Spec, ApiMessage]]] = {}
    for spec in specs:
        for channel in spec.api.channels.values():
            if not PARAMETER.search(channel.address):
                messages.setdefault(channel.address, []).extend((spec, m) for m in channel.messages)
    by_name = {str(entry["name"]): entry for entry in given}
    generated: dict[str, dict[str, Any]] = {}
    catalog = f"{name}_catalog"
    for topic, found in messages.items():
        user = by_name.get(topic, {})
        entry: dict[str, Any] = {}
        if "key" not in user:
            key = _key_model([(spec, m.key) for spec, m in found], catalogs, catalog, topic)
            if key is not None:
                entry["key"] = key
        if "value" not in user:
            schema = json_schema_of([(spec, m.payload) for spec, m in found], AVRO_REFUSAL)
            if schema is not None:
                entry["value"] = catalog_model(catalogs, catalog, f"{topic}-value", schema)
        if entry:
            generated[topic] = entry
    topics = [{"name": e["name"], **generated.pop(str(e["name"]), {}), **e} for e in given]
    return topics + [{"name": topic, **entry} for topic, entry in generated.items()]


def _key_model(
    parts: list[Part], catalogs: dict[str, Any], catalog: str, topic: str
) -> dict[str, Any] | None:
    schema = json_schema_of(parts, AVRO_REFUSAL)
    if schema is None:
        return None
    plain = [(spec, part) for spec, part in parts if part is not None and _is_string(part.schema)]
    if not plain:
        return catalog_model(catalogs, catalog, f"{topic}-key", schema)
    spec, key = plain[0]
    if len({json.dumps(part.schema, sort_keys=True) for _, part in parts if part}) > 1:
        raise spec.error(
            key.where,
            f"the messages of topic {topic!r} differ in their key schemas, and a plain-text key"
            " is checked by one string model: give them one key schema",
        )
    return _string_model(spec, key)


def _is_string(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else list(kind or [])
    return [k for k in kinds if k != "null"] == ["string"]


def _string_model(spec: Spec, key: MessageSchema) -> dict[str, Any]:
    """A ``string`` model that accepts the texts a JSON Schema of ``type: string`` accepts."""
    schema: Mapping[str, Any] = key.schema
    for keyword in COMBINING:
        if keyword in schema:
            raise spec.error(
                f"{key.where}/{keyword}",
                f"a plain-text key is checked by a string model, which cannot apply {keyword!r}",
            )
    model: dict[str, Any] = {"model": "string"}
    for keyword in ("minLength", "maxLength"):
        if keyword in schema:
            model[keyword] = schema[keyword]
    pattern = ""
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else list(schema["enum"])
        texts = [re.escape(v) for v in values if isinstance(v, str)]
        pattern = f"(?=(?:{'|'.join(texts)})\\Z)" if texts else "(?!)"
    if "pattern" in schema:
        search = str(schema["pattern"])
        try:
            re.compile(search)
        except re.error as exc:
            raise spec.error(f"{key.where}/pattern", f"not a regular expression: {exc}") from None
        pattern += f"(?s:.*?)(?:{search})"  # JSON Schema patterns match anywhere in the text
    if pattern:
        model["pattern"] = pattern + "(?s:.*)"
    return model
