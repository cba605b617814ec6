"""The ``inline`` and ``filesystem`` catalogs: schemas written in the config or next to it.

Both hold every schema in memory from the moment they are built (a filesystem schema is read
once, at start-up; a missing file is a :class:`~ssegate.config.errors.ConfigError` naming its
YAML path). Subjects are numbered from 1 in the order the config lists them; that number is the
schema's id for ``{id}`` refs and the Confluent wire format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ssegate.catalogs.schema import LATEST, Schema, SchemaRef, UnknownSchema, guess_type
from ssegate.config.errors import ConfigError


class LocalCatalog:
    """A fixed set of subjects, one schema (and one version) each."""

    def __init__(self, name: str, schemas: list[Schema]) -> None:
        self.name = name
        self._by_subject = {s.subject: s for s in schemas}
        self._by_id = {s.id: s for s in schemas}

    def resolve(self, ref: SchemaRef) -> Schema:
        if ref.id is not None:
            return self.by_id(ref.id)
        schema = self._by_subject.get(ref.subject)
        if schema is None:
            raise UnknownSchema(f"catalog '{self.name}' has no subject '{ref.subject}'")
        if (
            ref.version != LATEST
            and schema.version is not None
            and ref.version != str(schema.version)
        ):
            raise UnknownSchema(
                f"catalog '{self.name}' has subject '{ref.subject}' at version"
                f" {schema.version}, not {ref.version}"
            )
        return schema

    def by_id(self, schema_id: int) -> Schema:
        schema = self._by_id.get(schema_id)
        if schema is None:
            raise UnknownSchema(f"catalog '{self.name}' has no schema with id {schema_id}")
        return schema


def build_inline(name: str, options: Mapping[str, Any], path: str) -> LocalCatalog:
    schemas = []
    for number, (subject, entry) in enumerate((options.get("subjects") or {}).items(), 1):
        text = str(entry["schema"])
        version = _version(entry.get("version"), f"{path}.options.subjects.{subject}.version")
        schemas.append(Schema(number, text, guess_type(text), subject, version))
    return LocalCatalog(name, schemas)


def build_filesystem(
    name: str, options: Mapping[str, Any], path: str, resolve_path: Callable[[str], str]
) -> LocalCatalog:
    schemas = []
    for number, (subject, entry) in enumerate((options.get("subjects") or {}).items(), 1):
        where = f"{path}.options.subjects.{subject}.path"
        location = resolve_path(str(entry["path"]))
        try:
            with open(location, encoding="utf-8") as file:
                text = file.read()
        except OSError as exc:
            raise ConfigError(where, f"cannot read {location}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ConfigError(where, f"{location} is not UTF-8 text") from None
        schemas.append(Schema(number, text, guess_type(text), subject, 1))
    return LocalCatalog(name, schemas)


def _version(value: Any, where: str) -> int | None:
    if value is None or value == LATEST:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(where, f"{value!r} is not a version number or 'latest'") from None
