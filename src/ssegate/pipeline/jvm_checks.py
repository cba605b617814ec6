"""A ``json`` source's validation as Spark expressions: the checks run in the JVM, not in Python.

:func:`checked_in_jvm` adds ``_reason`` (why a record is invalid, else null) and ``_record``
(its declared ``fields``) to a source's raw records, from a :class:`~ssegate.pipeline.validation.
JsonInJvm` plan: one ``from_json`` of the value into a struct that holds both the fields the
schema checks (typed so that Spark's parser fails where the JSON type is wrong) and the declared
fields, then one Spark expression per check of :mod:`ssegate.pipeline.json_checks`.

Spark's JSON parser is laxer than JSON Schema in a few places, and those are checked exactly
with Spark's ``VARIANT`` (``try_parse_json``, ``schema_of_variant``), which costs far more than
``from_json`` and so runs only for the records that need it (Spark evaluates the branches of a
``CASE`` lazily):

- a ``string`` property reads any JSON value as text (``5`` as ``"5"``): a value that could be
  the text of a number, a boolean, an object or an array is checked again;
- an absent key and a JSON ``null`` both read as null: a null is checked again when the text
  holds ``null`` at all;
- a record the parser could not read whole (``_corrupt``) is checked again in full, which
  names the property whose type is wrong, or says the value is not JSON.

Records the JVM cannot judge go to the Python model, in the same query (an Arrow UDF that sees
only their values; every other record is a null it skips): Confluent-framed values whose schema
id is not the configured one (their schema is only known at run time), and values in UTF-16,
UTF-32 or with a byte order mark, which Python's JSON reader decodes and Spark's does not.

A source read by a query with a continuous or real-time trigger gets a plan of JVM operators
only (Spark runs neither a Python UDF nor a generator in those modes): its records that need
the Python model are invalid, with a reason saying so.

Known differences from the Python model (documented in ``docs/pipeline.md``): text after the
JSON object (``{...} x``) is not noticed; numbers are compared as doubles, so bounds and
integers beyond 2^53 are approximate; a declared field whose type differs from the schema's
is read through ``try_cast`` (``"12"`` for a ``DOUBLE`` field gives 12.0, not null).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ssegate.pipeline.json_checks import ObjectChecks, Property, ValueChecks
from ssegate.pipeline.jvm_scalars import one_argument, scalar_failures
from ssegate.pipeline.validation import (
    FRAMED_WITHOUT_CATALOG,
    TOMBSTONE,
    JsonInJvm,
    RecordModel,
    check_values,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

CORRUPT = "_ssegate_corrupt"
_PAYLOAD, _TEXT, _PYTHON, _PARSED = "_payload", "_text", "_python", "_parsed"
PARSE_OPTIONS = {"columnNameOfCorruptRecord": CORRUPT, "allowSingleQuotes": "false"}
_AMBIGUOUS = r"^(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$|true$|false$|\{|\[)"
"""Text a ``string`` property may have read from a JSON number, boolean, object or array."""
_NUMERIC = "^(BIGINT|INT|SMALLINT|TINYINT|DOUBLE|FLOAT|DECIMAL.*)$"
_VARIANT_TYPES = {
    "string": "^STRING$",
    "number": _NUMERIC,
    "integer": _NUMERIC,
    "boolean": "^BOOLEAN$",
    "object": "^OBJECT<",
    "array": "^ARRAY<",
}
_ITEM_TYPES = {
    "string": "^ARRAY<(STRING|VOID)>$",
    "number": "^ARRAY<(BIGINT|INT|SMALLINT|TINYINT|DOUBLE|FLOAT|DECIMAL[^>]*|VOID)>$",
    "boolean": "^ARRAY<(BOOLEAN|VOID)>$",
}
_ITEM_TYPES["integer"] = _ITEM_TYPES["number"]
PYTHON_RESULT = "struct<reason:string,text:string>"
NO_PYTHON = "not checked: the query's trigger (continuous, real-time) runs no Python model"


def checked_in_jvm(
    raw: DataFrame, plan: JsonInJvm, fields: str, model: RecordModel, *, python: bool = True
) -> DataFrame:
    """``raw`` plus ``_reason`` and ``_record``; ``model`` judges what the JVM cannot.

    ``python=False`` builds a plan of JVM operators only, which Spark's continuous and
    real-time modes accept: the records the JVM cannot judge are then invalid, with a reason
    that says so (:data:`NO_PYTHON`)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    declared = StructType.fromDDL(fields)
    assert isinstance(declared, StructType)
    # A key given twice: the last value counts, as for Python's json and Spark's from_json.
    raw.sparkSession.conf.set("spark.sql.variant.allowDuplicateKeys", "true")
    value = F.col("value")
    framed = (F.length(value) >= 5) & (F.substring(value, 1, 1) == F.unhex(F.lit("00")))
    schema_id = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")
    odd = F.substring(value, 1, 1).isin(*(F.unhex(F.lit(b)) for b in ("00", "EF", "FE", "FF")))
    odd = odd | (F.substring(value, 2, 1) == F.unhex(F.lit("00")))
    payload = value
    if plan.has_catalog:
        ours = framed & (schema_id == F.lit(plan.schema_id))
        elsewhere = (framed & ~ours) | (~framed & odd)
        payload = F.when(ours, F.substr(value, F.lit(6))).otherwise(value)
    elif plan.objects_only:
        elsewhere = odd
    else:
        elsewhere = ~framed & odd
    record = _Record(plan.checks, declared)
    # The parse is a column of its own: Spark keeps the two projections apart rather than
    # repeat an expensive expression that the next one uses many times.
    staged = raw.select(
        *raw.columns,
        payload.alias(_PAYLOAD),
        payload.cast("string").alias(_TEXT),
        F.coalesce(elsewhere, F.lit(False)).alias(_PYTHON),
    ).select("*", record.parse(F.col(_TEXT)).alias(_PARSED))
    reason = F.when(value.isNull(), F.lit(TOMBSTONE))
    if not plan.has_catalog and not plan.objects_only:
        reason = reason.when(framed, F.lit(FRAMED_WITHOUT_CATALOG))
    parsed = F.col(_PARSED)
    reason = (
        reason.when(~F.is_valid_utf8(F.col(_PAYLOAD)), F.lit("not JSON: not UTF-8 text"))
        .when(
            parsed.isNull() | parsed[CORRUPT].isNotNull(),
            F.coalesce(record.exact_reason(plan.objects_only), record.fast_reason()),
        )
        .otherwise(record.fast_reason())
    )
    in_python = F.col(_PYTHON)
    if not python:
        unjudged = F.lit(f"not UTF-8 JSON: {NO_PYTHON}")
        if plan.has_catalog:
            other = F.concat(F.lit("schema id "), schema_id.cast("string"), F.lit(f": {NO_PYTHON}"))
            unjudged = F.when(framed, other).otherwise(unjudged)
        reason = F.when(in_python, unjudged).otherwise(reason)
        return staged.select(
            *raw.columns, reason.alias("_reason"), record.declared().alias("_record")
        )
    judged = python_checks(model, skip_nulls=True)(F.when(in_python, value))
    return judged_columns(
        staged,
        raw.columns,
        F.when(in_python, judged["reason"]).otherwise(reason),
        F.when(in_python, F.from_json(judged["text"], declared)).otherwise(record.declared()),
    )


