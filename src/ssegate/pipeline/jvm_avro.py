"""An ``avro`` source's validation in the JVM: Spark's ``from_avro`` (spark-avro) on the payload.

For ``{model: avro, view: json}`` the gateway's model accepts a Confluent-framed value whose
schema id names a schema of its catalog and whose payload decodes with it (fastavro), and hands
on the record as JSON. :func:`checked_avro_in_jvm` does the same in the JVM for values framed
with the configured schema's id: ``from_avro`` in ``PERMISSIVE`` mode decodes the payload into
a struct (all of whose fields are null when it does not decode: a record schema needs a field
that cannot be null for that to tell, else the source keeps the Python path), and the declared
``fields`` are taken from it by name
(``try_cast`` where the types differ). Values framed with another id go to the model in Python
in the same query, as for ``json`` (:mod:`ssegate.pipeline.jvm_checks`); an Avro failure names
no field in either path (the binary encoding has none to name).

Known differences from the Python model: bytes left over after the record are not noticed;
a ``bytes`` field read into a ``STRING`` field is decoded as UTF-8 (the model's JSON view writes
its bytes as code points 0-255).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ssegate.models.framed import NOT_FRAMED
from ssegate.pipeline.jvm_checks import (
    NO_PYTHON,
    judged_columns,
    python_checks,
)
from ssegate.pipeline.validation import TOMBSTONE, AvroInJvm, RecordModel

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

_DECODED = "_decoded"


def checked_avro_in_jvm(
    raw: DataFrame, plan: AvroInJvm, fields: str, model: RecordModel, *, python: bool = True
) -> DataFrame | None:
    """``raw`` plus ``_reason`` and ``_record``, or ``None`` when a declared field cannot be
    taken from Spark's reading of the schema (a union of several types, say)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql.types import StructType

    declared = StructType.fromDDL(fields)
    assert isinstance(declared, StructType)
    never_null = _never_null(plan.schema_text)
    if not never_null:
        return None
    value = F.col("value")
    framed = (F.length(value) >= 5) & (F.substring(value, 1, 1) == F.unhex(F.lit("00")))
    schema_id = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")
    ours = framed & (schema_id == F.lit(plan.schema_id))
    payload = F.when(ours, F.substr(value, F.lit(6)))
    decoded = from_avro(payload, plan.schema_text, {"mode": "PERMISSIVE"})
    staged = raw.select(*raw.columns, decoded.alias(_DECODED))
    shape = staged.schema[_DECODED].dataType
    assert isinstance(shape, StructType)
    record = _declared(F.col(_DECODED), shape, declared)
    if record is None:
        return None
    reason = (
        F.when(value.isNull(), F.lit(TOMBSTONE))
        .when(~framed, F.lit(NOT_FRAMED))
        .when(
            F.col(_DECODED).isNull()
            | F.greatest(*[F.col(_DECODED)[name].isNull() for name in never_null]),
            F.concat(F.lit("not Avro of schema id "), schema_id.cast("string")),
        )
    )
    elsewhere = value.isNotNull() & framed & ~ours
    if not python:
        other = F.concat(F.lit("schema id "), schema_id.cast("string"), F.lit(f": {NO_PYTHON}"))
        return staged.select(
            *raw.columns,
            F.when(elsewhere, other).otherwise(reason).alias("_reason"),
            record.alias("_record"),
        )
    judged = python_checks(model, skip_nulls=True)(F.when(elsewhere, value))
    return judged_columns(
        staged,
        raw.columns,
        F.when(elsewhere, judged["reason"]).otherwise(reason),
        F.when(elsewhere, F.from_json(judged["text"], declared)).otherwise(record),
    )


def _never_null(schema_text: str) -> list[str]:
    """The fields of a record schema that a decoded record always has (not ``null``, not a
    union with ``null``)."""
    schema = json.loads(schema_text)
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return []
    names = []
    for spec in schema.get("fields", []):
        kind = spec.get("type")
        if kind != "null" and not (isinstance(kind, list) and "null" in kind):
            names.append(str(spec["name"]))
    return names


def _declared(decoded: Column, shape: StructType, declared: StructType) -> Column | None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    have = {f.name: f.dataType for f in shape.fields}
    columns = []
    for spec in declared.fields:
        kind = have.get(spec.name)
        if kind is None:
            column = F.lit(None).cast(spec.dataType)
        elif kind == spec.dataType:
            column = decoded[spec.name]
        elif isinstance(kind, StructType | ArrayType | MapType):
            return None
        else:
            column = decoded[spec.name].try_cast(spec.dataType)
        columns.append(column.alias(spec.name))
    return F.struct(*columns)
