"""Rows a stateful query drops as later than its watermark are a warning and a count, never
silent (:mod:`ssegate.pipeline.progress`): the pure bookkeeping, then a real windowed query."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ssegate.pipeline.config import parse_pipeline
from ssegate.pipeline.job import start_pipeline
from ssegate.pipeline.progress import BatchLateRows, LateRows
from ssegate_lab.broker import BrokerInfo

from .records import consume, produce, unique


def test_each_batch_that_dropped_rows_is_reported_once_and_counted() -> None:
    late = LateRows()
    first = [BatchLateRows(0, 0, ""), BatchLateRows(1, 3, "1970-01-01T00:01:00.000Z")]
    assert late.observe("counts", first) == [first[1]]
    again = [*first, BatchLateRows(2, 0, "w"), BatchLateRows(3, 2, "w")]
    assert late.observe("counts", again) == [again[3]]  # batches 0 and 1 were seen
    assert late.observe("counts", again) == []
    assert late.totals == {"counts": 5}


def test_queries_are_counted_apart_and_batches_without_late_rows_count_nothing() -> None:
    late = LateRows()
    assert late.observe("copy", [BatchLateRows(0, 0, ""), BatchLateRows(1, 0, "")]) == []
    assert late.observe("counts", [BatchLateRows(0, 1, "")]) == [BatchLateRows(0, 1, "")]
    assert late.totals == {"counts": 1}


def reading(device: str, seq: int, second: int) -> bytes:
    return json.dumps({"device": device, "seq": seq, "ts": f"2024-01-01T00:{second // 60:02d}:"
                       f"{second % 60:02d}Z"}).encode()  # fmt: skip


def test_a_reading_behind_the_watermark_is_a_warning_with_the_query_and_the_count(
    spark: SparkSession, kafka_broker: BrokerInfo, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap = kafka_broker.bootstrap
    raw, counts = unique("raw"), unique("counts")
    pipeline = parse_pipeline({
        "name": "late", "bootstrap": bootstrap, "checkpoint": str(tmp_path / "checkpoint"),
        "sources": {"readings": {
            "kafka": {"topic": raw, "starting_offsets": "earliest"},
            "fields": "device STRING, seq BIGINT, ts TIMESTAMP",
            "event_time": "ts", "watermark": "1 second",
        }},
        "sinks": {"counts": {
            "from": "readings", "topic": counts, "key": "device",
            "window": {"duration": "10 seconds", "group_by": ["device"],
                       "aggregates": {"count": "count(*)"}},
        }},
    })  # fmt: skip

    def run_to_end() -> LateRows:
        queries = start_pipeline(spark, pipeline, trigger="available_now")
        for query in queries:
            query.awaitTermination(120)
            assert query.exception() is None, query.exception()
        late = LateRows()
        with caplog.at_level(logging.WARNING, logger="ssegate"):
            late.check(queries)
        return late

    produce(bootstrap, raw, [reading("d1", 0, 1), reading("d1", 1, 2), reading("d1", 2, 60)])
    assert run_to_end().totals == {}  # the watermark now stands at 59 s
    produce(bootstrap, raw, [reading("d1", 3, 5), reading("d1", 4, 61)])  # 5 s is behind it
    late = run_to_end()

    assert late.totals == {"late.counts": 1}  # queries are named <pipeline>.<sink>
    [line] = [r.getMessage() for r in caplog.records if "pipeline.late_rows" in r.getMessage()]
    assert "query=late.counts" in line and " rows=1 " in line and "00:00:59" in line
    windows = [json.loads(m.value or b"{}") for m in consume(bootstrap, counts)]
    assert [w["count"] for w in windows] == [2]  # the [0, 10) window, without the late reading
