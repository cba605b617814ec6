"""An sse server's ``requests[].content`` model over sse-kafka, end to end: a real ``ssegate
start`` process, the real local broker, httpx clients.

The sse server checks the events of ``/<topic>`` against a JSON Schema from an inline catalog;
its exit is the sse-kafka proxy, whose events are encoded once and shared by every stream. An
invalid message never reaches a client (its id alone does, so the client's cursor moves past
it), it is logged and counted once, not once per client, and the valid ones arrive as sent.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from ssegate.bindings.sse_kafka.event_id import decode_progress
from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent, SseIdOnly, SseParser
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

PRICE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"price": {"type": "number", "minimum": 0}},
    "required": ["price"],
}
CLIENTS = 2


def write_config(root: Path, port: int, metrics: int, bootstrap: str, topic: str) -> Path:
    config = f"""
    name: sse-kafka-content
    catalogs:
      local:
        type: inline
        options:
          subjects:
            price:
              schema: '{json.dumps(PRICE)}'
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
        options:
          requests:
            - path: /{topic}
              content:
                model: json
                catalog:
                  local:
                    - subject: price
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


@asynccontextmanager
async def streams(port: int, topic: str, count: int) -> AsyncIterator[list[httpx.Response]]:
    """``count`` open streams of ``/<topic>``, each answered 200 before the block runs."""
    async with httpx.AsyncClient(timeout=10.0) as client:
        opened = [client.stream("GET", f"http://127.0.0.1:{port}/{topic}") for _ in range(count)]
        responses = [await stream.__aenter__() for stream in opened]
        try:
            assert all(r.status_code == 200 for r in responses)
            yield responses
        finally:
            for stream in opened:
                await stream.__aexit__(None, None, None)


async def read_until(response: httpx.Response, last: str) -> list[SseEvent | SseIdOnly]:
    """Everything the stream delivered up to and including the event with data ``last``."""
    parser = SseParser()
    items: list[SseEvent | SseIdOnly] = []
    async for chunk in response.aiter_raw():
        items += parser.feed(chunk)
        if any(isinstance(i, SseEvent) and i.data == last for i in items):
            return items
    raise AssertionError(f"the stream ended after {items}")


def invalid_count(metrics_port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("ssegate_sse_invalid_events_total")
    )


def logged(process: GatewayProcess, text: str, expected: int, timeout: float = 5.0) -> list[str]:
    """Output lines holding ``text``, waiting a moment for ``expected`` of them."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [line for line in list(process.output) if text in line]
        if len(lines) >= expected or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_an_invalid_message_reaches_no_client_and_is_logged_and_counted_once(
    kafka_broker: BrokerInfo, tmp_path: Path
) -> None:
    topic = f"prices-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    port, metrics_port = free_port(), free_port()
    config = write_config(tmp_path, port, metrics_port, kafka_broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 0})
    values = [b'{"price": 10}', b'{"price": -1}', b"not json at all", b'{"price": 12.5}']

    async def scenario() -> list[list[SseEvent | SseIdOnly]]:
        async with streams(port, topic, CLIENTS) as responses:
            for value in values:  # one produce call each, flushed together: one batch, likely
                producer.produce(topic, value=value, partition=0)
            assert producer.flush(30) == 0
            reads = [read_until(r, '{"price": 12.5}') for r in responses]
            return list(await asyncio.wait_for(asyncio.gather(*reads), 15))

    with GatewayProcess(config) as gateway:
        received = asyncio.run(scenario())
        lines = logged(gateway, "sse.invalid_event", 2)
        time.sleep(0.5)  # a second report per message, were there one, would be out by now
        lines = logged(gateway, "sse.invalid_event", 2)
        counted = invalid_count(metrics_port)

    for items in received:
        assert [(i.data, decode_progress(i.id)) for i in items if isinstance(i, SseEvent)] == [
            ('{"price": 10}', {0: 1}),
            ('{"price": 12.5}', {0: 4}),
        ]
        id_only = [decode_progress(i.id) for i in items if isinstance(i, SseIdOnly)]
        assert id_only == [{0: 2}, {0: 3}]  # the invalid ones still move the cursor
    assert len(lines) == 2, lines
    assert '"offset":1' in lines[0] and "is less than the minimum of 0" in lines[0]
    assert '"offset":2' in lines[1] and "not JSON" in lines[1]
    assert all('"binding":"north_sse_server"' in line for line in lines)
    assert counted == 2
