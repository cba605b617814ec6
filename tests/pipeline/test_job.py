"""The pipeline on real Spark (local[2]) against a real Kafka broker, input with known times."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ssegate.kafka.topics import KafkaMessage
from ssegate.pipeline.config import Pipeline, parse_pipeline
from ssegate.pipeline.job import start_pipeline
from ssegate.pipeline.records import ID_HEADER
from ssegate_lab.broker import BrokerInfo

from .records import consume, produce, reading, unique

READING_SCHEMA = {
    "type": "object",
    "required": ["device", "tenant", "temperature", "ts"],
    "properties": {
        "device": {"type": "string"},
        "tenant": {"type": "string"},
        "temperature": {"type": "number"},
        "ts": {"type": "string"},
    },
}


@dataclass(frozen=True)
class Topics:
    raw: str
    dead: str
    events: str
    alerts: str
    devices: str


def sensors(topics: Topics, checkpoint: Path, bootstrap: str, validate: str = "python") -> Pipeline:
    return parse_pipeline(sensors_document(topics, checkpoint, bootstrap, validate))


def sensors_document(
    topics: Topics, checkpoint: Path, bootstrap: str, validate: str = "python"
) -> dict[str, Any]:
    """The pipeline file of :func:`sensors`, as YAML loads it."""
    return {
        "name": "sensors-test",
        "bootstrap": bootstrap,
        "checkpoint": str(checkpoint),
        "catalogs": {"schemas": {"type": "inline", "options": {
            "subjects": {"reading": {"schema": json.dumps(READING_SCHEMA)}}}}},
        "sources": {"readings": {
            "kafka": {"topic": topics.raw, "starting_offsets": "earliest"},
            "model": {"model": "json", "catalog": {"schemas": [{"subject": "reading"}]}},
            "fields": "device STRING, tenant STRING, temperature DOUBLE, ts TIMESTAMP",
            "event_time": "ts",
            "watermark": "5 seconds",
            "dead_letter": topics.dead,
            "validate": validate,
        }},
        "sinks": {
            "events": {
                "from": "readings",
                "window": {"duration": "10 seconds", "group_by": ["tenant", "device"],
                           "aggregates": {"count": "count(*)", "avg": "avg(temperature)",
                                          "max": "max(temperature)"}},
                "topic": topics.events, "key": "device", "headers": {"tenant": "tenant"},
            },
            "alerts": {
                "from": "readings", "where": "temperature > 30",
                "select": {"device": "device", "celsius": "temperature",
                           "at": "date_format(ts, 'HH:mm:ss')"},
                "topic": topics.alerts, "key": "upper(device)",
                "headers": {"tenant": "tenant", "kind": "'overheat'"},
            },
            "devices": {
                "from": "readings",
                "latest": {"key": "device", "silent_after": "30 seconds"},
                "select": {"device": "device", "temperature": "temperature"},
                "topic": topics.devices, "compacted": True, "headers": {"tenant": "tenant"},
            },
        },
    }  # fmt: skip


def run_to_end(spark: SparkSession, pipeline: Pipeline) -> None:
    queries = start_pipeline(spark, pipeline, trigger="available_now")
    for query in queries:
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()


FIRST_HALF = [
    reading("d1", "acme", 20.0, 1),
    reading("d2", "globex", 25.0, 2),
    b"not json at all",
    reading("d1", "acme", 22.0, 3),
]
SECOND_HALF = [
    reading("d2", "globex", 31.0, 4),
    reading("d3", "acme", "hot", 5),
    reading("d1", "acme", 35.0, 12),
    reading("d1", "acme", 21.0, 100),  # moves the watermark to 95 s: closes [0,10) and [10,20)
]


@pytest.fixture(scope="module", params=["python", "jvm"])
def outcome(
    spark: SparkSession,
    kafka_broker: BrokerInfo,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> dict[str, list[KafkaMessage]]:
    """The pipeline run on the first half, stopped, restarted on its checkpoint for the rest;
    its records checked by the model in Python, then by Spark's own expressions."""
    topics = Topics(*(unique(n) for n in ("raw", "dead", "events", "alerts", "devices")))
    checkpoint = tmp_path_factory.mktemp("checkpoint")
    pipeline = sensors(topics, checkpoint, kafka_broker.bootstrap, request.param)
    produce(kafka_broker.bootstrap, topics.raw, FIRST_HALF)
    run_to_end(spark, pipeline)
    produce(kafka_broker.bootstrap, topics.raw, SECOND_HALF)
    run_to_end(spark, pipeline)
    return {
        name: consume(kafka_broker.bootstrap, getattr(topics, name))
        for name in ("dead", "events", "alerts", "devices")
    }


