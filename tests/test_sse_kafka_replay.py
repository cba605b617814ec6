"""Clients that replay a topic's history and read nothing, over real sockets and the real broker.

A real ``ssegate start`` process (the benches' sse-kafka chain: tcp → http → sse → sse-kafka →
kafka cache → the real local broker) serves a topic holding :data:`HISTORY` records, with
``defaultOffset: historical``: a stream opened without a last event id, once a first reader has
brought the history into the cache, replays it all from there. Its
sse server keeps up to 16 MiB behind a client and never times a stall out, so nothing but the
replay's own pacing keeps the history from being copied into every client that reads nothing.
Clients are raw HTTP/1.1 connections on 127.0.0.1 with a 4 KiB receive buffer
(:func:`tests.support.deaf_clients.deaf_client`); whether their response head came is seen
with ``MSG_PEEK``, which takes nothing from the receive buffer.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from tests.support.deaf_clients import deaf_client
from tests.support.metrics import metric

from ssegate.bindings.sse_kafka.event_id import decode_progress
from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.bench.kafka_rig import write_kafka_gateway_config
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration

HISTORY = 2000
VALUE_BYTES = 300
HISTORY_BYTES = HISTORY * VALUE_BYTES
"""What the history's values alone take: less than what replaying it writes to one client."""
STALLED = 200
SENT = 'stream_data_sent_total{binding="north_sse_server"}'
SUBSCRIBERS = 'ssegate_kafka_subscribers{{binding="south_kafka_cache_server",topic="{topic}"}}'


@dataclass(frozen=True)
class Gateway:
    port: int
    metrics_port: int
    topic: str
    process: GatewayProcess

    async def metric(self, series: str) -> float:
        return await metric(self.metrics_port, series)

    async def settled(self, series: str, within: float = 60.0) -> float:
        """``series`` once it stopped moving (the same in two readings a second apart)."""
        deadline = time.monotonic() + within
        seen = await self.metric(series)
        while True:
            await asyncio.sleep(1.0)
            now = await self.metric(series)
            if now == seen:
                return now
            assert time.monotonic() < deadline, f"{series} still moves: {now}"
            seen = now

    @property
    def subscribers(self) -> str:
        return SUBSCRIBERS.format(topic=self.topic)

    def request(self) -> bytes:
        return f"GET /{self.topic} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode()


def value(n: int) -> bytes:
    """Record ``n``'s value: its number, padded to :data:`VALUE_BYTES`."""
    head = b'{"n":%d,"p":"' % n
    return head + b"x" * (VALUE_BYTES - len(head) - 2) + b'"}'


@pytest.fixture(scope="module")
def gateway(
    kafka_broker: BrokerInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    topic = f"replay-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 20})
    for n in range(HISTORY):
        producer.produce(topic, value=value(n))
    assert producer.flush(30) == 0
    metrics_port = free_port()
    root = tmp_path_factory.mktemp("replay")
    ports = write_kafka_gateway_config(
        Path(root), kafka_broker.bootstrap, [topic], default_offset="historical",
        sse_options={"max-buffered": 16 << 20, "slow-client-timeout": 0},
        metrics_port=metrics_port,
    )  # fmt: skip
    with GatewayProcess(ports.config) as process:
        gateway = Gateway(ports.plain, metrics_port, topic, process)
        asyncio.run(warm(gateway))
        yield gateway


async def warm(gateway: Gateway) -> None:
    """Read the topic once, so the cache holds its history: a stream opened after that
    replays it from the cache (the first one reads it as the fetch brings it, live)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, ("127.0.0.1", gateway.port))
        await loop.sock_sendall(sock, gateway.request())
        assert len(await read_events(sock, HISTORY)) == HISTORY
    finally:
        sock.close()


def head_status(sock: socket.socket) -> bytes | None:
    """The status code of the response head come to ``sock``, left in its receive buffer."""
    with contextlib.suppress(BlockingIOError):
        data = sock.recv(len(b"HTTP/1.1 200"), socket.MSG_PEEK)
        if len(data) == len(b"HTTP/1.1 200"):
            return data[9:]
    return None


async def stalled_clients(gateway: Gateway, count: int) -> list[socket.socket]:
    """``count`` clients connected at once that read nothing, once each has its 200 head."""
    socks = await asyncio.gather(
        *(deaf_client(gateway.port, gateway.request()) for _ in range(count))
    )
    deadline = time.monotonic() + 60
    waiting = list(socks)
    while waiting:
        assert time.monotonic() < deadline, f"{len(waiting)} of {count} got no response head"
        await asyncio.sleep(0.1)
        statuses = [(sock, head_status(sock)) for sock in waiting]
        assert all(status in (None, b"200") for _, status in statuses)
        waiting = [sock for sock, status in statuses if status is None]
    return socks


async def read_events(sock: socket.socket, count: int, within: float = 60.0) -> list[SseEvent]:
    """Read ``sock``'s response from its start until ``count`` events came."""
    loop = asyncio.get_running_loop()
    parser = SseParser()
    events: list[SseEvent] = []
    raw = b""
    deadline = time.monotonic() + within
    while b"\r\n\r\n" not in raw:
        raw += await asyncio.wait_for(loop.sock_recv(sock, 1 << 16), 10)
    body = raw.split(b"\r\n\r\n", 1)[1]
    while len(events) < count:
        assert time.monotonic() < deadline, f"{len(events)} of {count} events came"
        while (line_end := body.find(b"\r\n")) >= 0:
            size = int(body[:line_end], 16)
            if len(body) < line_end + 2 + size + 2:
                break
            chunk = body[line_end + 2 : line_end + 2 + size]
            body = body[line_end + 2 + size + 2 :]
            events.extend(e for e in parser.feed(chunk) if isinstance(e, SseEvent))
        if len(events) < count:
            body += await asyncio.wait_for(loop.sock_recv(sock, 1 << 16), 10)
    return events


def test_clients_replaying_history_that_read_nothing_are_all_answered_and_sent_little(
    gateway: Gateway,
) -> None:
    async def scenario() -> None:
        sent_before = await gateway.metric(SENT)
        socks = await stalled_clients(gateway, STALLED)
        try:
            # Every one of them stalled, and its replay stopped: none is counted a subscriber.
            deadline = time.monotonic() + 60
            while (subscribers := await gateway.metric(gateway.subscribers)) != 0:
                assert time.monotonic() < deadline, f"{subscribers} subscribers still counted"
                await asyncio.sleep(0.2)
            sent = await gateway.settled(SENT) - sent_before
            # Each was written what its socket took and the chunk it refused, not the history
            # (copied whole into each, it would be over STALLED * HISTORY_BYTES).
            assert 0 < sent < STALLED * HISTORY_BYTES / 4
        finally:
            for sock in socks:
                sock.close()

    asyncio.run(scenario())


def test_a_client_that_reads_again_gets_the_whole_history_once_in_order(
    gateway: Gateway,
) -> None:
    async def scenario() -> None:
        sent_before = await gateway.metric(SENT)
        [sock] = await stalled_clients(gateway, 1)
        try:
            sent = await gateway.settled(SENT) - sent_before
            assert sent < HISTORY_BYTES / 4  # its replay stopped where its socket was full
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            events = await read_events(sock, HISTORY)
            assert [e.data for e in events] == [value(n).decode() for n in range(HISTORY)]
            with contextlib.suppress(TimeoutError):  # and nothing after it
                more = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(sock, 1), 1)
                assert more == b"", more
            assert decode_progress(events[-1].id) == {0: HISTORY}
        finally:
            sock.close()

    asyncio.run(scenario())
