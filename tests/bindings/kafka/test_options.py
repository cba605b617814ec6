"""What the kafka bindings make of their options, read off the built objects (no broker)."""

from __future__ import annotations

from typing import Any, TypeVar

from ssegate.bindings.kafka import cache_server, client
from ssegate.catalogs import CatalogSet
from ssegate.config.model import Binding
from ssegate.engine.context import ExitKind
from ssegate.telemetry.metrics import Metrics

T = TypeVar("T")


class Context:
    def __init__(self, exits: dict[str, Any]) -> None:
        self.exits = exits
        self.metrics = Metrics()
        self.catalogs = CatalogSet()

    def exit(self, name: str, kind: ExitKind[T], where: str) -> T:
        return kind.require(self.exits[name], where, repr(name))

    def binding(self, name: str) -> Binding:
        return Binding(name, "tcp", "client")

    def worker_link(self, binding: str) -> None:
        return None  # one worker


def test_servers_and_sasl_become_the_librdkafka_configuration() -> None:
    options = {
        "servers": ["kafka-1:9092", "kafka-2:9092"],
        "sasl": {"mechanism": "scram-sha-256", "username": "alice", "password": "s3cret"},
    }
    built = client.build(Binding("k", "kafka", "client", options, exit="tcp"), Context({}))  # type: ignore[arg-type]
    config = built.common_config()
    assert config["bootstrap.servers"] == "kafka-1:9092,kafka-2:9092"
    assert (config["security.protocol"], config["sasl.mechanism"]) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-256",
    )
    assert (config["sasl.username"], config["sasl.password"]) == ("alice", "s3cret")
    plain = client.build(Binding("k", "kafka", "client", {"servers": ["k:1"]}), Context({}))  # type: ignore[arg-type]
    assert "security.protocol" not in plain.common_config()


def test_bootstrap_cache_bounds_and_default_offsets_reach_the_cache_server() -> None:
    options = {
        "bootstrap": ["events"],
        "cache": {"max-bytes": 4096, "max-age": 60, "repeat-horizon": 500},
        "topics": [{"name": "events", "defaultOffset": "live"}, {"name": "devices"}],
    }
    kafka = client.KafkaClient("k", ("k:1",))
    binding = Binding("c", "kafka", "cache_server", options, exit="k")
    built = cache_server.build(binding, Context({"k": kafka}))  # type: ignore[arg-type]
    assert built.bootstrap == ("events",)
    assert (built.bounds.max_bytes, built.bounds.max_age) == (4096, 60.0)
    assert built.bounds.repeat_horizon == 500
    assert built._fetcher.records.repeat_horizon == 500
    assert built.default_offsets == {"events": "live", "devices": "historical"}
