"""Checking and reading one raw record with the gateway's models: the pipeline's validation step.

:func:`build_record_model` turns a source's ``model`` block (written as in ``zilla.yaml``, with
the pipeline file's ``catalogs``) into a :class:`RecordModel`: ``validate(bytes)`` returns the
reason a record is invalid or ``None``, ``to_text(bytes)`` the record as JSON text, which Spark
then parses into the source's declared ``fields``: the gateway's own models
(:func:`ssegate.models.build_model`: ``json``, ``avro`` and ``protobuf`` with ``view: json``,
``string``), so a record the pipeline lets through is one the gateway accepts.

:func:`check_values` is the whole step over a batch of values, as the Spark job calls it from
its Arrow UDF: pure Python, testable without Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ssegate.catalogs import CatalogSet
from ssegate.models import build_model

MAX_REASON = 200


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


def check_values(
    model: RecordModel, values: Iterable[bytes | None]
) -> tuple[list[str | None], list[str | None]]:
    """``(reasons, texts)``: per value, why it is invalid (else ``None``) and its JSON text."""
    reasons: list[str | None] = []
    texts: list[str | None] = []
    for value in values:
        if value is None:
            reasons.append("no value (tombstone)")
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
