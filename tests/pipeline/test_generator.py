"""The example pipeline's generator source, run for a few seconds; the story its sensors tell;
expression errors."""

from __future__ import annotations

import itertools
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ssegate.config.errors import ConfigError
from ssegate.pipeline.config import Generator, parse_pipeline
from ssegate.pipeline.generator import sensor_records
from ssegate.pipeline.job import start_pipeline
from ssegate_lab.broker import BrokerInfo

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
    assert set(first) == {"device", "tenant", "room", "temperature", "humidity", "ts"}
    assert readings[0].key == first["device"].encode()
    assert readings[0].header("tenant") == first["tenant"].encode()
    assert dead, "about a tenth of the generated readings are broken"
    assert {m.header("ssegate-topic") for m in dead} == {b"generator:readings"}
    assert all(m.header("ssegate-reason") for m in dead)


def test_the_sensors_tell_the_same_story_on_every_run(spark: SparkSession) -> None:
    """The example's generator over one 4-minute "day", computed as a batch: each room keeps to
    its own band, the office follows the day, the lab drifts, and only server rooms pass 30 °C,
    each tenant's within its own turn (from a sixth of a day after the start, one tenant after
    the other, 40 s each, every half day)."""
    generator = Generator(rate=24, devices=12, tenants=("acme", "globex", "initech"))
    rows = spark.range(24 * 240).select(
        F.col("id").alias("value"), F.timestamp_seconds(F.col("id") / 24).alias("timestamp")
    )
    seconds: dict[str, list[float]] = defaultdict(list)  # room → reading times
    temperatures: dict[str, list[float]] = defaultdict(list)
    over: dict[str, list[float]] = defaultdict(list)  # tenant → times of readings over 30 °C
    rooms = {}
    for record in sensor_records(rows, "readings", generator).select("value", "offset").collect():
        reading = json.loads(record.value)
        second = record.offset / 24
        rooms[reading["device"]] = (reading["tenant"], reading["room"])
        seconds[reading["room"]].append(second)
        temperatures[reading["room"]].append(reading["temperature"])
        if reading["temperature"] > 30:
            assert reading["room"] == "server room", reading
            over[reading["tenant"]].append(second)
    assert rooms["device-000"] == ("acme", "server room")
    assert rooms["device-004"] == ("globex", "office")
    assert rooms["device-011"] == ("initech", "warehouse")

    def mean(room: str, start: float, end: float) -> float:
        pairs = zip(seconds[room], temperatures[room], strict=True)
        return statistics.fmean(t for s, t in pairs if start <= s < end)

    bands = [mean(room, 0, 240) for room in ("server room", "office", "lab", "warehouse")]
    assert all(warmer - cooler > 3 for warmer, cooler in itertools.pairwise(bands)), bands
    assert mean("office", 55, 65) - mean("office", 175, 185) > 3  # warm noon, cold midnight
    assert mean("lab", 230, 240) - mean("lab", 0, 10) > 2  # drifting up
    for turn, tenant in enumerate(("acme", "globex", "initech")):
        start = 40 + 40 * turn
        assert over[tenant], tenant
        assert all(start < s < start + 40 or start + 120 < s < start + 160 for s in over[tenant])


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
