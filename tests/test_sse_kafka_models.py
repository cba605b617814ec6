"""Topic models on the Kafka → SSE path, end to end: a real ``ssegate start`` process, the real
local broker, an httpx client.

The cache client names an ``avro`` value model with ``view: json`` for one topic, a ``json``
model for another and a ``protobuf`` model with ``view: json`` for a third, all from an
``inline`` catalog (subjects are numbered from 1 in config order: ``reading`` is schema id 1,
``reading-proto`` id 3). A valid Avro or protobuf value reaches the client as JSON text, a valid
JSON value as itself; an invalid value of any never reaches the client, is logged and counted,
and the client's id still moves past it. Protobuf values are written by the protobuf runtime
from a descriptor built here, not from the ``.proto`` text the gateway reads.
"""

from __future__ import annotations

import asyncio
import io
import json
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message_factory import GetMessageClass

from ssegate.bindings.sse_kafka.event_id import decode_progress, encode_key
from ssegate.engine.runtime import free_port
from ssegate.models.schemas import frame
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

READING = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "device", "type": "string"},
        {"name": "celsius", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
PRICE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"price": {"type": "number", "minimum": 0}},
    "required": ["price"],
}
READING_ID = 1
"""``reading`` is the first subject of the inline catalog."""
READING_PROTO = (
    'syntax = "proto3"; package e2e; message Reading { string device = 1; double celsius = 2; }'
)
READING_PROTO_ID = 3
"""``reading-proto`` is the third subject of the inline catalog."""
SSE = {"accept": "text/event-stream"}


def avro(record: dict[str, Any], schema_id: int = READING_ID) -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(READING), record)
    return frame(schema_id, body.getvalue())


def proto_reading_class() -> Any:
    """``READING_PROTO``'s message class, from a descriptor written out by hand."""
    file = descriptor_pb2.FileDescriptorProto(name="e2e.proto", package="e2e", syntax="proto3")
    message = file.message_type.add(name="Reading")
    field = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="device", number=1, label=field.LABEL_OPTIONAL, type=field.TYPE_STRING)
    message.field.add(name="celsius", number=2, label=field.LABEL_OPTIONAL, type=field.TYPE_DOUBLE)
    pool = DescriptorPool()
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("e2e.Reading"))


ProtoReading = proto_reading_class()


def protobuf(device: str, celsius: float) -> bytes:
    """A Confluent-framed protobuf value: the single index byte 0 names the first message."""
    body = ProtoReading(device=device, celsius=celsius).SerializeToString()
    return frame(READING_PROTO_ID, b"\x00" + body)


def write_config(root: Path, port: int, metrics: int, bootstrap: str, topics: Topics) -> Path:
    config = f"""
    name: sse-kafka-models
    catalogs:
      local:
        type: inline
        options:
          subjects:
            reading:
              schema: '{json.dumps(READING)}'
            price:
              schema: '{json.dumps(PRICE)}'
            reading-proto:
              schema: '{READING_PROTO}'
    bindings:
      north_tcp_server:
        type: tcp
        kind: server
        options: {{host: 127.0.0.1, port: {port}}}
        exit: north_http_server
      north_http_server:
        type: http
        kind: server
        options: {{versions: [http/1.1]}}
        exit: north_sse_server
      north_sse_server:
        type: sse
        kind: server
        exit: north_sse_kafka_mapping
      north_sse_kafka_mapping:
        type: sse-kafka
        kind: proxy
        routes:
          - when:
              - path: /{{topic}}
            exit: north_kafka_cache_client
            with:
              topic: ${{params.topic}}
      north_kafka_cache_client:
        type: kafka
        kind: cache_client
        options:
          topics:
            - name: {topics.avro}
              value:
                model: avro
                view: json
                catalog:
                  local:
                    - subject: reading
            - name: {topics.json}
              value:
                model: json
                catalog:
                  local:
                    - subject: price
            - name: {topics.protobuf}
              value:
                model: protobuf
                view: json
                catalog:
                  local:
                    - subject: reading-proto
                      record: Reading
        exit: south_kafka_cache_server
      south_kafka_cache_server:
        type: kafka
        kind: cache_server
        exit: south_kafka_client
      south_kafka_client:
        type: kafka
        kind: client
        options:
          servers:
            - {bootstrap}
        exit: south_tcp_client
      south_tcp_client:
        type: tcp
        kind: client
    telemetry:
      exporters:
        logs:
          type: stdout
        metrics:
          type: prometheus
          options:
            endpoints:
              - {{scheme: http, port: {metrics}, path: /metrics}}
    """
    path = root / "zilla.yaml"
    path.write_text(textwrap.dedent(config))
    return path


@dataclass(frozen=True)
class Topics:
    avro: str
    json: str
    protobuf: str


