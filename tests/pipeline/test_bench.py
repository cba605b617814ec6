"""The pipeline benchmark at a tiny size, on the shared Spark session and Kafka broker."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from ssegate_lab.bench.pipeline import run
from ssegate_lab.broker import BrokerInfo


@pytest.mark.timeout(300)  # five Spark queries: about 100 s alone, more when the cores are busy
def test_pipeline_bench_reports_rates_and_latency_with_a_micro_batch_and_a_continuous_trigger(
    spark: SparkSession, kafka_broker: BrokerInfo
) -> None:
    results = run(
        30_000,
        1,
        validations=("python", "jvm"),
        triggers=("0 seconds", "continuous 1 second"),
        latency_seconds=2.0,
        latency_rate=100,
        spark=spark,
        bootstrap=kafka_broker.bootstrap,
    )

    assert results["produce"]["records"] == 30_000
    stateless = results["stateless"]["runs"][0]
    # 11 of every 250 readings are at or below 16 °C: the bench's `where` drops them.
    assert stateless["sink_records"] == 28_680
    assert results["stateless_jvm"]["runs"][0]["sink_records"] == 28_680
    assert results["stateless"]["median_records_per_s"] > 0
    assert stateless["batches"][0]["rows"] == 30_000
    assert 0 <= stateless["machine_busy_share"] <= 1
    assert len(stateless["load_1m"]) == 2
    # 3 event seconds, 100 devices, a 1 s watermark: only the first second's windows closed.
    assert results["windowed"]["runs"][0]["sink_records"] == 100
    latency = results["latency"]["trigger_0"]
    assert latency["received"] >= 100
    assert 0 < latency["p50_ms"] <= latency["p99_ms"]
    assert latency["cdf_ms"]["50"] == latency["p50_ms"]
    # the same records, on to an SSE client through a gateway serving the sink topic
    sse = latency["sse"]
    assert (sse["received"], sse["duplicates"], sse["missing"]) == (latency["received"], 0, 0)
    assert 0 < sse["p50_ms"] <= sse["p99_ms"]
    assert sse["cdf_ms"]["50"] == sse["p50_ms"]
    assert sse["gateway_cpu_s"] > 0
    continuous = results["latency"]["continuous_1s"]
    # continuous mode runs the JVM checks without their Python fallback
    assert continuous["supported"] is True
    assert continuous["received"] >= 100
    assert (continuous["sse"]["duplicates"], continuous["sse"]["missing"]) == (0, 0)
