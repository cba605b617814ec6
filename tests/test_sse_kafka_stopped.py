"""A client that stops reading stops its stream; once it reads again the stream goes on from
where it stopped, from the broker when the partition cache let that place go meanwhile.

A real ``ssegate start`` process (tcp → http → sse → sse-kafka → kafka cache → the real local
broker) with a small cache (``cache.max-bytes`` of 128 KiB). In the first test the sse server
never drops a slow client, so that only the stop and the resume decide what the client gets; in
the second it drops one that has been behind the cache for a second. The client is a
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
from tests.support.deaf_clients import TCP_CLOSE, TCP_CLOSE_WAIT, deaf_client, tcp_state
from tests.support.metrics import metric
from tests.test_sse_kafka_replay import read_events, value

from ssegate.bindings.sse_kafka.event_id import decode_progress
from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.bench.kafka_rig import GatewayPorts, write_kafka_gateway_config
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


def a_gateway(
    broker: BrokerInfo, tmp_path: Path, *, slow_client_timeout: float
) -> tuple[str, int, GatewayPorts]:
    """A new topic holding :data:`FIRST` records, and the config of a gateway with a 128 KiB
    cache and the given ``slow-client-timeout`` serving it: the topic, the metrics port and
    the config's ports."""
    topic = f"stopped-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    produce(broker.bootstrap, topic, range(FIRST))
    metrics_port = free_port()
    ports = write_kafka_gateway_config(
        tmp_path, broker.bootstrap, [topic], default_offset="historical",
        sse_options={"max-buffered": 16 << 20, "slow-client-timeout": slow_client_timeout},
        metrics_port=metrics_port, cache_max_bytes=128 * 1024,
    )  # fmt: skip
    return topic, metrics_port, ports


def test_a_stopped_stream_whose_place_the_cache_let_go_goes_on_from_the_broker(
    kafka_broker: BrokerInfo, tmp_path: Path
) -> None:
    topic, metrics_port, ports = a_gateway(kafka_broker, tmp_path, slow_client_timeout=0)

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


SLOW_BY_TIME = 'ssegate_sse_slow_clients_total{binding="north_sse_server",reason="time"}'


def test_a_stopped_stream_waits_while_the_cache_holds_its_place_and_is_reset_once_behind_it(
    kafka_broker: BrokerInfo, tmp_path: Path
) -> None:
    """Stalled for three times ``slow-client-timeout`` while the cache holds its place: kept,
    at no cost. Then the cache lets that place go: reset once it has been behind for the
    timeout (counted as a slow client, reason ``time``)."""
    topic, metrics_port, ports = a_gateway(kafka_broker, tmp_path, slow_client_timeout=1)

    async def scenario(process: GatewayProcess) -> None:
        async def subscribers() -> float:
            return await metric(metrics_port, SUBSCRIBERS.format(topic=topic))

        async def slow_by_time() -> float:
            return await metric(metrics_port, SLOW_BY_TIME)

        request = f"GET /{topic} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode()
        sock = await deaf_client(ports.plain, request)
        try:
            await until(subscribers, 0)  # its window shut in the replay: it stopped
            await asyncio.sleep(3.0)  # three timeouts, its place in the cache
            assert await slow_by_time() == 0
            assert tcp_state(sock) not in (TCP_CLOSE, TCP_CLOSE_WAIT)
            began = time.monotonic()
            await asyncio.to_thread(
                produce, kafka_broker.bootstrap, topic, range(FIRST, FIRST + MORE)
            )
            await until(slow_by_time, 1)
            assert time.monotonic() - began >= 1.0  # behind for the timeout first
            assert tcp_state(sock) == TCP_CLOSE  # reset, not ended
        finally:
            sock.close()
        assert not process.logged("Traceback", timeout=0)

    with GatewayProcess(ports.config) as process:
        asyncio.run(asyncio.wait_for(scenario(process), 120))
