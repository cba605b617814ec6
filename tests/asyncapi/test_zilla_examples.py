"""Zilla's four AsyncAPI SSE examples, in their shape, validate, start and stream unchanged.

``zilla_examples/`` holds, for each example and each of its generations, a ``zilla.yaml`` and
its AsyncAPI documents (see its README). A test copies one, points its addresses at free ports,
the test broker and a topic of its own, and then does what the example's README does:

- ``asyncapi.sse.proxy``: ``GET /events/1`` streams what the upstream SSE server publishes; an
  event whose ``id`` is negative breaks the document's payload schema and never arrives;
- ``asyncapi.sse.kafka.proxy``: ``GET /events`` streams the ``events`` topic; a record written
  to it arrives with the sse-kafka id of partition 0 at offset 1, ``AQIAAg==``.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from tests.asyncapi.test_round_trip import read_events

from ssegate.asyncapi.roles import check_spec, read_spec
from ssegate.config.loader import load_config
from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent
from ssegate.tools.sse_server import ExampleSseServer
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

EXAMPLES = Path(__file__).resolve().parent / "zilla_examples"
GOOD = '{"id":1,"name":"Hello World!"}'
BAD = '{"id":-1,"name":"Hello bad World!"}'


def copy_example(name: str, tmp_path: Path, replacements: dict[str, str]) -> Path:
    """The example's directory copied into ``tmp_path``, its YAML files with ``replacements``
    made; the path of its ``zilla.yaml``."""
    target = tmp_path / name
    shutil.copytree(EXAMPLES / name, target)
    for path in target.rglob("*.yaml"):
        text = path.read_text()
        for old, new in replacements.items():
            text = text.replace(old, new)
        path.write_text(text)
    return target / "zilla.yaml"


def check_validates(config: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """What ``ssegate validate`` and ``ssegate asyncapi validate`` check, in this process."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert any(b.type == "asyncapi" for b in load_config(str(config)).bindings.values())
    for document in sorted((config.parent / "specs").glob("*.yaml")):
        expected = "kafka" if document.name.startswith("kafka") else "sse"
        assert check_spec(read_spec(document.read_text(), str(document))) == expected


async def stream(url: str, count: int, opened: asyncio.Event | None = None) -> list[SseEvent]:
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("GET", url, headers={"accept": "text/event-stream"}) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        if opened is not None:
            opened.set()
        return await read_events(response, count)


@pytest.mark.parametrize("name", ["sse_proxy", "sse_proxy_v1"])
def test_the_sse_proxy_example_streams_the_upstreams_valid_events_only(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, upstream_port = free_port(), free_port()
    config = copy_example(name, tmp_path, {"localhost:7114": f"127.0.0.1:{port}"})
    env = {"SSE_SERVER_HOST": "127.0.0.1", "SSE_SERVER_PORT": str(upstream_port)}
    check_validates(config, monkeypatch, env)

    async def scenario() -> list[SseEvent]:
        upstream = ExampleSseServer()
        await upstream.start(upstream_port)
        try:
            reading = asyncio.create_task(stream(f"http://127.0.0.1:{port}/events/1", 1))
            while not upstream.streams:
                assert not reading.done(), reading.result()
                await asyncio.sleep(0.02)
            upstream.publish(BAD)
            upstream.publish(GOOD)
            return await asyncio.wait_for(reading, 30)
        finally:
            await upstream.close()

    with GatewayProcess(config, env=env):
        [event] = asyncio.run(scenario())
    assert event.data == GOOD


@pytest.mark.parametrize("name", ["sse_kafka_proxy", "sse_kafka_proxy_v1"])
def test_the_sse_kafka_proxy_example_streams_the_events_topic(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kafka_broker: BrokerInfo
) -> None:
    topic = f"zilla-example-{name.replace('_', '-')}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, key=b"1", value=GOOD.encode(), partition=0)
    assert producer.flush(30) == 0
    port = free_port()
    replacements = {
        "localhost:7114": f"127.0.0.1:{port}",
        "kafka.examples.dev:29092": kafka_broker.bootstrap,
        "address: events\n": f"address: {topic}\n",
    }
    config = copy_example(name, tmp_path, replacements)
    check_validates(config, monkeypatch, {})

    with GatewayProcess(config):
        [event] = asyncio.run(stream(f"http://127.0.0.1:{port}/events", 1))
    assert (event.id, event.data) == ("AQIAAg==", GOOD)