def judged_columns(rows: DataFrame, keep: list[str], reason: Column, record: Column) -> DataFrame:
    """``keep`` plus ``_reason`` and ``_record``, behind a generator: Spark pushes a filter on a
    projected column below the projection by repeating its expression (the whole check, the
    Python UDF included, once more for the filter), but not below a generator's output."""
    from pyspark.sql import functions as F

    judged = F.struct(reason.alias("_reason"), record.alias("_record"))
    return rows.select(*keep, F.inline(F.array(judged)))


def python_checks(model: RecordModel, *, skip_nulls: bool = False) -> Callable[[Column], Column]:
    """An Arrow UDF: the model's ``(reason, text)`` per value (:func:`check_values`). With
    ``skip_nulls``, a null value is not a record but one the JVM judged: both stay null."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.functions import ArrowUDFType

    def check(values: Any) -> Any:  # pyarrow.Array both ways
        import pyarrow as pa  # type: ignore[import-untyped]  # no stubs installed

        items: list[bytes | None] = values.to_pylist()
        reasons: list[str | None]
        texts: list[str | None]
        if skip_nulls:
            reasons, texts = [None] * len(items), [None] * len(items)
            present = [i for i, item in enumerate(items) if item is not None]
            if present:
                found = check_values(model, (items[i] for i in present))
                for index, reason, text in zip(present, *found, strict=True):
                    reasons[index], texts[index] = reason, text
        else:
            reasons, texts = check_values(model, items)
        return pa.StructArray.from_arrays(
            [pa.array(reasons, pa.string()), pa.array(texts, pa.string())],
            names=["reason", "text"],
        )

    with warnings.catch_warnings():  # it prefers type hints; these name pyarrow's types
        warnings.simplefilter("ignore", UserWarning)
        udf: Callable[[Column], Column] = F.arrow_udf(  # type: ignore[attr-defined]  # stubs lag
            check, PYTHON_RESULT, ArrowUDFType.SCALAR
        )
    return udf


class _Record:
    """The parse of one record's text and the reason expressions over it."""

    def __init__(self, checks: ObjectChecks | None, declared: StructType) -> None:
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructField, StructType

        self.checks = checks
        self.text = F.col(_TEXT)
        self.parsed = F.col(_PARSED)
        self.declared_type = declared
        types: dict[str, DataType] = dict(_object_fields(checks)) if checks else {}
        self.second_parse = False
        self.columns: list[tuple[str, Callable[[Column], Column]]] = []
        for spec in declared.fields:
            have = types.get(spec.name)
            if have is None:
                types[spec.name] = spec.dataType
                self.columns.append((spec.name, _as_parsed))
            elif have == spec.dataType:
                self.columns.append((spec.name, _as_parsed))
            elif _atomic(have) and _atomic(spec.dataType):
                self.columns.append((spec.name, _cast_to(spec.dataType)))
            else:
                self.second_parse = True
        self.schema = StructType([StructField(n, t) for n, t in types.items()])
        self.schema = self.schema.add(StructField(CORRUPT, StringType()))
        self.maybe_null = F.instr(self.text, "null") > 0

    def parse(self, text: Column) -> Column:
        from pyspark.sql import functions as F

        return F.from_json(text, self.schema, PARSE_OPTIONS)

    def declared(self) -> Column:
        from pyspark.sql import functions as F

        if self.second_parse:
            return F.from_json(self.text, self.declared_type, {"allowSingleQuotes": "false"})
        return F.struct(*[cast(self.parsed[n]).alias(n) for n, cast in self.columns])

    def exact_reason(self, objects_only: bool) -> Column:
        """Why a record Spark's parser could not read whole is invalid, read as a VARIANT;
        null when only a declared field the schema does not check failed to parse."""
        from pyspark.sql import functions as F

        document = F.try_parse_json(self.text)
        kind = F.schema_of_variant(document)
        reason = F.when(document.isNull(), F.lit("not JSON"))
        if self.checks is None and not objects_only:
            return reason
        not_object = ~kind.startswith("OBJECT<")
        if self.checks is None:
            return reason.when(not_object, F.lit("not a JSON object"))
        shown = F.to_json(document)
        reason = reason.when(
            not_object, F.concat(F.lit("/: "), shown, F.lit(' is not of type "object"'))
        )
        return reason.otherwise(_exact_object(self.checks, document, []))

    def fast_reason(self) -> Column:
        """Why a parsed record is invalid, from its parsed fields (null when valid)."""
        from pyspark.sql import functions as F

        if self.checks is None:
            return F.lit(None).cast("string")
        reasons = _object_reasons(self.checks, self.parsed, [], self)
        if self.checks.closed:
            allowed = F.array(*[F.lit(p.name) for p in self.checks.properties])
            extra = F.array_except(F.json_object_keys(self.text), allowed)
            reasons.append(
                F.when(
                    F.size(extra) > 0,
                    F.concat(F.lit("/"), extra[0], F.lit(": not allowed (additionalProperties)")),
                )
            )
        return F.coalesce(*reasons) if reasons else F.lit(None).cast("string")


