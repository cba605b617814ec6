"""Filters on a value's fields, end to end: ``cache_server`` ``transforms`` on a real broker.

Records are produced with no key and no headers, only a JSON value ``{"n", "id", "zone"}``; the
cache server's transforms give each the value's ``id`` as its key and its ``zone`` as the header
``zone``, and sse-kafka streams filtered on that key, on that header, and on both get exactly
their records, resume exactly from an id, and see the extracted key in the event id. A record
without a ``zone`` reaches no zone stream and is counted and logged once.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from tests.support.sse_reads import read_events as read

from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration

CONFIG = """\
name: transforms
telemetry:
  exporters:
    logs:
      type: stdout
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {{host: 127.0.0.1, port: {port}}}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    routes:
      - exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    exit: north_sse_kafka_mapping
  north_sse_kafka_mapping:
    type: sse-kafka
    kind: proxy
    routes:
      - when:
          - path: /{{topic}}/id/{{id}}
        exit: north_kafka_cache_client
        with:
          topic: ${{params.topic}}
          event:
            id: '["${{base64(key)}}","${{etag}}"]'
          filters:
            - key: ${{params.id}}
      - when:
          - path: /{{topic}}/zone/{{zone}}
        exit: north_kafka_cache_client
        with:
          topic: ${{params.topic}}
          filters:
            - headers:
                zone: ${{params.zone}}
      - when:
          - path: /{{topic}}/both/{{id}}/{{zone}}
        exit: north_kafka_cache_client
        with:
          topic: ${{params.topic}}
          filters:
            - key: ${{params.id}}
              headers:
                zone: ${{params.zone}}
  north_kafka_cache_client:
    type: kafka
    kind: cache_client
    exit: south_kafka_cache_server
  south_kafka_cache_server:
    type: kafka
    kind: cache_server
    options:
      topics:
        - name: {topic}
          transforms:
            - extract-key: ${{message.value.id}}
            - extract-headers:
                zone: ${{message.value.zone}}
    exit: south_kafka_client
  south_kafka_client:
    type: kafka
    kind: client
    options:
      servers: [{bootstrap}]
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
"""

TOTAL = 300


def value(n: int) -> dict[str, object]:
    """Record ``n``: ids ``u0``..``u4``; zones north and south, and every 25th without one."""
    found: dict[str, object] = {"n": n, "id": f"u{n % 5}"}
    if n % 25:
        found["zone"] = "south" if n % 3 == 0 else "north"
    return found


@pytest.fixture(scope="module")
def gateway(
    kafka_broker: BrokerInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, str, GatewayProcess]]:
    topic = f"transforms-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 0})
    for n in range(TOTAL):
        producer.produce(topic, json.dumps(value(n)).encode(), partition=n % 2)
    assert producer.flush(30) == 0
    port = free_port()
    config = tmp_path_factory.mktemp("transforms") / "zilla.yaml"
    config.write_text(CONFIG.format(port=port, topic=topic, bootstrap=kafka_broker.bootstrap))
    with GatewayProcess(config) as process:
        yield port, topic, process


def numbers(events: list[SseEvent]) -> list[int]:
    return sorted(int(json.loads(e.data)["n"]) for e in events)


def owed(wants: object) -> list[int]:
    return [n for n in range(TOTAL) if wants(value(n))]  # type: ignore[operator]


def test_streams_filtered_on_extracted_fields_get_exactly_their_records(
    gateway: tuple[int, str, GatewayProcess],
) -> None:
    port, topic, _ = gateway
    by_id = owed(lambda v: v["id"] == "u2")
    by_zone = owed(lambda v: v.get("zone") == "south")
    by_both = owed(lambda v: v["id"] == "u2" and v.get("zone") == "south")

    async def scenario() -> list[list[SseEvent]]:
        return list(
            await asyncio.gather(
                read(port, f"/{topic}/id/u2", len(by_id)),
                read(port, f"/{topic}/zone/south", len(by_zone)),
                read(port, f"/{topic}/both/u2/south", len(by_both)),
            )
        )

    id_events, zone_events, both_events = asyncio.run(scenario())
    assert numbers(id_events) == by_id
    assert numbers(zone_events) == by_zone
    assert numbers(both_events) == by_both
    key = base64.b64encode(b"u2").decode()
    assert all(json.loads(e.id)[0] == key for e in id_events), id_events[0].id


def test_a_stream_on_an_extracted_key_resumes_exactly_from_an_id(
    gateway: tuple[int, str, GatewayProcess],
) -> None:
    port, topic, _ = gateway
    by_id = owed(lambda v: v["id"] == "u3")

    async def scenario() -> tuple[list[SseEvent], list[SseEvent]]:
        first = await read(port, f"/{topic}/id/u3", 10)
        rest = await read(port, f"/{topic}/id/u3", len(by_id) - 10, last_id=first[-1].id)
        return first, rest

    first, rest = asyncio.run(scenario())
    assert numbers(first + rest) == by_id  # none lost, none twice


def test_a_record_without_the_field_reaches_no_stream_filtered_on_it_and_is_counted(
    gateway: tuple[int, str, GatewayProcess],
) -> None:
    port, topic, process = gateway
    asyncio.run(read(port, f"/{topic}/zone/north", 1))  # the topic is read
    (line,) = process.logged('"event":"kafka.transform_unextracted"', timeout=30)
    assert "message.value.zone" in line and topic in line
