"""The JVM checks against the gateway's own model: the same verdict for every record of a corpus.

Each corpus record goes through :func:`checked_in_jvm` on the real Spark session (a batch
DataFrame: the expressions are the ones a streaming query runs) and through the ``json`` model
in Python. Both must accept it or both reject it; a rejected record's two reasons must both name
the failing property. The schemas include the gateway's model test corpus (``tests/models``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import SparkSession
from tests.models.test_models import ORDER_JSON_SCHEMA
from tests.models.test_sse_content_validation import SCHEMA as PRICE_SCHEMA

from ssegate.catalogs import CatalogSet
from ssegate.catalogs.local import build_inline
from ssegate.models.schemas import frame
from ssegate.pipeline.jvm_checks import NO_PYTHON, checked_in_jvm
from ssegate.pipeline.validation import JsonInJvm, build_record_model, check_values, jvm_plan

READING_SCHEMA = {
    "type": "object",
    "required": ["device", "tenant", "temperature", "ts"],
    "properties": {
        "device": {"type": "string", "pattern": "^device-[0-9]{3}$"},
        "tenant": {"type": "string", "enum": ["acme", "globex"]},
        "temperature": {"type": "number", "minimum": -40, "exclusiveMaximum": 90},
        "ts": {"type": "string", "minLength": 20, "format": "date-time"},
        "sent": {"type": "integer"},
        "ok": {"type": "boolean"},
        "note": {"type": ["string", "null"], "maxLength": 5},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
        "levels": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1},
        "room": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "const": "lab"},
                "floor": {"type": "integer"},
            },
        },
        "any": {},
    },
}
DRAFT4_SCHEMA = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "type": "object",
    "properties": {"level": {"type": "number", "minimum": 0, "exclusiveMinimum": True}},
}
OK = '"device": "device-001", "tenant": "acme", "temperature": 21.5, "ts": "2024-01-01T00:00:01Z"'
FIELDS = "device STRING, tenant STRING, temperature DOUBLE, ts TIMESTAMP, sent BIGINT"

VALID: dict[str, list[str]] = {
    "reading": [
        f"{{{OK}}}",
        f'{{{OK}, "sent": 5, "ok": true, "note": null, "tags": ["a", "bc"], "levels": [0, 2]}}',
        f'{{{OK}, "sent": 2.0, "note": "12345", "room": {{"name": "lab", "floor": 3}}}}',
        f'{{{OK}, "any": [1, {{"x": null}}], "extra": "not in the schema", "tags": []}}',
        f'{{{OK}, "note": "nullable", "temperature": -40}}',
        f' \n{{{OK}, "tags": ["1", "true"]}}  ',
        '{"tenant": "globex", "device": "device-999", "temperature": 89.9,'
        ' "ts": "2024-01-01T00:00:01.5Z"}',
    ],
    "order": ['{"id": 1, "item": "tea"}', '{"item": "", "id": -7}', '{"id": 1e3, "item": "x"}'],
    "price": ['{"price": 0}', '{"price": 12.5, "currency": "EUR"}'],
    "draft4": ['{"level": 0.5}', "{}"],
}
# Each invalid record with the property its reason must name ("" for the record as a whole).
INVALID: dict[str, list[tuple[str, str]]] = {
    "reading": [
        ("not json at all", ""),
        ("", ""),
        ("[1, 2]", ""),
        ('{"device": "device-001"', ""),
        ("{'device': 'device-001'}", ""),
        ('{"tenant": "acme", "temperature": 1, "ts": "2024-01-01T00:00:01Z"}', "device"),
        (f'{{{OK}, "device": 7}}', "device"),
        (f'{{{OK}, "device": "device-7"}}', "device"),
        (f'{{{OK}, "device": null}}', "device"),
        (f'{{{OK}, "tenant": "initech"}}', "tenant"),
        (f'{{{OK}, "temperature": "hot"}}', "temperature"),
        (f'{{{OK}, "temperature": "NaN"}}', "temperature"),
        (f'{{{OK}, "temperature": -41}}', "temperature"),
        (f'{{{OK}, "temperature": 90}}', "temperature"),
        (f'{{{OK}, "temperature": true}}', "temperature"),
        (f'{{{OK}, "ts": "2024-01-01"}}', "ts"),
        (f'{{{OK}, "sent": 1.5}}', "sent"),
        (f'{{{OK}, "sent": "5"}}', "sent"),
        (f'{{{OK}, "ok": "yes"}}', "ok"),
        (f'{{{OK}, "ok": 1}}', "ok"),
        (f'{{{OK}, "note": "toolong"}}', "note"),
        (f'{{{OK}, "note": 5}}', "note"),
        (f'{{{OK}, "tags": "a"}}', "tags"),
        (f'{{{OK}, "tags": ["a", 1]}}', "tags"),
        (f'{{{OK}, "tags": ["abcd"]}}', "tags"),
        (f'{{{OK}, "tags": ["a", "b", "c"]}}', "tags"),
        (f'{{{OK}, "tags": [null]}}', "tags"),
        (f'{{{OK}, "levels": []}}', "levels"),
        (f'{{{OK}, "levels": [1, -1]}}', "levels"),
        (f'{{{OK}, "levels": [1.5]}}', "levels"),
        (f'{{{OK}, "room": {{}}}}', "name"),
        (f'{{{OK}, "room": {{"name": "attic"}}}}', "name"),
        (f'{{{OK}, "room": {{"name": "lab", "floor": "2"}}}}', "floor"),
        (f'{{{OK}, "room": "lab"}}', "room"),
        (f'{{{OK}, "room": null}}', "room"),
    ],
    "order": [
        ('{"id": 1}', "item"),
        ('{"id": "one", "item": "tea"}', "id"),
        ('{"id": 1, "item": "tea", "note": "x"}', "note"),
        ('{"id": 1.25, "item": "tea"}', "id"),
        ('{"id": 1, "item": ["tea"]}', "item"),
    ],
    "price": [('{"price": -1}', "price"), ('{"cost": 1}', "price"), ('{"price": "1"}', "price")],
    "draft4": [('{"level": 0}', "level"), ('{"level": -2}', "level")],
}
SCHEMAS = {
    "reading": json.dumps(READING_SCHEMA),
    "order": ORDER_JSON_SCHEMA,
    "price": PRICE_SCHEMA,
    "draft4": json.dumps(DRAFT4_SCHEMA),
}


def catalogs() -> CatalogSet:
    subjects = {name: {"schema": text} for name, text in SCHEMAS.items()}
    return CatalogSet({"local": build_inline("local", {"subjects": subjects}, "catalogs.local")})


def spec(subject: str) -> dict[str, Any]:
    return {"model": "json", "catalog": {"local": [{"subject": subject}]}}


def verdicts(
    spark: SparkSession, model_spec: dict[str, Any] | None, values: list[bytes | None]
) -> tuple[list[str | None], list[str | None], list[Any]]:
    """``(JVM reasons, Python reasons, JVM records)`` for ``values``."""
    model = build_record_model(model_spec, "sources.s.model", catalogs())
    plan = jvm_plan(model)
    assert isinstance(plan, JsonInJvm)
    raw = spark.createDataFrame([(v,) for v in values], "value binary")
    rows = checked_in_jvm(raw, plan, FIELDS, model).collect()
    python, _ = check_values(model, values)
    return [r["_reason"] for r in rows], python, [r["_record"] for r in rows]


@pytest.mark.parametrize("subject", sorted(SCHEMAS))
def test_the_jvm_and_the_model_accept_and_reject_the_same_records(
    spark: SparkSession, subject: str
) -> None:
    records = [(text, None) for text in VALID[subject]] + list(INVALID[subject])
    values: list[bytes | None] = [text.encode() for text, _ in records]
    jvm, python, _ = verdicts(spark, spec(subject), values)
    for (text, field), ours, theirs in zip(records, jvm, python, strict=True):
        assert (ours is None) == (theirs is None), (text, ours, theirs)
        if field:
            assert ours is not None and field in ours, (text, ours)
            assert theirs is not None and field in theirs, (text, theirs)


def test_a_valid_record_carries_its_declared_fields(spark: SparkSession) -> None:
    value = f'{{{OK}, "sent": 1700000000000001}}'.encode()
    jvm, _, records = verdicts(spark, spec("reading"), [value])
    assert jvm == [None]
    record = records[0].asDict()
    assert record["device"] == "device-001"
    assert record["temperature"] == 21.5
    assert record["sent"] == 1700000000000001
    assert record["ts"].isoformat().startswith("2024-01-01T00:00:01")


def test_framed_records_of_the_configured_schema_are_checked_in_the_jvm_and_others_in_python(
    spark: SparkSession,
) -> None:
    # inline subjects are numbered from 1 in order: reading 1, order 2, price 3, draft4 4
    values: list[bytes | None] = [
        frame(1, f"{{{OK}}}".encode()),
        frame(1, b'{"device": 5}'),
        frame(2, b'{"id": 1, "item": "tea"}'),  # the order schema: valid by its own id
        frame(2, b'{"id": 1}'),
        frame(99, b"{}"),
        None,
    ]
    jvm, python, records = verdicts(spark, spec("reading"), values)
    assert [r is None for r in jvm] == [r is None for r in python] == [
        True, False, True, False, False, False,
    ]  # fmt: skip
    assert jvm[5] == python[5] == "no value (tombstone)"
    assert jvm[4] == python[4]
    assert records[0]["device"] == "device-001"


def test_values_python_reads_in_other_encodings_take_the_python_path(
    spark: SparkSession,
) -> None:
    text = f"{{{OK}}}"
    values: list[bytes | None] = [
        text.encode("utf-16"),
        text.encode("utf-8-sig"),
        text.encode("utf-16-le"),
        b"\xff\xfe\xfd",
        b'{"device": "\xff"}',
    ]
    jvm, python, _ = verdicts(spark, spec("reading"), values)
    assert [r is None for r in jvm] == [r is None for r in python]
    assert jvm[4] is not None and jvm[4].startswith("not JSON")


@pytest.mark.parametrize(
    "model_spec", [None, {"model": "json"}], ids=["no model", "json without a catalog"]
)
def test_without_a_schema_the_jvm_agrees_on_what_is_json(
    spark: SparkSession, model_spec: dict[str, Any] | None
) -> None:
    values: list[bytes | None] = [
        b'{"device": "d"}', b"[1]", b"5", b"nope", b"", frame(1, b"{}"), b'{"temperature": "x"}',
    ]  # fmt: skip
    jvm, python, _ = verdicts(spark, model_spec, values)
    assert [r is None for r in jvm] == [r is None for r in python], (jvm, python)


def test_without_python_the_records_only_the_model_can_judge_are_invalid_and_say_why(
    spark: SparkSession,
) -> None:
    model = build_record_model(spec("reading"), "sources.s.model", catalogs())
    plan = jvm_plan(model)
    assert plan is not None
    values = [f"{{{OK}}}".encode(), frame(2, b'{"id": 1, "item": "tea"}'), b'{"device": 5}']
    raw = spark.createDataFrame([(v,) for v in values], "value binary")
    checked = checked_in_jvm(raw, plan, FIELDS, model, python=False)
    physical = checked._jdf.queryExecution().executedPlan().toString()
    assert "ArrowEvalPython" not in physical and "Generate" not in physical
    reasons = [r["_reason"] for r in checked.collect()]
    assert reasons[0] is None
    assert reasons[1] == f"schema id 2: {NO_PYTHON}"
    assert reasons[2] is not None and "/device" in reasons[2]
