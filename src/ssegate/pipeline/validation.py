"""Checking and reading one raw record with the gateway's models: the pipeline's validation step.

:func:`build_record_model` turns a source's ``model`` block (written as in ``zilla.yaml``, with
the pipeline file's ``catalogs``) into a :class:`RecordModel`: ``validate(bytes)`` returns the
reason a record is invalid or ``None``, ``to_text(bytes)`` the record as JSON text, which Spark
then parses into the source's declared ``fields``: the gateway's own models
(:func:`ssegate.models.build_model`: ``json``, ``avro`` and ``protobuf`` with ``view: json``,
``string``), so a record the pipeline lets through is one the gateway accepts.

:func:`jvm_plan` says whether Spark can do the same checks itself: for a ``json`` model whose
schema uses only what :mod:`ssegate.pipeline.json_checks` turns into Spark expressions, for
``json`` without a catalog and for a source without a model (:mod:`ssegate.pipeline.jvm_checks`),
and for ``avro`` with ``view: json`` (:mod:`ssegate.pipeline.jvm_avro`, Spark's ``from_avro``).
Every other source (``protobuf``, ``string``, ``avro`` without a view, a JSON Schema with a
Python-only keyword) keeps the Python path for all its records.

:func:`check_values` is the Python step over a batch of values, as the Spark job calls it from
its Arrow UDF: pure Python, testable without Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ssegate.catalogs import CatalogSet
from ssegate.models import AvroModel, JsonModel, build_model
from ssegate.models.json_model import FRAMED_WITHOUT_CATALOG
from ssegate.pipeline.json_checks import NotInJvm, ObjectChecks, plan_checks
from ssegate.telemetry.log import event

MAX_REASON = 200
TOMBSTONE = "no value (tombstone)"
__all__ = [
    "FRAMED_WITHOUT_CATALOG", "TOMBSTONE", "AvroInJvm", "JsonInJvm", "RecordModel", "jvm_plan",
]  # fmt: skip


class RecordModel(Protocol):
    def validate(self, data: bytes) -> str | None: ...

    def to_text(self, data: bytes) -> str: ...


def build_record_model(
    spec: Mapping[str, Any] | None, path: str, catalogs: CatalogSet, topic: str | None = None
) -> RecordModel:
    """The model a source declares (:func:`ssegate.models.build_model`); without one, any JSON
    object is valid."""
    if spec is None:
        return JsonObjects()
    return build_model(spec, path, catalogs, topic=topic)


@dataclass(frozen=True)
class JsonInJvm:
    """How Spark checks a JSON source itself (:mod:`ssegate.pipeline.jvm_checks`)."""

    checks: ObjectChecks | None
    """The schema's checks of the root object; ``None`` without a schema."""
    objects_only: bool
    """Whether the value must be a JSON object (a source without a model)."""
    schema_id: int | None = None
    """The configured schema's id: framed values with another id go to the Python model."""

    @property
    def has_catalog(self) -> bool:
        return self.schema_id is not None


@dataclass(frozen=True)
class AvroInJvm:
    """How Spark reads an ``avro`` source itself (:mod:`ssegate.pipeline.jvm_avro`)."""

    schema_text: str
    schema_id: int


def jvm_plan(model: RecordModel, path: str = "") -> JsonInJvm | AvroInJvm | None:
    """How Spark can check what ``model`` checks, or ``None``: the Python path for every record
    (other models, or a schema with a keyword :mod:`~ssegate.pipeline.json_checks` lists as
    Python-only; logged with the keyword)."""
    if isinstance(model, JsonObjects):
        return JsonInJvm(None, objects_only=True)
    if isinstance(model, AvroModel) and model.view == "json":
        configured = model.schemas.schema
        return AvroInJvm(configured.text, configured.id)
    if not isinstance(model, JsonModel):
        return None
    if model.schemas is None:
        return JsonInJvm(None, objects_only=False)
    schema = model.schemas.schema
    try:
        checks = plan_checks(schema.text)
    except NotInJvm as exc:
        event("pipeline.validation.python", path=path, schema_id=schema.id, because=str(exc))
        return None
    return JsonInJvm(checks, objects_only=True, schema_id=schema.id)


def check_values(
    model: RecordModel, values: Iterable[bytes | None]
) -> tuple[list[str | None], list[str | None]]:
    """``(reasons, texts)``: per value, why it is invalid (else ``None``) and its JSON text."""
    reasons: list[str | None] = []
    texts: list[str | None] = []
    for value in values:
        if value is None:
            reasons.append(TOMBSTONE)
            texts.append(None)
            continue
        try:
            reason = model.validate(value)
            text = None if reason else model.to_text(value)
        except Exception as exc:  # a model must never take the pipeline down with it
            reason, text = f"model failed: {type(exc).__name__}: {exc}"[:MAX_REASON], None
        reasons.append(reason)
        texts.append(text)
    return reasons, texts


class JsonObjects:
    """Any UTF-8 JSON object."""

    def validate(self, data: bytes) -> str | None:
        try:
            document = json.loads(data)
        except ValueError as exc:
            return f"not JSON: {exc}"[:MAX_REASON]
        return None if isinstance(document, dict) else "not a JSON object"

    def to_text(self, data: bytes) -> str:
        return data.decode("utf-8", "replace")
