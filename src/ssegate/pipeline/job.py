"""A pipeline as Spark Structured Streaming queries: one per sink, one per dead-letter topic.

Every sink is its own query with its own checkpoint (``<checkpoint>/<sink name>``; a source's
dead-letter query uses ``<checkpoint>/<source>.dead-letter``), reading its source from where that
checkpoint left off. A query's steps, in order: the source's records, checked by its model
(:mod:`ssegate.pipeline.records`); ``where``; then either ``window`` (a windowed aggregation over
the watermark, emitted once per window when the watermark passes its end: output mode append),
``latest`` (:mod:`ssegate.pipeline.latest`, output mode update) or nothing; then the Kafka
record: ``key``, a JSON ``value`` of the ``select`` expressions, and ``headers``.

Each query runs with its sink's ``trigger``, else the pipeline's (:class:`~ssegate.pipeline.
config.Trigger`), unless :func:`start_pipeline` is given one for all. Spark's continuous and
real-time modes run only stateless queries: a window or ``latest`` sink with one fails to start
with a ConfigError at its ``trigger`` path.

Spark's Kafka sink is at-least-once: after a crash, or a task retried because its executor was
lost, part of a micro-batch may be written again. Every record therefore carries an
``ssegate-id`` header that depends on the input alone: the sink's name and the input record's
coordinates (:func:`~ssegate.pipeline.records.input_id`), or the window and group
(:func:`_windowed`), or the key and time of a tombstone (:mod:`ssegate.pipeline.latest`). A
record written twice is written under one id, which a reader skips the second time to see every
record exactly once.
Every record also has a key, so a consumer that keeps the latest value per key (a compacted
topic, the gateway's cache) ends in the same state either way.

:func:`start_pipeline` creates missing sink topics first (compacted when the sink says so).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from ssegate.catalogs import CatalogSet, build_catalog
from ssegate.config.errors import ConfigError
from ssegate.pipeline.config import Pipeline, Sink, Source, Window
from ssegate.pipeline.config import Trigger as TriggerSpec
from ssegate.pipeline.latest import latest_per_key
from ssegate.pipeline.records import (
    checked_records,
    dead_letters,
    field_names,
    id_header,
    input_id,
    valid_rows,
)
from ssegate.pipeline.topics import TopicSpec, ensure_topics
from ssegate.pipeline.validation import build_record_model
from ssegate.telemetry.log import event

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

Built = TypeVar("Built")
Trigger = Literal["available_now"] | float | TriggerSpec | None
"""For every query, instead of the file's: ``available_now``: process what is there, then stop;
seconds: one micro-batch per interval (0: back to back); ``None``: each query's own."""


@dataclass(frozen=True)
class Output:
    """One query to start: its name, its Kafka records, the topic and the output mode."""

    name: str
    records: DataFrame
    topic: str
    mode: str
    checkpoint: Path
    path: str
    """The YAML path of what the query comes from."""
    trigger: TriggerSpec


def build_outputs(
    spark: SparkSession,
    pipeline: Pipeline,
    bootstrap: str,
    checkpoint: Path,
    *,
    validate: str | None = None,
    trigger: Trigger = None,
) -> list[Output]:
    """Every query of the pipeline, built and analysed; a bad expression is a ConfigError.
    ``validate`` (``python``, ``jvm``) replaces every source's own; ``trigger`` is the one
    :func:`start_pipeline` is given for every query."""
    catalogs = CatalogSet(
        {
            name: build_catalog(component, lambda p: str(pipeline.base / p))
            for name, component in pipeline.catalogs.items()
        }
    )
    outputs: list[Output] = []
    checked: dict[str, DataFrame] = {}
    rows: dict[str, DataFrame] = {}
    for name, source in pipeline.sources.items():
        topic = source.kafka.topic if source.kafka else None
        model = build_record_model(source.model, f"sources.{name}.model", catalogs, topic)
        python = not _low_latency(pipeline, name, trigger)
        jvm = (validate or source.validate) == "jvm"
        checked[name] = checked_records(spark, source, model, bootstrap, jvm=jvm, python=python)
        rows[name] = _analysed(partial(valid_rows, checked[name], source), f"sources.{name}.fields")
        if source.dead_letter:
            outputs.append(
                Output(
                    name=f"{pipeline.name}.{name}.dead-letter",
                    records=dead_letters(checked[name], f"{name}.dead-letter"),
                    topic=source.dead_letter,
                    mode="append",
                    checkpoint=checkpoint / f"{name}.dead-letter",
                    path=f"sources.{name}.dead_letter",
                    trigger=pipeline.trigger,
                )
            )
    for name, sink in pipeline.sinks.items():
        source = pipeline.sources[sink.source]
        records, mode = _sink_records(rows[sink.source], source, name, sink)
        outputs.append(
            Output(
                f"{pipeline.name}.{name}",
                records,
                sink.topic,
                mode,
                checkpoint / name,
                f"sinks.{name}",
                sink.trigger or pipeline.trigger,
            )
        )
    return outputs