def _as_parsed(column: Column) -> Column:
    return column


def _cast_to(kind: DataType) -> Callable[[Column], Column]:
    return lambda column: column.try_cast(kind)


# -- the parse ----------------------------------------------------------------------------------


def _object_fields(checks: ObjectChecks) -> Iterable[tuple[str, DataType]]:
    from pyspark.sql.types import StringType

    for prop in checks.properties:
        yield prop.name, _spark_type(prop.value)
    for name in checks.extra_required:
        yield name, StringType()


def _spark_type(checks: ValueChecks) -> DataType:
    """The type that makes Spark's JSON parser fail where the JSON type is wrong (but for
    ``string``, which reads anything); numbers are doubles (JSON Schema's 1.0 is an integer)."""
    from pyspark.sql.types import (
        ArrayType,
        BooleanType,
        DoubleType,
        StringType,
        StructField,
        StructType,
    )

    if checks.kind in ("number", "integer"):
        return DoubleType()
    if checks.kind == "boolean":
        return BooleanType()
    if checks.kind == "object":
        assert checks.object is not None
        return StructType([StructField(n, t) for n, t in _object_fields(checks.object)])
    if checks.kind == "array":
        return ArrayType(_spark_type(checks.items) if checks.items else StringType())
    return StringType()


def _atomic(kind: DataType) -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType, VariantType

    return not isinstance(kind, ArrayType | MapType | StructType | VariantType)


# -- the checks over parsed fields --------------------------------------------------------------


def _object_reasons(
    checks: ObjectChecks, parent: Column, path: list[str], record: _Record
) -> list[Column]:
    from pyspark.sql import functions as F

    reasons = [
        _property_reason(p, parent[p.name], [*path, p.name], record) for p in checks.properties
    ]
    for name in checks.extra_required:
        pointer = "/".join(["", *path, name])
        required = Property(name, pointer, True, ValueChecks("any"))
        reasons.append(_property_reason(required, parent[name], [*path, name], record))
    return [r for r in reasons if r is not None] or [F.lit(None).cast("string")]


