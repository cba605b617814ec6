"""``cache_server`` ``topics[].transforms``: a record's key and headers taken from its own fields.

Zilla's ``extract-key`` and ``extract-headers``::

    topics:
      - name: events
        transforms:
          - extract-key: ${message.value.id}
          - extract-headers:
              x-type: ${message.value.type}

make every record of ``events`` carry its value's ``id`` as its key and its ``type`` as the
header ``x-type``, as if its producer had written them. Everything after the fetch sees the
transformed record: sse-kafka's key and header filters, the cache's index of keys and header
values (so a filter on a value's field costs what a header filter costs), event ids
(``${base64(key)}``) and the latest-per-key replay of a compacted topic.

The rules:

- A field is a top-level field of the record's key or value (``${message.key.<field>}``,
  ``${message.value.<field>}``, the names Zilla's schema allows), read as JSON: through the
  topic's model where it has one (:meth:`~ssegate.models.topics.TopicModels.value_text`: avro
  and protobuf give their JSON view), as UTF-8 text otherwise.
- A string gives its UTF-8 bytes; a number or a boolean its JSON text.
- A field that is missing, ``null``, an object or an array, or a key or value that is not a
  JSON object, extracts nothing: the header is left out, and ``extract-key`` gives the record
  no key, so that no key filter matches it by the key its producer wrote when the config says
  the key is another. The record still reaches unfiltered streams. Each is counted in
  ``ssegate.kafka.transforms.unextracted`` (labels ``topic``, ``field``) and the first of each
  topic and field is logged (:class:`Unextracted`, reported by the cache server).
- An extracted header replaces the record's own headers of that name, so a filter on it sees
  only what the config extracted.
- A tombstone keeps its key: there is no value to read, and its key is what it deletes.

A transform runs once per record in the fetch thread, after the topic's check (an invalid record
is skipped before it), and under ``--workers N`` once per host: the shared fetch hands on the
transformed records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ssegate.catalogs import CatalogSet
from ssegate.config.errors import ConfigError
from ssegate.kafka.topics import KafkaMessage
from ssegate.models.topics import TopicModels

_FIELD = re.compile(r"\$\{message\.(key|value)\.([A-Za-z_][A-Za-z0-9_]*)\}")
_HEADER_NAME = re.compile(r"[a-zA-Z:]+[a-zA-Z0-9._\-:]*")


@dataclass(frozen=True, slots=True)
class Field:
    """One ``${message.<part>.<name>}``."""

    part: Literal["key", "value"]
    name: str

    def __str__(self) -> str:
        return f"message.{self.part}.{self.name}"


@dataclass(frozen=True, slots=True)
class Unextracted:
    """A record a field could not be extracted from."""

    offset: int
    field: Field


@dataclass(frozen=True, slots=True)
class TopicTransform:
    """The transforms of one topic."""

    models: TopicModels
    key: Field | None
    headers: tuple[tuple[str, Field], ...]

    def apply(self, message: KafkaMessage) -> tuple[KafkaMessage, list[Unextracted]]:
        """``message`` with its key and headers extracted, and the fields that gave nothing."""
        missed: list[Unextracted] = []
        parts: dict[str, dict[str, Any] | None] = {}
        key = message.key
        tombstone = message.value is None
        if self.key is not None and not (tombstone and self.key.part == "value"):
            key = self._extract(message, self.key, parts, missed)
        headers = message.headers
        if self.headers:
            names = {name for name, _ in self.headers}
            kept = [(name, value) for name, value in headers if name not in names]
            for name, field in self.headers:
                value = self._extract(message, field, parts, missed)
                if value is not None:
                    kept.append((name, value))
            headers = tuple(kept)
        return replace(message, key=key, headers=headers), missed

    def _extract(
        self,
        message: KafkaMessage,
        field: Field,
        parts: dict[str, dict[str, Any] | None],
        missed: list[Unextracted],
    ) -> bytes | None:
        if field.part not in parts:
            parts[field.part] = self._object(message, field.part)
        found = (parts[field.part] or {}).get(field.name)
        if isinstance(found, str):
            return found.encode()
        if isinstance(found, bool | int | float):
            return json.dumps(found).encode()
        missed.append(Unextracted(message.offset, field))
        return None

    def _object(self, message: KafkaMessage, part: str) -> dict[str, Any] | None:
        raw = message.key if part == "key" else message.value
        if raw is None:
            return None
        try:
            if part == "value" and self.models.value is not None:
                text = self.models.value_text(raw)
            else:
                text = raw.decode("utf-8")
            found = json.loads(text)
        except (ValueError, UnicodeDecodeError):
            return None
        return found if isinstance(found, dict) else None


def build_transforms(
    topics: Sequence[Mapping[str, Any]], path: str, catalogs: CatalogSet
) -> dict[str, TopicTransform]:
    """``options.topics[]`` at YAML ``path`` → the transform of every topic that has one.

    The schema has checked the shape (an ``extract-key`` first, if any, then ``extract-headers``);
    raises :class:`ConfigError` naming the path of anything else it cannot run."""
    transforms: dict[str, TopicTransform] = {}
    for index, topic in enumerate(topics):
        entries = topic.get("transforms")
        if not entries:
            continue
        where = f"{path}[{index}].transforms"
        key: Field | None = None
        headers: list[tuple[str, Field]] = []
        for position, entry in enumerate(entries):
            at = f"{where}[{position}]"
            if "extract-key" in entry:
                key = _field(entry["extract-key"], f"{at}.extract-key")
            for name, expression in (entry.get("extract-headers") or {}).items():
                if not _HEADER_NAME.fullmatch(name):
                    raise ConfigError(f"{at}.extract-headers", f"'{name}' is not a header name")
                headers.append((name, _field(expression, f"{at}.extract-headers.{name}")))
        models = TopicModels.build(topic, f"{path}[{index}]", catalogs)
        transforms[str(topic["name"])] = TopicTransform(models, key, tuple(headers))
    return transforms


def _field(expression: object, where: str) -> Field:
    found = _FIELD.fullmatch(str(expression))
    if found is None:
        raise ConfigError(
            where, f"'{expression}' is not ${{message.key.<field>}} or ${{message.value.<field>}}"
        )
    part: Literal["key", "value"] = "key" if found.group(1) == "key" else "value"
    return Field(part, found.group(2))
