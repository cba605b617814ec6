"""A topic's streams written as one group, over real sockets, natively and in pure Python.

A real ``ssegate start`` process (tcp → http → sse → sse-kafka → kafka cache → the real local
broker; two ports whose sse servers differ in ``max-buffered``), started once with the C
fan-out (:mod:`ssegate.native.fanout`) and once with ``SSEGATE_FANOUT=python``. Clients are
raw HTTP/1.1 connections on 127.0.0.1 whose chunked bodies are read back with the real SSE
parser. Each test waits, through the Prometheus gauge ``ssegate.sse_kafka.broadcast.streams``,
until its streams are written as one broadcast before it produces anything, so the group write is
what delivers every event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from tests.support.deaf_clients import TCP_CLOSE, deaf_client, tcp_state
from tests.support.http_servers import run
from tests.support.metrics import metric

from ssegate.bindings.sse_kafka.event_id import decode_progress
from ssegate.engine.runtime import free_port
from ssegate.native import fanout
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration

STREAMS = 200
PARTITIONS = 3
PER_PARTITION = 30
MAX_BUFFERED = 65536
KERNEL_QUEUE_MAX = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
STALLED_PARTITIONS = KERNEL_QUEUE_MAX // 900_000 + 2
"""Messages of 900 KB, one per partition, that the kernel cannot all queue for one peer."""
BROADCAST = 'ssegate_sse_kafka_broadcast_streams{binding="north_sse_kafka_mapping"}'
SLOW = 'ssegate_sse_slow_clients_total{binding="north_sse_tight",reason="bytes"}'
DROPPED = 'ssegate_sse_kafka_dropped_subscribers_total{binding="north_sse_kafka_mapping"}'
DIRECT = 'ssegate_sse_stream_data_direct_total{binding="north_sse_server"}'
SUBSCRIBERS = 'ssegate_kafka_subscribers{{binding="south_kafka_cache_server",topic="{topic}"}}'


@dataclass(frozen=True)
class Gateway:
    port: int
    tight_port: int
    """Served by an sse server that drops a client over ``MAX_BUFFERED`` behind."""
    metrics_port: int
    topics: dict[str, str]
    bootstrap: str
    process: GatewayProcess

    async def metric(self, series: str) -> float:
        return await metric(self.metrics_port, series)

    async def until_metric(self, series: str, value: float, within: float = 20.0) -> None:
        deadline = time.monotonic() + within
        while (seen := await self.metric(series)) != value:
            assert time.monotonic() < deadline, f"{series} is {seen}, not {value}"
            await asyncio.sleep(0.1)


def write_config(
    root: Path, ports: tuple[int, int, int], bootstrap: str, topics: list[str]
) -> Path:
    """Two HTTP/1.1 ports, each to an sse server of its own, both to one sse-kafka proxy: the
    first port's server takes 16 MiB behind a client, the second's ``MAX_BUFFERED``."""
    port, tight_port, metrics_port = ports
    config = f"""
    name: fanout
    bindings:
      north_tcp_server:
        type: tcp
        kind: server
        options: {{host: 127.0.0.1, port: [{port}, {tight_port}]}}
        routes:
          - when:
              - port: {tight_port}
            exit: north_http_tight
        exit: north_http_server
      north_http_server:
        type: http
        kind: server
        options: {{versions: [http/1.1]}}
        routes:
          - exit: north_sse_server
      north_http_tight:
        type: http
        kind: server
        options: {{versions: [http/1.1]}}
        routes:
          - exit: north_sse_tight
      north_sse_server:
        type: sse
        kind: server
        options: {{max-buffered: {16 << 20}, slow-client-timeout: 0}}
        exit: north_sse_kafka_mapping
      north_sse_tight:
        type: sse
        kind: server
        options: {{max-buffered: {MAX_BUFFERED}, slow-client-timeout: 0}}
        exit: north_sse_kafka_mapping
      north_sse_kafka_mapping:
        type: sse-kafka
        kind: proxy
        routes:
          - when:
              - path: /{{topic}}
            exit: north_kafka_cache_client
      north_kafka_cache_client:
        type: kafka
        kind: cache_client
        exit: south_kafka_cache_server
      south_kafka_cache_server:
        type: kafka
        kind: cache_server
        options:
          bootstrap: {topics}
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
    telemetry:
      exporters:
        logs: {{type: stdout}}
        metrics:
          type: prometheus
          options:
            endpoints:
              - {{scheme: http, port: {metrics_port}, path: /metrics}}
    """
    path = root / "zilla.yaml"
    path.write_text(textwrap.dedent(config))
    return path


@pytest.fixture(scope="module", params=["native", "python"])
def gateway(
    request: pytest.FixtureRequest,
    kafka_broker: BrokerInfo,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Gateway]:
    if request.param == "native" and fanout.NATIVE is None:
        pytest.skip("the C extension is not built (pip install -e . builds it; ./run does)")
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    topics = {"fanout": (PARTITIONS,), "stalled": (STALLED_PARTITIONS,), "window": (1,)}
    names = {role: f"{role}-{uuid.uuid4().hex[:8]}" for role in topics}
    futures = admin.create_topics([NewTopic(names[role], topics[role][0], 1) for role in topics])
    for future in futures.values():
        future.result(30)
    ports = (free_port(), free_port(), free_port())
    root = tmp_path_factory.mktemp(f"fanout-{request.param}")
    config = write_config(root, ports, kafka_broker.bootstrap, list(names.values()))
    env = {"SSEGATE_FANOUT": "python" if request.param == "python" else ""}
    with GatewayProcess(config, env=env, expect_listeners=2) as process:
        yield Gateway(*ports, names, kafka_broker.bootstrap, process)


@dataclass
class Stream:
    """An HTTP/1.1 event stream read as it comes: the events, decoded from the chunks."""

    writer: asyncio.StreamWriter
    events: list[SseEvent] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, gateway: Gateway, path: str) -> Stream:
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
        writer.write(f"GET {path} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200 ") and b"transfer-encoding: chunked" in head
        stream = cls(writer)
        stream.task = asyncio.get_running_loop().create_task(stream._read(reader))
        return stream

    async def _read(self, reader: asyncio.StreamReader) -> None:
        parser = SseParser()
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                data = await reader.readexactly(size + 2)
                self.events.extend(e for e in parser.feed(data[:-2]) if isinstance(e, SseEvent))
                if size == 0:
                    return

    async def close(self) -> None:
        self.writer.close()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


def produce(bootstrap: str, topic: str, values: list[tuple[int, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for partition, value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0


async def until(condition: object, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_200_streams_of_one_topic_get_every_event_once_in_order(gateway: Gateway) -> None:
    topic = gateway.topics["fanout"]
    total = PARTITIONS * PER_PARTITION

    async def scenario() -> None:
        streams = await asyncio.gather(*(Stream.open(gateway, f"/{topic}") for _ in range(STREAMS)))
        try:
            await gateway.until_metric(BROADCAST, STREAMS)
            loop = asyncio.get_running_loop()
            for n in range(0, PER_PARTITION, 3):  # ten rounds, so several batches
                values = [
                    (p, f"p{p}-{i}".encode()) for i in range(n, n + 3) for p in range(PARTITIONS)
                ]
                await loop.run_in_executor(None, produce, gateway.bootstrap, topic, values)
                await asyncio.sleep(0.02)
            await until(lambda: all(len(s.events) >= total for s in streams))
            await asyncio.sleep(0.2)  # nothing more may come
            wanted = {p: [f"p{p}-{i}" for i in range(PER_PARTITION)] for p in range(PARTITIONS)}
            for stream in streams:
                assert len(stream.events) == total
                per_partition = {p: [e.data for e in stream.events if e.data.startswith(f"p{p}-")]
                                 for p in range(PARTITIONS)}  # fmt: skip
                assert per_partition == wanted
                last = decode_progress(stream.events[-1].id)
                assert last == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
            # The events went past the streams, to the sockets, in group writes: each one's
            # encoding holds at least its ``data:pX-Y`` line and the blank line after it.
            least = STREAMS * sum(len(f"data:{e.data}\n\n") for e in streams[0].events)
            assert await gateway.metric(DIRECT) >= least
        finally:
            for stream in streams:
                await stream.close()
        await gateway.until_metric(BROADCAST, 0)

    run(scenario, timeout=90)


def test_a_stream_that_never_reads_is_buffered_then_dropped_as_a_slow_client(
    gateway: Gateway,
) -> None:
    """A client that reads nothing, on the port whose sse server allows ``MAX_BUFFERED``, and
    three that read, on the other port (16 MiB), all in one broadcast. More than the kernel
    queues for a peer (``tcp_wmem``'s maximum) is produced at once, 900 KB a message, one
    message per partition: what the kernel does not take is buffered in the transport, and the
    stalled stream is dropped for bytes (by the write that leaves it over ``MAX_BUFFERED``, or
    by the sweep, which counts the kernel's queue too) while the readers get everything."""
    topic = gateway.topics["stalled"]
    big = [b"%d:" % p + b"x" * 900_000 for p in range(STALLED_PARTITIONS)]

    async def scenario() -> None:
        request = f"GET /{topic} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode()
        deaf = await deaf_client(gateway.tight_port, request)
        readers = [await Stream.open(gateway, f"/{topic}") for _ in range(3)]
        try:
            await gateway.until_metric(BROADCAST, 4)
            slow_before = await gateway.metric(SLOW)
            values = list(enumerate(big))
            await asyncio.get_running_loop().run_in_executor(
                None, produce, gateway.bootstrap, topic, values
            )
            await until(lambda: all(len(r.events) >= len(big) for r in readers), within=60)
            for reader in readers:  # the stalled stream held nobody back
                assert sorted(e.data.encode() for e in reader.events) == big
            await gateway.until_metric(SLOW, slow_before + 1)
            await gateway.until_metric(BROADCAST, 3)
            await until(lambda: tcp_state(deaf) == TCP_CLOSE, within=10)
            [line] = gateway.process.logged("sse.slow_client_closed")[-1:]
            closed = json.loads(line)
            assert (closed["reason"], closed["limit"]) == ("bytes", MAX_BUFFERED)
            assert closed["buffered"] > MAX_BUFFERED
        finally:
            deaf.close()
            for reader in readers:
                await reader.close()

    run(scenario, timeout=110)


def dechunk(data: bytes) -> bytes:
    """The body of an HTTP/1.1 chunked response (head included in ``data``) received so far."""
    body, rest = b"", data.split(b"\r\n\r\n", 1)[1]
    while b"\r\n" in rest:
        size_line, after = rest.split(b"\r\n", 1)
        size = int(size_line, 16)
        if len(after) < size + 2:
            break
        body, rest = body + after[:size], after[size + 2 :]
    return body


def test_a_client_whose_window_shuts_stops_at_once_and_gets_everything_once_it_reads(
    gateway: Gateway,
) -> None:
    """A client that stops reading (a 4 KiB receive buffer) and one that reads, on one topic.
    40 messages of 1 KB are far under the 64 KiB stall mark, but past the client's window and
    the few KiB its socket's kernel takes unsent (``SEND_LOW_WATER``): the group write that the
    kernel refuses stops the stream at once (it leaves its broadcast, nothing is kept for it), and
    the Kafka cache server counts one subscriber less. Once the client reads, it goes on from the
    partition cache: every event, in order, once, with the same ids, and it counts again."""
    topic = gateway.topics["window"]
    subscribers = SUBSCRIBERS.format(topic=topic)
    values = [(0, b"%d:" % i + b"x" * 1000) for i in range(40)]

    async def scenario() -> None:
        request = f"GET /{topic} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode()
        deaf = await deaf_client(gateway.port, request)
        reader = await Stream.open(gateway, f"/{topic}")
        loop = asyncio.get_running_loop()
        try:
            await gateway.until_metric(subscribers, 2)
            await loop.run_in_executor(None, produce, gateway.bootstrap, topic, values)
            await until(lambda: len(reader.events) >= len(values))
            await gateway.until_metric(subscribers, 1, within=5)  # stopped: its window is shut
            received = b""
            events: list[SseEvent] = []
            deadline = time.monotonic() + 20
            while len(events) < len(values):  # the client reads now
                assert time.monotonic() < deadline, f"{len(events)} events read"
                with contextlib.suppress(BlockingIOError):
                    received += deaf.recv(65536)
                parsed = SseParser().feed(dechunk(received))
                events = [e for e in parsed if isinstance(e, SseEvent)]
                await asyncio.sleep(0.01)
            assert [e.data.encode() for e in events] == [value for _, value in values]
            assert [e.id for e in events] == [e.id for e in reader.events]
            await gateway.until_metric(subscribers, 2)  # it reads: written with the others
        finally:
            deaf.close()
            await reader.close()

    run(scenario, timeout=60)
