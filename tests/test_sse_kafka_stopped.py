"""A client that stops reading stops its stream; once it reads again the stream goes on from
where it stopped, from the broker when the partition cache let that place go meanwhile.

A real ``ssegate start`` process (tcp → http → sse → sse-kafka → kafka cache → the real local
broker) with a small cache (``cache.max-bytes`` of 128 KiB) and an sse server that never drops a
slow client, so that only the stop and the resume decide what the client gets. The client is a
raw HTTP/1.1 connection with a 4 KiB receive buffer that reads nothing
(:func:`tests.support.deaf_clients.deaf_client`) until it is told to.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from tests.support.deaf_clients import deaf_client
from tests.support.metrics import metric
from tests.test_sse_kafka_replay import read_events, value

from ssegate.bindings.sse_kafka.event_id import decode_progress
from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.bench.kafka_rig import write_kafka_gateway_config
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration

FIRST = 400
"""Records before the client connects (120 KB of values: the cache holds them)."""
MORE = 1600
"""Records produced while it reads nothing (480 KB: the cache lets the client's place go)."""
CATCH_UPS = (
    'ssegate_kafka_catch_up_requests_total{{binding="south_kafka_cache_server",topic="{topic}"}}'
)
SUBSCRIBERS = 'ssegate_kafka_subscribers{{binding="south_kafka_cache_server",topic="{topic}"}}'


def produce(bootstrap: str, topic: str, numbers: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n in numbers:
        producer.produce(topic, value=value(n))
    assert producer.flush(30) == 0


async def until(
    read: Callable[[], Awaitable[float]], expected: float, within: float = 30.0
) -> None:
    deadline = time.monotonic() + within
    while (seen := await read()) != expected:
        assert time.monotonic() < deadline, f"{seen}, not {expected}"
        await asyncio.sleep(0.2)


def test_a_stopped_stream_whose_place_the_cache_let_go_goes_on_from_the_broker(
    kafka_broker: BrokerInfo, tmp_path: Path
) -> None:
    topic = f"stopped-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    produce(kafka_broker.bootstrap, topic, range(FIRST))
    metrics_port = free_port()
    ports = write_kafka_gateway_config(
        tmp_path, kafka_broker.bootstrap, [topic], default_offset="historical",
        sse_options={"max-buffered": 16 << 20, "slow-client-timeout": 0},
        metrics_port=metrics_port, cache_max_bytes=128 * 1024,
    )  # fmt: skip

    async def scenario(process: GatewayProcess) -> None:
        async def catch_ups() -> float:
            return await metric(metrics_port, CATCH_UPS.format(topic=topic))

        async def subscribers() -> float:
            return await metric(metrics_port, SUBSCRIBERS.format(topic=topic))

        request = f"GET /{topic} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode()
        sock = await deaf_client(ports.plain, request)
        try:
            await until(subscribers, 0)  # its window shut in the replay: it stopped
            before = await catch_ups()
            await asyncio.to_thread(
                produce, kafka_broker.bootstrap, topic, range(FIRST, FIRST + MORE)
            )
            await asyncio.sleep(1.0)  # the cache took them, and let the oldest go
            assert await subscribers() == 0  # stopped: nothing was written to it meanwhile
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            events = await read_events(sock, FIRST + MORE)
            assert [e.data for e in events] == [value(n).decode() for n in range(FIRST + MORE)]
            assert decode_progress(events[-1].id) == {0: FIRST + MORE}
            assert await catch_ups() > before  # its place was read from the broker again
            await until(subscribers, 1)  # live again
        finally:
            sock.close()
        assert not process.logged("Traceback", timeout=0)

    with GatewayProcess(ports.config) as process:
        asyncio.run(asyncio.wait_for(scenario(process), 120))
