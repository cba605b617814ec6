"""Spark's from_avro against the gateway's avro model: the same verdict for every record, on the
schemas and records of the model tests (``tests/models/test_models.py``)."""

from __future__ import annotations

import datetime

from pyspark.sql import SparkSession
from tests.models.test_models import (
    AVRO_SPEC,
    ORDER,
    ORDER_AVRO_SCHEMA,
    PRICE_AVRO_SCHEMA,
    avro_bytes,
    catalogs,
)

from ssegate.models.schemas import frame
from ssegate.pipeline.jvm_avro import checked_avro_in_jvm
from ssegate.pipeline.validation import AvroInJvm, build_record_model, check_values, jvm_plan

FIELDS = "id BIGINT, item STRING, note STRING, day DATE, cents INT"


def test_from_avro_and_the_model_accept_and_reject_the_same_records(spark: SparkSession) -> None:
    model = build_record_model(AVRO_SPEC, "sources.s.model", catalogs())
    plan = jvm_plan(model)
    assert isinstance(plan, AvroInJvm)
    order = avro_bytes(ORDER_AVRO_SCHEMA, ORDER)
    other = avro_bytes(ORDER_AVRO_SCHEMA, {**ORDER, "note": "with milk", "id": 8})
    values: list[bytes | None] = [
        frame(2, order),
        frame(2, other),
        frame(3, avro_bytes(PRICE_AVRO_SCHEMA, {"cents": 250})),  # another id: the model's
        order,  # not framed
        frame(2, order[:3]),  # truncated
        frame(404, order),  # an id the catalog lacks
        None,
    ]
    raw = spark.createDataFrame([(v,) for v in values], "value binary")
    rows = checked_avro_in_jvm(raw, plan, FIELDS, model)
    assert rows is not None
    got = rows.collect()
    python, _ = check_values(model, values)
    jvm = [r["_reason"] for r in got]
    assert [r is None for r in jvm] == [r is None for r in python] == [
        True, True, True, False, False, False, False,
    ]  # fmt: skip
    assert jvm[3] == python[3]
    assert jvm[5] == python[5]
    assert jvm[6] == python[6] == "no value (tombstone)"
    first = got[0]["_record"].asDict()
    assert first == {"id": 7, "item": "tea", "note": None, "day": datetime.date(2024, 5, 1),
                     "cents": None}  # fmt: skip
    assert got[1]["_record"]["note"] == "with milk"
    assert got[2]["_record"]["cents"] == 250


def test_bytes_left_over_after_the_record_are_the_one_verdict_that_differs(
    spark: SparkSession,
) -> None:
    model = build_record_model(AVRO_SPEC, "sources.s.model", catalogs())
    plan = jvm_plan(model)
    assert isinstance(plan, AvroInJvm)
    value = frame(2, avro_bytes(ORDER_AVRO_SCHEMA, ORDER) + b"\x00")
    raw = spark.createDataFrame([(value,)], "value binary")
    rows = checked_avro_in_jvm(raw, plan, FIELDS, model)
    assert rows is not None
    assert rows.collect()[0]["_reason"] is None  # from_avro does not look past the record
    assert check_values(model, [value])[0] == [
        "1 bytes left over after an Avro record of schema id 2"
    ]
