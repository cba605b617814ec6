"""The example pipeline's generator source, run for a few seconds; expression errors."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from ssegate.config.errors import ConfigError
from ssegate.kafka.broker import BrokerInfo
from ssegate.pipeline.config import parse_pipeline
from ssegate.pipeline.job import start_pipeline

from .records import consume, unique

EXAMPLE = Path(__file__).parents[2] / "examples" / "pipeline" / "sensors.yaml"


def _example(bootstrap: str, checkpoint: Path, sinks: list[str]) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data.update(bootstrap=bootstrap, checkpoint=str(checkpoint))
    data["sources"]["readings"]["generator"].update(rate=400, invalid_ratio=0.1)
    data["sources"]["readings"]["dead_letter"] = unique("dead")
    data["sinks"] = {name: data["sinks"][name] for name in sinks}
    for sink in data["sinks"].values():
        sink["topic"] = unique(sink["topic"])
    return data


def test_generated_readings_flow_to_their_topic_and_broken_ones_to_the_dead_letters(
    spark: SparkSession, kafka_broker: BrokerInfo, tmp_path: Path
) -> None:
    data = _example(kafka_broker.bootstrap, tmp_path, ["readings"])
    queries = start_pipeline(spark, parse_pipeline(data), trigger=1.0)
    try:
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline
            and min((q.lastProgress or {}).get("batchId", -1) for q in queries) < 1
        ):
            time.sleep(0.5)
    finally:
        for query in queries:
            query.stop()
    readings = consume(kafka_broker.bootstrap, data["sinks"]["readings"]["topic"])
    dead = consume(kafka_broker.bootstrap, data["sources"]["readings"]["dead_letter"])
    assert len(readings) > 100
    first = json.loads(readings[0].value or b"")
    assert set(first) == {"device", "tenant", "temperature", "humidity", "ts"}
    assert readings[0].key == first["device"].encode()
    assert readings[0].header("tenant") == first["tenant"].encode()
    assert dead, "about a tenth of the generated readings are broken"
    assert {m.header("ssegate-topic") for m in dead} == {b"generator:readings"}
    assert all(m.header("ssegate-reason") for m in dead)


def test_an_expression_spark_cannot_resolve_is_a_config_error_at_its_path(
    spark: SparkSession, kafka_broker: BrokerInfo, tmp_path: Path
) -> None:
    data = _example(kafka_broker.bootstrap, tmp_path, ["alerts"])
    data["sinks"]["alerts"]["where"] = "temprature > 30"
    with pytest.raises(ConfigError) as caught:
        start_pipeline(spark, parse_pipeline(data))
    assert caught.value.path == "sinks.alerts.where"
    assert "temprature" in caught.value.message
    assert not spark.streams.active