@dataclass(frozen=True)
class Gateway:
    port: int
    metrics_port: int
    process: GatewayProcess

    async def stream(self, topic: str, count: int) -> list[SseEvent]:
        """The first ``count`` events of ``/<topic>``."""
        parser = SseParser()
        events: list[SseEvent] = []
        async with (
            httpx.AsyncClient(timeout=10.0) as client,
            client.stream("GET", f"http://127.0.0.1:{self.port}/{topic}", headers=SSE) as response,
        ):
            assert response.status_code == 200, await response.aread()
            async for chunk in response.aiter_raw():
                events += [e for e in parser.feed(chunk) if isinstance(e, SseEvent)]
                if len(events) >= count:
                    return events
        raise AssertionError(f"the stream ended after {len(events)} events")

    def events(self, topic: str, count: int) -> list[SseEvent]:
        return asyncio.run(asyncio.wait_for(self.stream(topic, count), 15))

    def invalid_count(self, topic: str) -> float:
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        counts = [
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("ssegate_kafka_invalid_messages") and f'"{topic}"' in line
        ]
        return sum(counts)

    def logged(self, text: str, expected: int, timeout: float = 5.0) -> list[str]:
        """Output lines holding ``text``, waiting a moment for ``expected`` of them."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [line for line in list(self.process.output) if text in line]
            if len(lines) >= expected or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)


@pytest.fixture(scope="module")
def topics(kafka_broker: BrokerInfo) -> Topics:
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    names = Topics(*(f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("avro", "json", "protobuf")))
    futures = admin.create_topics(
        [NewTopic(n, 1, 1) for n in (names.avro, names.json, names.protobuf)]
    )
    for future in futures.values():
        future.result(30)
    return names


@pytest.fixture(scope="module")
def producer(kafka_broker: BrokerInfo) -> Producer:
    return Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 0})


@pytest.fixture(scope="module")
def gateway(
    topics: Topics, kafka_broker: BrokerInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    port, metrics_port = free_port(), free_port()
    root = tmp_path_factory.mktemp("models")
    config = write_config(root, port, metrics_port, kafka_broker.bootstrap, topics)
    with GatewayProcess(config) as process:
        yield Gateway(port, metrics_port, process)


def produce(
    producer: Producer, topic: str, values: list[tuple[bytes | None, bytes | None]]
) -> None:
    for key, value in values:
        producer.produce(topic, value=value, key=key, partition=0)
    assert producer.flush(30) == 0


def test_avro_values_arrive_as_json_and_invalid_ones_are_skipped_logged_and_counted(
    gateway: Gateway, topics: Topics, producer: Producer
) -> None:
    first = {"device": "d1", "celsius": 21.5, "note": None}
    last = {"device": "d2", "celsius": -3.25, "note": "frost"}
    truncated = avro(first)[:-3]
    produce(
        producer,
        topics.avro,
        [
            (b"d1", avro(first)),  # 0
            (b"d1", b'{"device": "d1"}'),  # 1: not Confluent-framed
            (b"d1", truncated),  # 2: the record is cut short
            (b"d1", avro(first, schema_id=7)),  # 3: a schema id the catalog does not hold
            (b"d2", avro(last)),  # 4
            (b"d1", None),  # 5: a tombstone
        ],
    )
    events = gateway.events(topics.avro, 3)

    assert [json.loads(e.data) for e in events[:2]] == [first, last]
    assert events[0].data == '{"device":"d1","celsius":21.5,"note":null}'
    assert [decode_progress(e.id) for e in events] == [{0: 1}, {0: 5}, {0: 6}]
    assert (events[2].type, events[2].data) == ("delete", encode_key(b"d1"))
    skipped = gateway.logged(f"Skipping invalid message on topic {topics.avro}", 3)
    assert len(skipped) == 3
    assert all(
        f"partition 0, offset {n}" in line for n, line in zip((1, 2, 3), skipped, strict=True)
    )
    assert "not in the Confluent wire format" in skipped[0]
    assert "not Avro of schema id 1" in skipped[1]
    assert "schema id 7" in skipped[2]
    assert gateway.invalid_count(topics.avro) == 3


def test_json_values_arrive_as_sent_and_invalid_ones_are_skipped_logged_and_counted(
    gateway: Gateway, topics: Topics, producer: Producer
) -> None:
    produce(
        producer,
        topics.json,
        [
            (None, b'{"price": 10}'),  # 0
            (None, b'{"price": -1}'),  # 1: below the schema's minimum
            (None, b"not json at all"),  # 2
            (None, b'{"price": 12.5}'),  # 3
        ],
    )
    events = gateway.events(topics.json, 2)

    assert [(e.data, decode_progress(e.id)) for e in events] == [
        ('{"price": 10}', {0: 1}),
        ('{"price": 12.5}', {0: 4}),
    ]
    skipped = gateway.logged(f"Skipping invalid message on topic {topics.json}", 2)
    assert len(skipped) == 2
    assert "offset 1" in skipped[0] and "is less than the minimum of 0" in skipped[0]
    assert "offset 2" in skipped[1] and "not JSON" in skipped[1]
    assert gateway.invalid_count(topics.json) == 2


def test_protobuf_values_arrive_as_json_and_invalid_ones_are_skipped_logged_and_counted(
    gateway: Gateway, topics: Topics, producer: Producer
) -> None:
    produce(
        producer,
        topics.protobuf,
        [
            (None, protobuf("p1", 20.5)),  # 0
            (None, protobuf("p1", 20.5)[:-2]),  # 1: the double is cut short
            (None, frame(READING_PROTO_ID, b"\x00\x18\x01")),  # 2: field 3 is not declared
            (None, protobuf("p2", -1.0)),  # 3
        ],
    )
    events = gateway.events(topics.protobuf, 2)

    assert [(e.data, decode_progress(e.id)) for e in events] == [
        ('{"device":"p1","celsius":20.5}', {0: 1}),
        ('{"device":"p2","celsius":-1.0}', {0: 4}),
    ]
    skipped = gateway.logged(f"Skipping invalid message on topic {topics.protobuf}", 2)
    assert len(skipped) == 2
    assert "offset 1" in skipped[0] and "its 64-bit value is cut short" in skipped[0]
    assert "offset 2" in skipped[1] and "field 3 (varint) is not in e2e.Reading" in skipped[1]
    assert gateway.invalid_count(topics.protobuf) == 2
