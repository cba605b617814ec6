"""Models: what a message must look like (``model`` blocks in ``zilla.yaml``), checked per message.

:func:`build_model` turns one model block (``json``, ``{model: avro, view: json, catalog: ...}``)
into a :class:`Model`. Building resolves the schema the block names through the
:class:`~ssegate.catalogs.CatalogSet` (so a bad reference stops start-up with its YAML path);
after that, :meth:`Model.validate` and :meth:`Model.to_text` are synchronous, need no event loop
and only touch the network for a schema id never seen before (one bounded GET, then cached).

Models pickle as the arguments that build them (with the catalog set and its cached schemas),
so a Spark job can ship one to its executors, or rebuild it there from the config.

``json`` (:mod:`~ssegate.models.json_model`), ``avro`` (:mod:`~ssegate.models.avro_model`),
``protobuf`` (:mod:`~ssegate.models.protobuf_model`, ``.proto`` schemas compiled by protoc in
:mod:`~ssegate.models.proto_compiler`) and ``string`` (:mod:`~ssegate.models.string_model`).
``avro`` and ``protobuf`` share the Confluent framing, schema ids and ``view: json``
(:mod:`~ssegate.models.framed`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ssegate.catalogs import CatalogSet
from ssegate.config.errors import ConfigError
from ssegate.models.avro_model import AvroModel
from ssegate.models.json_model import JsonModel
from ssegate.models.protobuf_model import ProtobufModel
from ssegate.models.string_model import StringModel

__all__ = [
    "AvroModel",
    "JsonModel",
    "Model",
    "ProtobufModel",
    "StringModel",
    "build_model",
    "model_spec",
]


class Model(Protocol):
    def validate(self, data: bytes) -> str | None:
        """``None`` when ``data`` is valid, else a short reason (one line, ≤ ~200 chars)."""

    def to_text(self, data: bytes) -> str:
        """What an SSE event carries for valid ``data`` (for ``avro`` and ``protobuf`` with
        ``view: json``, the record as JSON text)."""


def model_spec(spec: str | Mapping[str, Any]) -> dict[str, Any]:
    """A model block in its object form: ``"json"`` becomes ``{"model": "json"}``."""
    if isinstance(spec, str):
        return {"model": spec}
    return dict(spec)


def build_model(
    spec: str | Mapping[str, Any],
    path: str,
    catalogs: CatalogSet | None = None,
    *,
    topic: str | None = None,
    role: str = "value",
) -> Model:
    """The model a block describes. ``path`` is its YAML path (for ConfigError); ``topic`` and
    ``role`` (``key`` or ``value``) turn ``{strategy: topic}`` into the subject
    ``<topic>-<role>``. Raises ConfigError."""
    # A pipeline file has no JSON Schema (ssegate.pipeline.config): its model blocks reach here
    # unchecked, so the models check their options even where zilla.yaml's schema already did.
    block = model_spec(spec)
    kind = block.get("model")
    _refuse_foreign(block, str(kind), path)
    found = catalogs if catalogs is not None else CatalogSet()
    if kind == "json":
        return JsonModel(block, path, found, topic, role)
    if kind == "avro":
        return AvroModel(block, path, found, topic, role)
    if kind == "string":
        return StringModel(block, path)
    if kind == "protobuf":
        return ProtobufModel(block, path, found, topic, role)
    raise ConfigError(f"{path}.model", f"'{kind}' is not a model (json, avro, protobuf, string)")


OPTIONS_OF = {
    "json": frozenset({"model", "catalog"}),
    "avro": frozenset({"model", "catalog", "view"}),
    "protobuf": frozenset({"model", "catalog", "view"}),
    "string": frozenset({"model", "encoding", "minLength", "maxLength", "pattern"}),
}
"""The keys each model reads; the schema takes every key for every model."""


def _refuse_foreign(block: Mapping[str, Any], kind: str, path: str) -> None:
    """A key another kind of model reads (``pattern`` on ``json``) is a ConfigError: it would
    check nothing. So is a catalog entry's ``record`` anywhere but on ``protobuf``."""
    known = OPTIONS_OF.get(kind)
    if known is None:
        return
    for key in block:
        if key not in known:
            users = sorted(k for k, keys in OPTIONS_OF.items() if key in keys)
            raise ConfigError(
                f"{path}.{key}", f"applies to {' and '.join(users)} models, not to {kind}"
            )
    catalog = block.get("catalog")
    if kind == "protobuf" or not isinstance(catalog, Mapping):
        return
    for name, entries in catalog.items():
        for index, entry in enumerate(entries if isinstance(entries, list) else ()):
            if isinstance(entry, Mapping) and "record" in entry:
                raise ConfigError(
                    f"{path}.catalog.{name}[{index}].record",
                    f"names a protobuf message; a {kind} model has none",
                )
