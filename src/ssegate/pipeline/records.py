"""From a source to checked rows: read, validate with the source's model, parse its fields.

:func:`checked_records` reads a source (Kafka or the generator) and checks every value, adding
two columns: ``_reason`` (why the record is invalid, else null) and ``_record`` (its declared
``fields``). By default every value goes through the source's
:class:`~ssegate.pipeline.validation.RecordModel` in an Arrow UDF that sees only the value, and
Spark parses the JSON text it returns. With ``validate: jvm``, or under a continuous or
real-time trigger, and where Spark can check what the model checks
(:func:`~ssegate.pipeline.validation.jvm_plan`), Spark does it itself
(:mod:`ssegate.pipeline.jvm_checks`, :mod:`ssegate.pipeline.jvm_avro`).
:func:`valid_rows` keeps the valid ones: their declared ``fields`` plus the Kafka metadata
``_key`` (string), ``_topic``, ``_partition``, ``_offset`` and ``_timestamp``, with the source's
watermark on its ``event_time`` column. :func:`dead_letters` turns the invalid ones into Kafka
records carrying the original key, value and headers, and headers naming why and where from.

Every record a pipeline writes carries an :data:`ID_HEADER`, a function of the input alone, so
that a record written again (Spark's Kafka sink is at-least-once) is known by its id, and the
gateway's Kafka cache skips it (:mod:`ssegate.bindings.kafka.repeats`): :func:`input_id` for one
written from one input record, ``<query>@<source topic>/<partition>/<offset>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ssegate.kafka.topics import RECORD_ID_HEADER
from ssegate.pipeline.config import Source
from ssegate.pipeline.generator import generated_records
from ssegate.pipeline.jvm_avro import checked_avro_in_jvm
from ssegate.pipeline.jvm_checks import checked_in_jvm, judged_columns, python_checks
from ssegate.pipeline.validation import AvroInJvm, JsonInJvm, RecordModel, jvm_plan

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

REASON_HEADER = "ssegate-reason"
TOPIC_HEADER = "ssegate-topic"
PARTITION_HEADER = "ssegate-partition"
OFFSET_HEADER = "ssegate-offset"
ID_HEADER = RECORD_ID_HEADER
HEADERS_TYPE = "array<struct<key:string,value:binary>>"
_RAW_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")


def raw_records(spark: SparkSession, source: Source, bootstrap: str) -> DataFrame:
    """The source's records with the Kafka source's columns, headers included."""
    if source.generator is not None:
        return generated_records(spark, source.name, source.generator)
    assert source.kafka is not None
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source.kafka.topic)
        .option("startingOffsets", source.kafka.starting_offsets)
        .option("includeHeaders", "true")
    )
    for key, value in source.kafka.options.items():
        reader = reader.option(key, value)
    return reader.load().select(*_RAW_COLUMNS)


def checked_records(
    spark: SparkSession,
    source: Source,
    model: RecordModel,
    bootstrap: str,
    *,
    jvm: bool = True,
    python: bool = True,
) -> DataFrame:
    """Raw records plus ``_reason`` and ``_record``: with ``jvm`` in the JVM where it can, else
    with the model in Python. ``python=False`` (continuous and real-time triggers): in the JVM
    without any Python (:func:`~ssegate.pipeline.jvm_checks.checked_in_jvm`)."""
    from pyspark.sql import functions as F

    raw = raw_records(spark, source, bootstrap)
    plan = jvm_plan(model, f"sources.{source.name}.model") if jvm or not python else None
    if isinstance(plan, JsonInJvm):
        return checked_in_jvm(raw, plan, source.fields, model, python=python)
    if isinstance(plan, AvroInJvm):
        checked = checked_avro_in_jvm(raw, plan, source.fields, model, python=python)
        if checked is not None:
            return checked
    judged = python_checks(model)(F.col("value"))
    record = F.from_json(judged["text"], source.fields)
    return judged_columns(raw, raw.columns, judged["reason"], record)


def valid_rows(checked: DataFrame, source: Source) -> DataFrame:
    """The valid records, parsed into the source's fields, with its watermark."""
    from pyspark.sql import functions as F

    parsed = checked.where(F.col("_reason").isNull()).select(
        F.col("_record"),
        F.col("key").cast("string").alias("_key"),
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"),
        F.col("timestamp").alias("_timestamp"),
    )
    rows = parsed.select("_record.*", "_key", "_topic", "_partition", "_offset", "_timestamp")
    if source.event_time is not None and source.watermark is not None:
        rows = rows.withWatermark(source.event_time, source.watermark)
    return rows


def field_names(rows: DataFrame) -> list[str]:
    """The declared fields of :func:`valid_rows`, without the Kafka metadata columns."""
    return [name for name in rows.columns if not name.startswith("_")]


def input_id(name: str, topic: Column, partition: Column, offset: Column) -> Column:
    """``<name>@<topic>/<partition>/<offset>``: the id of what query ``name`` writes for the
    input record at those coordinates (a topic name holds no ``/``)."""
    from pyspark.sql import functions as F

    return F.concat(F.lit(f"{name}@"), topic, F.lit("/"), partition.cast("string"), F.lit("/"),
                    offset.cast("string"))  # fmt: skip


def id_header(record_id: Column) -> Column:
    """The :data:`ID_HEADER` of a Kafka record, as an element of its ``headers``."""
    return _header(ID_HEADER, record_id)


def dead_letters(checked: DataFrame, name: str) -> DataFrame:
    """The invalid records as Kafka records for the dead-letter topic of query ``name``."""
    from pyspark.sql import functions as F

    ours = F.array(
        _header(REASON_HEADER, F.col("_reason")),
        _header(TOPIC_HEADER, F.col("topic")),
        _header(PARTITION_HEADER, F.col("partition").cast("string")),
        _header(OFFSET_HEADER, F.col("offset").cast("string")),
        id_header(input_id(name, F.col("topic"), F.col("partition"), F.col("offset"))),
    )
    original = F.coalesce(F.col("headers"), F.array().cast(HEADERS_TYPE))
    return checked.where(F.col("_reason").isNotNull()).select(
        F.col("key"), F.col("value"), F.concat(original, ours).alias("headers")
    )


def _header(name: str, value: Column) -> Column:
    from pyspark.sql import functions as F

    return F.struct(F.lit(name).alias("key"), value.cast("binary").alias("value"))