def _json(message: KafkaMessage) -> Any:
    assert message.value is not None
    return json.loads(message.value)


def test_windowed_aggregates_equal_the_values_computed_by_hand(
    outcome: dict[str, list[KafkaMessage]],
) -> None:
    got = sorted(
        ((m.key, m.header("tenant"), _json(m)) for m in outcome["events"]),
        key=lambda e: (e[2]["window_start"], e[0]),
    )
    assert [(key, tenant, value["count"], value["avg"], value["max"], value["window_start"][11:19])
            for key, tenant, value in got] == [
        (b"d1", b"acme", 2, 21.0, 22.0, "00:00:00"),
        (b"d2", b"globex", 2, 28.0, 31.0, "00:00:00"),
        (b"d1", b"acme", 1, 35.0, 35.0, "00:00:10"),
    ]  # fmt: skip


def test_filtered_records_carry_the_derived_key_value_and_headers(
    outcome: dict[str, list[KafkaMessage]],
) -> None:
    alerts = sorted(outcome["alerts"], key=lambda m: m.key or b"")
    assert [(m.key, _json(m), m.header("tenant"), m.header("kind")) for m in alerts] == [
        (b"D1", {"device": "d1", "celsius": 35.0, "at": "00:00:12"}, b"acme", b"overheat"),
        (b"D2", {"device": "d2", "celsius": 31.0, "at": "00:00:04"}, b"globex", b"overheat"),
    ]


def test_invalid_records_land_in_the_dead_letter_topic_with_their_reason_and_origin(
    outcome: dict[str, list[KafkaMessage]],
) -> None:
    dead = outcome["dead"]
    assert [m.value for m in dead] == [FIRST_HALF[2], SECOND_HALF[1]]
    first, second = dead
    assert (first.header("ssegate-reason") or b"").startswith(b"not JSON")
    assert b"/temperature" in (second.header("ssegate-reason") or b"")
    assert [m.header("ssegate-offset") for m in dead] == [b"2", b"5"]
    assert {m.header("ssegate-partition") for m in dead} == {b"0"}
    assert all(m.key == b"raw" for m in dead)


def test_the_latest_state_per_device_ends_with_a_tombstone_for_a_silent_device(
    outcome: dict[str, list[KafkaMessage]],
) -> None:
    latest: dict[bytes | None, KafkaMessage] = {}
    for message in outcome["devices"]:
        latest[message.key] = message
    assert set(latest) == {b"d1", b"d2"}
    assert _json(latest[b"d1"]) == {"device": "d1", "temperature": 21.0}
    assert latest[b"d2"].value is None
    assert latest[b"d2"].header("tenant") == b"globex"


def test_every_record_carries_an_id_that_the_input_alone_decides(
    outcome: dict[str, list[KafkaMessage]],
) -> None:
    raw = (outcome["dead"][0].header("ssegate-topic") or b"").decode()

    def ids(name: str) -> set[str]:
        return {(m.header(ID_HEADER) or b"").decode() for m in outcome[name]}

    assert ids("dead") == {f"readings.dead-letter@{raw}/0/2", f"readings.dead-letter@{raw}/0/5"}
    assert ids("alerts") == {f"alerts@{raw}/0/4", f"alerts@{raw}/0/6"}  # the input's offsets
    assert ids("events") == {  # window start and end (epoch ms), then the group
        'events@1704067200000-1704067210000/["acme","d1"]',
        'events@1704067200000-1704067210000/["globex","d2"]',
        'events@1704067210000-1704067220000/["acme","d1"]',
    }
    assert ids("devices") == {  # the newest reading per device of each run, then d2's tombstone
        f"devices@{raw}/0/3", f"devices@{raw}/0/1", f"devices@{raw}/0/4", f"devices@{raw}/0/7",
        "devices@silent/1704067204000/d2",
    }  # fmt: skip
    assert all(len(outcome[name]) == len(ids(name)) for name in outcome)