def _property_reason(prop: Property, column: Column, path: list[str], record: _Record) -> Column:
    """Why one property is invalid: absent or null, then its JSON type, then its value."""
    from pyspark.sql import functions as F

    checks = prop.value
    missing = F.lit(f"{prop.pointer}: required property is missing")
    absent = missing if prop.required else F.lit(None).cast("string")
    document = F.try_parse_json(record.text)
    when_null = F.when(record.maybe_null, _exact(prop, document, path)).otherwise(absent)
    present: list[Column] = []
    if checks.kind == "string":
        present.append(F.when(column.rlike(_AMBIGUOUS), _exact(prop, document, path)))
    if checks.kind == "array" and checks.items is not None and checks.items.kind == "string":
        ambiguous = F.exists(column, lambda item: item.rlike(_AMBIGUOUS))
        present.append(F.when(ambiguous, _exact(prop, document, path)))
    present.extend(_value_reasons(checks, column, prop.pointer, path, record))
    if not present:
        return F.when(column.isNull(), when_null)
    return F.when(column.isNull(), when_null).otherwise(F.coalesce(*present))


def _value_reasons(
    checks: ValueChecks, column: Column, pointer: str, path: list[str], record: _Record
) -> list[Column]:
    from pyspark.sql import functions as F

    if checks.kind == "object":
        assert checks.object is not None
        return _object_reasons(checks.object, column, path, record)
    reasons: list[Column] = []
    if checks.kind == "array":
        size = F.size(column)
        if checks.min_items is not None:
            few = F.lit(f"{pointer}: fewer than {checks.min_items} items")
            reasons.append(F.when(size < checks.min_items, few))
        if checks.max_items is not None:
            many = F.lit(f"{pointer}: more than {checks.max_items} items")
            reasons.append(F.when(size > checks.max_items, many))
        items = checks.items
        if items is not None and items.kind != "any":
            if not items.nullable:
                reasons.append(F.when(F.exists(column, lambda item: item.isNull()),
                                      F.lit(f"{pointer}: an item is null")))  # fmt: skip
            for failed, suffix in scalar_failures(items):
                reasons.append(F.when(F.exists(column, one_argument(failed)),
                                      F.lit(f"{pointer}: an item{suffix}")))  # fmt: skip
        return reasons
    for failed, suffix in scalar_failures(checks):
        shown = column.cast("string")
        if checks.kind == "string":
            shown = F.concat(F.lit('"'), column, F.lit('"'))
        reasons.append(
            F.when(failed(column), F.concat(F.lit(f"{pointer}: "), shown, F.lit(suffix)))
        )
    return reasons


# -- the exact checks, on the record read as a VARIANT ------------------------------------------


def _exact_object(checks: ObjectChecks, document: Column, path: list[str]) -> Column:
    from pyspark.sql import functions as F

    reasons = [_exact(p, document, [*path, p.name]) for p in checks.properties]
    for name in checks.extra_required:
        pointer = "/".join(["", *path, name])
        reasons.append(_exact(Property(name, pointer, True, ValueChecks("any")), document,
                              [*path, name]))  # fmt: skip
    return F.coalesce(*reasons) if reasons else F.lit(None).cast("string")


def _exact(prop: Property, document: Column, path: list[str]) -> Column:
    """Whether the property is there, null where it may not be, and of its JSON type."""
    from pyspark.sql import functions as F

    checks = prop.value
    value = F.variant_get(document, "$" + "".join(f"['{name}']" for name in path), "variant")
    kind = F.schema_of_variant(value)
    missing = F.lit(f"{prop.pointer}: required property is missing")
    reason = F.when(value.isNull(), missing if prop.required else F.lit(None).cast("string"))
    if checks.kind == "any":
        return reason
    expected = f' is not of type "{checks.kind}"'
    shown = F.to_json(value)
    reason = reason.when(
        kind == "VOID",
        F.lit(None).cast("string") if checks.nullable else F.lit(f"{prop.pointer}: null{expected}"),
    ).when(~kind.rlike(_VARIANT_TYPES[checks.kind]),
           F.concat(F.lit(f"{prop.pointer}: "), shown, F.lit(expected)))  # fmt: skip
    if checks.kind == "object":
        assert checks.object is not None
        return reason.otherwise(_exact_object(checks.object, document, path))
    if checks.kind == "array" and checks.items is not None and checks.items.kind != "any":
        item = f' has an item not of type "{checks.items.kind}"'
        return reason.when(~kind.rlike(_ITEM_TYPES[checks.items.kind]),
                           F.concat(F.lit(f"{prop.pointer}: "), shown, F.lit(item)))  # fmt: skip
    return reason