def start_pipeline(
    spark: SparkSession,
    pipeline: Pipeline,
    *,
    bootstrap: str | None = None,
    checkpoint: Path | None = None,
    trigger: Trigger = None,
    validate: str | None = None,
) -> list[StreamingQuery]:
    """Create missing topics and start every query of the pipeline."""
    bootstrap = bootstrap or pipeline.bootstrap
    checkpoint = checkpoint or pipeline.checkpoint
    outputs = build_outputs(
        spark, pipeline, bootstrap, checkpoint, validate=validate, trigger=trigger
    )
    ensure_topics(bootstrap, _topic_specs(pipeline))
    queries: list[StreamingQuery] = []
    try:
        for output in outputs:
            queries.append(_start(output, bootstrap, trigger))
    except BaseException:
        for query in queries:
            query.stop()
        raise
    return queries


def _low_latency(pipeline: Pipeline, source: str, override: Trigger) -> bool:
    """Whether a query reading ``source`` runs continuous or real-time: then the source's
    checks are built of JVM operators only, for every query reading it (the dead-letter
    query must judge each record as the sinks do)."""
    own = [s.trigger or pipeline.trigger for s in pipeline.sinks.values() if s.source == source]
    triggers = [_as_spec(override, t) for t in (*own, pipeline.trigger)]
    return any(t.kind in ("continuous", "real-time") for t in triggers)


def effective_trigger(output: Output, override: Trigger) -> TriggerSpec:
    """The trigger a query runs with: ``override`` (the command line's), else its own."""
    return _as_spec(override, output.trigger)


def _as_spec(override: Trigger, own: TriggerSpec) -> TriggerSpec:
    if override is None:
        return own
    if isinstance(override, TriggerSpec):
        return override
    if override == "available_now":
        return TriggerSpec("available-now")
    return TriggerSpec("interval", float(override))


def batch_interval(pipeline: Pipeline, override: Trigger) -> float | None:
    """The pipeline's micro-batch interval in seconds (what a stop waits between), if any."""
    if override is not None and not isinstance(override, TriggerSpec):
        return None if override == "available_now" else float(override) or None
    trigger = override or pipeline.trigger
    return trigger.seconds or None if trigger.kind == "interval" else None


def _start(output: Output, bootstrap: str, override: Trigger) -> StreamingQuery:
    from pyspark.errors import PySparkException

    trigger = effective_trigger(output, override)
    mode = output.mode
    if trigger.kind == "real-time" and mode == "append":
        mode = "update"  # what real-time mode asks for; the same rows for a stateless query
    writer = (
        output.records.writeStream.format("kafka")
        .queryName(output.name)
        .outputMode(mode)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output.topic)
        .option("checkpointLocation", str(output.checkpoint))
    )
    seconds = f"{trigger.seconds:g} seconds"
    if trigger.kind == "available-now":
        writer = writer.trigger(availableNow=True)
    elif trigger.kind == "continuous":
        writer = writer.trigger(continuous=seconds)
    elif trigger.kind == "real-time":
        writer = writer.trigger(realTime=seconds)  # type: ignore[call-overload]  # 4.1's stubs lag
    else:
        writer = writer.trigger(processingTime=seconds)
    try:
        query = writer.start()
    except PySparkException as exc:
        raise ConfigError(output.path, _first_line(str(exc))) from None
    event(
        "pipeline.query.started",
        query=output.name,
        topic=output.topic,
        checkpoint=output.checkpoint,
        trigger=f"{trigger.kind} {trigger.seconds:g}s",
    )
    return query


