"""Filtered SSE-Kafka streams on a real gateway and broker: exact resume across reconnects.

A real ``ssegate start`` process reads a real three-partition topic while messages of ten keys
and two zones are produced; streams filtered on one key (and on one zone header) disconnect at
random and reconnect with the last id their parser committed, which is sometimes the resume
point a keep-alive carried (``keepalive: 1`` so that quiet streams get one every second).
Every stream must end up with exactly its messages: none lost, none twice, in order per
partition.

The gateway runs with one worker and with two. With two, the workers share one fetch
(:mod:`ssegate.bindings.kafka.host_fetch`): the kernel hands each reconnect to either worker, so
a stream resumes on the worker that did not read Kafka as often as on the one that did, and the
topic (made for the test) is started by whichever worker its first stream reached.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent, SseIdOnly, SseParser
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration

CONFIG = """\
name: filtered
telemetry:
  exporters:
    logs:
      type: stdout
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options:
      host: 127.0.0.1
      port: {port}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    routes:
      - exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    options:
      keepalive: 1
    exit: north_sse_kafka_mapping
  north_sse_kafka_mapping:
    type: sse-kafka
    kind: proxy
    routes:
      - when:
          - path: /{{topic}}/key/{{key}}
        exit: north_kafka_cache_client
        with:
          topic: ${{params.topic}}
          filters:
            - key: ${{params.key}}
      - when:
          - path: /{{topic}}/zone/{{zone}}
        exit: north_kafka_cache_client
        with:
          topic: ${{params.topic}}
          filters:
            - headers:
                zone: ${{params.zone}}
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
      servers: [{bootstrap}]
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
"""

TOTAL = 600
KEYS = 10


@dataclass(frozen=True)
class Served:
    port: int
    process: GatewayProcess


@pytest.fixture(
    scope="module",
    params=[(1, {}), (2, {}), (2, {"SSEGATE_HOST_TUNING": "off"})],
    ids=["one-worker", "two-workers", "two-workers-untuned"],
)
def served(
    request: pytest.FixtureRequest,
    kafka_broker: BrokerInfo,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    port = free_port()
    config = tmp_path_factory.mktemp("filtered") / "zilla.yaml"
    config.write_text(CONFIG.format(port=port, bootstrap=kafka_broker.bootstrap))
    workers, env = request.param  # untuned: no host tuning at all (ssegate.host), still exact
    with GatewayProcess(config, workers=workers, env=env, history=100_000) as process:
        yield Served(port, process)


def new_topic(bootstrap: str) -> str:
    name = f"filtered-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(30)
    return name


async def produce(bootstrap: str, topic: str) -> list[tuple[int, str, str]]:
    """``TOTAL`` messages over 3 partitions, slowly enough that streams sit quiet at times:
    ``(partition, key, zone)`` per value ``"<n>"``."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    sent = []
    for n in range(TOTAL):
        partition, key, zone = n % 3, f"k{n * 7 % KEYS}", "north" if n % 4 else "south"
        producer.produce(
            topic, str(n).encode(), key.encode(), partition=partition, headers=[("zone", zone)]
        )
        sent.append((partition, key, zone))
        producer.poll(0)
        await asyncio.sleep(2.0 if n % 100 == 99 else 0.004)  # bursts, then quiet stretches
    assert await asyncio.to_thread(producer.flush, 30) == 0
    return sent


async def follow(
    port: int, path: str, owed: int, rng: random.Random
) -> tuple[list[SseEvent], int, int]:
    """Read ``path`` until ``owed`` events arrived, dropping the connection at random and
    resuming from the parser's last id. Returns the events, the reconnects, and how many of
    those resumed from an id a keep-alive had carried."""
    events: list[SseEvent] = []
    last_id = ""
    reconnects = from_keepalive = 0
    give_up = asyncio.get_running_loop().time() + 60  # a lost message must fail, not hang
    async with httpx.AsyncClient(timeout=30) as client:
        while len(events) < owed and asyncio.get_running_loop().time() < give_up:
            headers = {"accept": "text/event-stream"}
            if last_id:
                headers["last-event-id"] = last_id
            parser = SseParser(last_event_id=last_id)
            last_kind: type | None = None
            async with client.stream("GET", f"http://127.0.0.1:{port}{path}", headers=headers) as r:
                assert r.status_code == 200, await r.aread()
                stay = rng.uniform(0.3, 2.5) if reconnects < 40 else 10.0
                # every third connection leaves right after a keep-alive moved its resume point
                leave_on_keepalive = reconnects % 3 == 2 and reconnects < 40
                try:
                    async with asyncio.timeout(4.0 if leave_on_keepalive else stay):
                        async for chunk in r.aiter_raw():
                            for item in parser.feed(chunk):
                                last_kind = type(item)
                                if isinstance(item, SseEvent):
                                    events.append(item)
                            if len(events) >= owed or (
                                leave_on_keepalive and last_kind is SseIdOnly
                            ):
                                break
                except TimeoutError:
                    pass
            from_keepalive += last_kind is SseIdOnly and parser.last_event_id != last_id
            last_id = parser.last_event_id
            reconnects += 1
    return events, reconnects, from_keepalive


def test_filtered_streams_resume_exactly_across_reconnects_and_keepalive_ids(
    served: Served, kafka_broker: BrokerInfo
) -> None:
    gateway = served.port
    topic = new_topic(kafka_broker.bootstrap)
    rng = random.Random(14)

    async def scenario() -> tuple[list[tuple[int, str, str]], dict[str, tuple]]:
        sent_so_far = asyncio.create_task(produce(kafka_broker.bootstrap, topic))
        owed_key = sum(1 for n in range(TOTAL) if f"k{n * 7 % KEYS}" == "k5")
        owed_zone = sum(1 for n in range(TOTAL) if n % 4 == 0)
        followed = await asyncio.gather(
            follow(gateway, f"/{topic}/key/k5", owed_key, rng),
            follow(gateway, f"/{topic}/zone/south", owed_zone, rng),
        )
        sent = await sent_so_far
        return sent, {"key": followed[0], "zone": followed[1]}

    sent, followed = asyncio.run(scenario())
    workers = served.process.workers
    wants = {
        "key": lambda key, zone: key == "k5",
        "zone": lambda key, zone: zone == "south",
    }
    for name, (events, reconnects, from_keepalive) in followed.items():
        got = [int(e.data) for e in events]
        owed = [n for n, (_, key, zone) in enumerate(sent) if wants[name](key, zone)]
        assert sorted(got) == owed, name  # none lost, none twice
        for partition in range(3):  # in order per partition
            mine = [n for n in got if sent[n][0] == partition]
            assert mine == sorted(mine), (name, partition)
        assert reconnects >= 6, name
        assert from_keepalive >= 1, f"{name}: no reconnect resumed from a keep-alive id"
    roles = sorted(
        json.loads(line)["role"]
        for line in list(served.process.output)
        if '"kafka.shared_fetch"' in line
    )
    shared = served.process.workers > 1 and "SSEGATE_HOST_TUNING" not in served.process.env
    assert roles == (["follower", "leader"] if shared else [])  # untuned: a fetch per worker
    policies = [line for line in served.process.output if '"gateway.gc"' in line]
    assert len(policies) == (0 if "SSEGATE_HOST_TUNING" in served.process.env else workers)
