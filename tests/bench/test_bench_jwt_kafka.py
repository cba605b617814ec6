"""The jwt and kafka bench scenarios run end to end at a tiny size on the session's broker.

The figures come from full runs (``docs/performance.md``); these keep the harness working and
check that the fields the docs quote are there and that events really arrived.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ssegate.cache import OFFLINE
from ssegate.catalogs import build_catalogs
from ssegate.config.loader import load_config
from ssegate.models.topics import TopicModels
from ssegate_lab.bench.cli import add_bench_parser
from ssegate_lab.bench.jwt import run_jwt, run_verify
from ssegate_lab.bench.kafka import run_kafka
from ssegate_lab.bench.kafka_rig import stamped_values, write_kafka_gateway_config
from ssegate_lab.bench.kafkasse import ensure_kafkasse
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker


def test_jwt_scenario_authorizes_every_stream_cold_and_warm(kafka_broker: BrokerInfo) -> None:
    result = run_jwt(6, broker_info=kafka_broker)
    for round_name in ("cold", "warm"):
        measured = result[round_name]
        assert (measured["opened"], measured["failed"]) == (6, 0), measured["errors"]
        assert measured["connects_per_s"] > 0
        assert measured["connect_ms"]["p99"] >= measured["connect_ms"]["p50"] > 0
        assert measured["machine_busy_share"] >= 0
        assert measured["client_cpu_share"] >= 0 and "client_saturated" in measured
    assert result["alg"] == "ES256"
    assert isinstance(result["rss_bytes_per_authorized_stream"], int)
    assert result["verification_us"]["ec"]["cold_us"] > result["verification_us"]["ec"]["warm_us"]


def test_jwt_verify_only_times_each_algorithm_cold_and_warm_over_every_run() -> None:
    result = run_verify(count=4, runs=3)
    assert set(result["cold_us"]) == {"RS256", "ES256", "EdDSA"}
    for alg, cold in result["cold_us"].items():
        warm = result["warm_us"][alg]
        assert len(cold["runs"]) == len(warm["runs"]) == 3
        assert sorted(cold["runs"])[1] == cold["median"] > warm["median"]


def test_kafka_scenario_delivers_every_produced_message_to_every_client(
    kafka_broker: BrokerInfo,
) -> None:
    result = run_kafka(
        [1, 3], [200.0], duration=1.0, idle_clients=4, kafkasse_clients=[],
        broker_info=kafka_broker,
    )  # fmt: skip
    assert result["idle"]["opened"] == 4
    assert isinstance(result["idle"]["gateway_bytes_per_idle_stream"], int)
    cases = result["cases"]
    assert [(c["server"], c["clients"]) for c in cases] == [("ssegate", 1), ("ssegate", 3)]
    for case in cases:
        assert case["produced"] == 200
        assert case["received"] == case["expected"] == 200 * case["clients"]
        assert (case["distinct"], case["missing"], case["duplicates"]) == (case["expected"], 0, 0)
        assert case["gaps"] == 0 and case["client_saturated"] is False
        assert case["delivered_events_per_s"] > 0
        upper, lower = case["latency_ms"]["p99"], case["latency_ms_lower_bound"]["p99"]
        assert upper is not None and lower is not None and lower <= upper
        assert case["cpu_s"]["server"] >= 0 and case["machine_busy_share"] >= 0


def test_kafka_scenario_with_two_workers_delivers_every_message_to_every_client(
    kafka_broker: BrokerInfo,
) -> None:
    result = run_kafka(
        [6], [100.0], duration=1.0, idle_clients=0, kafkasse_clients=[],
        broker_info=kafka_broker, workers=2,
    )  # fmt: skip
    assert result["gateway_workers"] == 2
    [case] = result["cases"]
    assert case["received"] == case["expected"] == 600
    assert case["gaps"] == 0


@pytest.mark.parametrize("model", ["json", "avro"])
def test_kafka_scenario_with_a_topic_model_delivers_every_event_without_gaps(
    kafka_broker: BrokerInfo, model: str
) -> None:
    result = run_kafka(
        [2], [100.0], duration=1.0, idle_clients=0, kafkasse_clients=[],
        broker_info=kafka_broker, model=model,
    )  # fmt: skip
    assert result["model"] == model
    [case] = result["cases"]
    assert case["produced"] == 100
    assert case["received"] == case["expected"] == 200
    assert case["gaps"] == 0


@pytest.mark.parametrize(
    ("model", "binding"),
    [("json", "south_kafka_cache_server"), ("avro", "north_kafka_cache_client")],
)
def test_the_bench_model_checks_its_topics_and_accepts_what_the_bench_produces(
    tmp_path: Path, model: str, binding: str
) -> None:
    ports = write_kafka_gateway_config(tmp_path, "127.0.0.1:9", ["bench-a"], model=model)
    config = load_config(ports.config)
    [topic] = config.bindings[binding].options["topics"]
    models = TopicModels.build(topic, "topics[0]", build_catalogs(config, str))
    assert models.value is not None
    value = stamped_values(model)(123, 4)
    assert models.check(None, value) is None
    assert models.value_text(value) == '{"t":123,"n":4}'
    assert models.check(None, b'{"t":123}') is not None


def test_kafkasse_install_without_npm_reports_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(OFFLINE)  # nothing can be installed without npm anyway
    assert ensure_kafkasse(tmp_path / "kafkasse") == "node or npm is not on PATH"


def test_bench_cli_accepts_the_jwt_and_kafka_options() -> None:
    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers())
    jwt = parser.parse_args(["bench", "jwt", "--clients", "20", "--tls"])
    assert (jwt.clients, jwt.tls, jwt.key_type) == (20, True, "ec")
    kafka = parser.parse_args(["bench", "kafka", "--clients", "1,10", "--kafkasse-clients", "none"])
    assert (kafka.clients, kafka.kafkasse_clients, kafka.rate) == ([1, 10], [], [5000, 1000, 200])
    assert (kafka.model, kafka.workers) == ("none", 1)
    assert parser.parse_args(["bench", "kafka", "--workers", "2"]).workers == 2
    assert parser.parse_args(["bench", "kafka", "--model", "avro"]).model == "avro"
