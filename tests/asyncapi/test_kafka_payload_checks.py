"""A Kafka channel's payload and key schemas checked on a real broker, through a real gateway.

Mirrors ``test_kafka_round_trip.py`` with documents written for the test: the SSE channel
``/orders`` maps onto the Kafka channel whose address is the topic, and that channel's message
has a payload schema and a Kafka key schema. Valid messages reach the SSE client; a value that
breaks the payload schema and a key that breaks the key schema never do, and each is logged and
counted in the cache server's ``ssegate.kafka.invalid_messages``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from tests.test_sse_kafka_models import Gateway

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

ORDER = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "total": {"type": "number", "minimum": 0}},
    "required": ["id", "total"],
}
SSE_API: dict[str, Any] = {
    "asyncapi": "3.0.0",
    "info": {"title": "orders", "version": "1.0.0"},
    "servers": {"plain": {"host": "127.0.0.1:7114", "protocol": "http"}},
    "channels": {"orders": {"address": "/orders", "messages": {"order": {"payload": ORDER}}}},
    "operations": {"streamOrders": {"action": "send", "channel": {"$ref": "#/channels/orders"}}},
}


def kafka_api(topic: str, bootstrap: str) -> dict[str, Any]:
    return {
        "asyncapi": "3.0.0",
        "info": {"title": "order topics", "version": "1.0.0"},
        "servers": {"broker": {"host": bootstrap, "protocol": "kafka"}},
        "channels": {
            "orders": {
                "address": topic,
                "messages": {
                    "order": {
                        "payload": ORDER,
                        "bindings": {"kafka": {"key": {"type": "string", "pattern": "^o-\\d+$"}}},
                    }
                },
            }
        },
        "operations": {
            "streamOrders": {"action": "receive", "channel": {"$ref": "#/channels/orders"}}
        },
    }


def write_config(root: Path, topic: str, bootstrap: str, port: int, metrics: int) -> Path:
    (root / "orders.yaml").write_text(yaml.safe_dump(SSE_API))
    (root / "orders.kafka.yaml").write_text(yaml.safe_dump(kafka_api(topic, bootstrap)))
    config = {
        "name": "asyncapi-kafka-payload-checks",
        "bindings": {
            "north": {
                "type": "asyncapi",
                "kind": "server",
                "options": {
                    "specs": {"orders": "orders.yaml"},
                    "tcp": {"host": "127.0.0.1", "port": port},
                },
                "exit": "mapping",
            },
            "mapping": {
                "type": "asyncapi",
                "kind": "proxy",
                "options": {"specs": {"orders": "orders.yaml", "topics": "orders.kafka.yaml"}},
                "routes": [
                    {"when": [{"api-id": "orders"}], "exit": "south", "with": {"api-id": "topics"}}
                ],
            },
            "south": {
                "type": "asyncapi",
                "kind": "client",
                "options": {"specs": {"topics": "orders.kafka.yaml"}},
            },
        },
        "telemetry": {
            "exporters": {
                "logs": {"type": "stdout"},
                "metrics": {
                    "type": "prometheus",
                    "options": {
                        "endpoints": [{"scheme": "http", "port": metrics, "path": "/metrics"}]
                    },
                },
            }
        },
    }
    path = root / "zilla.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def topic(kafka_broker: BrokerInfo) -> str:
    name = f"orders-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


@pytest.fixture(scope="module")
def gateway(
    topic: str, kafka_broker: BrokerInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    port, metrics_port = free_port(), free_port()
    root = tmp_path_factory.mktemp("asyncapi-kafka-checks")
    config = write_config(root, topic, kafka_broker.bootstrap, port, metrics_port)
    with GatewayProcess(config) as process:
        yield Gateway(port, metrics_port, process)


def test_only_messages_the_kafka_channel_describes_reach_the_sse_client(
    gateway: Gateway, topic: str, kafka_broker: BrokerInfo
) -> None:
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 0})
    messages = [
        (b"o-1", {"id": 1, "total": 9.5}),
        (b"o-2", {"id": 2, "total": -1}),  # offset 1: the payload schema's minimum is 0
        (b"order-3", {"id": 3, "total": 1}),  # offset 2: the key does not match ^o-\d+$
        (b"o-4", {"id": "four", "total": 1}),  # offset 3: id is not an integer
        (b"o-5", {"id": 5, "total": 0}),
    ]
    for key, value in messages:
        producer.produce(topic, key=key, value=json.dumps(value).encode(), partition=0)
    assert producer.flush(30) == 0

    events = gateway.events("orders", 2)  # GET /orders

    assert [json.loads(e.data) for e in events] == [{"id": 1, "total": 9.5}, {"id": 5, "total": 0}]
    skipped = gateway.logged(f"Skipping invalid message on topic {topic}", 3)
    assert [n for n in (1, 2, 3) if any(f"offset {n}" in line for line in skipped)] == [1, 2, 3]
    assert any("offset 1" in line and "less than the minimum of 0" in line for line in skipped)
    assert any("offset 2" in line and "does not match pattern" in line for line in skipped)
    assert gateway.invalid_count(topic) == 3
