"""An AsyncAPI SSE document mapped onto a Kafka AsyncAPI document, served from a real broker.

``examples/asyncapi/zilla.kafka.yaml``: the asyncapi proxy pairs the SSE operation with the
Kafka operation of the same name, so ``/sensors/{sensor}/readings`` streams the topic
``readings.{sensor}``. The gateway's own document lists the channel with its parameter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from tests.asyncapi.test_round_trip import AUDIENCE, ISSUER, read_events

from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent
from ssegate.tools.token import generate_key, mint, public_jwk
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "asyncapi"
TOPIC = "readings.s1"


@pytest.fixture(scope="module")
def gateway(kafka_broker: BrokerInfo) -> Iterator[tuple[int, str]]:
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 0})
    for value in ['{"value": 5}', '{"value": 6}']:
        producer.produce(TOPIC, value=value.encode(), partition=0)
    assert producer.flush(30) == 0
    key = generate_key("ec")
    jwk = public_jwk(key, "example_ec")
    host, _, kafka_port = kafka_broker.bootstrap.rpartition(":")
    port = free_port()
    env = {
        "SSEGATE_HOST": "127.0.0.1",
        "SSEGATE_HTTP_PORT": str(port),
        "KAFKA_HOST": host,
        "KAFKA_PORT": kafka_port,
        "JWT_ISSUER": ISSUER,
        "JWT_AUDIENCE": AUDIENCE,
        "JWT_EC_X": jwk["x"],
        "JWT_EC_Y": jwk["y"],
    }
    token = mint(key, kid="example_ec", sub="tester", ttl=120, iss=ISSUER, aud=AUDIENCE)
    with GatewayProcess(EXAMPLE / "zilla.kafka.yaml", env=env):
        yield port, token


def test_a_channel_mapped_to_a_topic_streams_the_topic(
    gateway: tuple[int, str],
) -> None:
    port, token = gateway

    async def scenario() -> list[SseEvent]:
        headers = {"authorization": f"Bearer {token}"}
        async with (
            httpx.AsyncClient(timeout=10, headers=headers) as client,
            client.stream("GET", f"http://127.0.0.1:{port}/sensors/s1/readings") as response,
        ):
            assert response.status_code == 200
            return await read_events(response, 2)

    events = asyncio.run(scenario())
    assert [e.data for e in events] == ['{"value": 5}', '{"value": 6}']
    assert all(e.id for e in events)


def test_the_served_document_describes_the_kafka_backed_channel(
    gateway: tuple[int, str],
) -> None:
    port, _ = gateway
    document = httpx.get(f"http://127.0.0.1:{port}/asyncapi.json", timeout=10).json()
    [channel] = document["channels"].values()
    assert channel["address"] == "/sensors/{sensor}/readings"
    assert list(channel["parameters"]) == ["sensor"]
    assert channel["messages"]["event"]["payload"]["required"] == ["value"]