def _sink_records(rows: DataFrame, source: Source, name: str, sink: Sink) -> tuple[DataFrame, str]:
    from pyspark.sql import functions as F

    path = f"sinks.{name}"
    if sink.where:
        rows = _analysed(lambda: rows.where(F.expr(sink.where or "")), f"{path}.where")
    select = dict(sink.select or {})
    if sink.window is not None:
        rows = _windowed(rows, source, name, sink.window, f"{path}.window")
        mode = "append"
        fields = [column for column in rows.columns if column != "_id"]
    else:
        mode = "update" if sink.latest else "append"
        fields = field_names(rows)
        rows = rows.withColumn("_id", input_id(name, F.col("_topic"), F.col("_partition"),
                                               F.col("_offset")))  # fmt: skip
    if not select:
        select = {field: f"`{field}`" for field in fields}
    value = F.to_json(
        F.struct(
            *[
                _expr(rows, text, f"{path}.select.{field}").alias(field)
                for field, text in select.items()
            ]
        )
    )
    headers = [
        F.struct(
            F.lit(header).alias("key"),
            _expr(rows, text, f"{path}.headers.{header}").cast("string").alias("value"),
        )
        for header, text in sink.headers.items()
    ]
    key = _expr(rows, sink.key, f"{path}.key").cast("string") if sink.key else F.lit(None)
    if sink.latest is not None:
        assert source.event_time is not None
        header_text = F.to_json(F.array(*headers)) if headers else F.lit("[]")
        rows = latest_per_key(rows, sink.latest, source.event_time, name, key, value,
                              header_text)  # fmt: skip
        headers_out = F.concat(
            _headers_from_json(F.col("headers")), F.array(id_header(F.col("id")))
        )
        return _kafka_columns(F.col("key"), F.col("value"), headers_out, rows), mode
    header_array = F.array(*[_binary_header(h) for h in headers], id_header(F.col("_id")))
    return _kafka_columns(key.cast("string"), value, header_array, rows), mode


def _windowed(rows: DataFrame, source: Source, name: str, window: Window, path: str) -> DataFrame:
    """One row per window and group, once the watermark passes the window's end.

    Its id is ``<sink>@<start>-<end>/<the group's values as a JSON array>``, times in epoch ms.
    """
    from pyspark.sql import functions as F

    assert source.event_time is not None
    groups = [_expr(rows, g, f"{path}.group_by") for g in window.group_by]
    aggregates = [
        _expr(rows, text, f"{path}.aggregates.{label}").alias(label)
        for label, text in window.aggregates.items()
    ]
    windows = F.window(source.event_time, window.duration, window.slide).alias("_window")

    def build() -> DataFrame:
        grouped = rows.groupBy(windows, *groups).agg(*aggregates)
        group_values = [
            F.col(f"`{c}`").cast("string") for c in grouped.columns[1 : 1 + len(groups)]
        ]
        start, end = F.col("_window.start"), F.col("_window.end")
        record_id = F.concat(
            F.lit(f"{name}@"), F.unix_millis(start).cast("string"), F.lit("-"),
            F.unix_millis(end).cast("string"), F.lit("/"), F.to_json(F.array(*group_values)),
        )  # fmt: skip
        return (
            grouped.withColumn("window_start", start)
            .withColumn("window_end", end)
            .withColumn("_id", record_id)
            .drop("_window")
        )

    return _analysed(build, path)


def _kafka_columns(key: Column, value: Column, headers: Column, rows: DataFrame) -> DataFrame:
    return rows.select(
        key.cast("binary").alias("key"),
        value.cast("binary").alias("value"),
        headers.alias("headers"),
    )


def _binary_header(header: Column) -> Column:
    from pyspark.sql import functions as F

    return F.struct(header["key"].alias("key"), header["value"].cast("binary").alias("value"))


def _headers_from_json(text: Column) -> Column:
    from pyspark.sql import functions as F

    parsed = F.from_json(text, "array<struct<key:string,value:string>>")
    return F.transform(parsed, _binary_header)


def _expr(rows: DataFrame, text: str, path: str) -> Column:
    """``text`` as a column of ``rows``; a parse or analysis error names ``path``."""
    from pyspark.sql import functions as F

    column = _analysed(lambda: F.expr(text), path)
    _analysed(lambda: rows.select(column), path)
    return column


def _analysed(build: Callable[[], Built], path: str) -> Built:
    """``build()``; a Spark parse or analysis error becomes a ConfigError at ``path``."""
    from pyspark.errors import PySparkException

    try:
        return build()
    except PySparkException as exc:
        raise ConfigError(path, _first_line(str(exc))) from None


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else "invalid expression"


def _topic_specs(pipeline: Pipeline) -> list[TopicSpec]:
    specs = {
        s.dead_letter: TopicSpec(s.dead_letter) for s in pipeline.sources.values() if s.dead_letter
    }
    for sink in pipeline.sinks.values():
        specs[sink.topic] = TopicSpec(sink.topic, sink.partitions, sink.compacted)
    return list(specs.values())
