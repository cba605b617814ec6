"""The autoscaling gauges end to end: a gateway with a ``prometheus`` exporter and a real broker.

``ssegate.sse.streams.open`` reads the SSE streams open in the process that answered the scrape
and goes back to 0 when they close; ``ssegate.kafka.partition.lag`` has one series per partition
streamed, 0 once the gateway has taken in everything the log holds. With two workers the
kernel hands each scrape connection to one of them: each scrape is one worker's whole view
(its ``ssegate.process.pid``), the workers' open streams add up to the streams opened, and the
worker that reads worker 0's fetch is caught up too.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration

DEADLINE = 60.0
RECORDS = 40
STREAMS = 6

CONFIG = """\
name: autoscaling
telemetry:
  exporters:
    logs:
      type: stdout
    prometheus0:
      type: prometheus
      options:
        endpoints: [{{scheme: http, port: {metrics_port}}}]
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
      servers: [{bootstrap}]
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
"""

Scrape = dict[str, float]
"""``name{labels}`` → value, for every series of one scrape."""


def topic_with_records(bootstrap: str) -> str:
    topic = f"autoscaling-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for n in range(RECORDS):
        producer.produce(topic, b"%d" % n, partition=n % 2)
    assert producer.flush(30) == 0
    return topic


def start(tmp_path: Path, bootstrap: str, workers: int) -> tuple[GatewayProcess, int, int]:
    port, metrics_port = free_port(), free_port()
    config = tmp_path / "zilla.yaml"
    config.write_text(CONFIG.format(port=port, metrics_port=metrics_port, bootstrap=bootstrap))
    return GatewayProcess(config, workers=workers), port, metrics_port


def scrape(metrics_port: int) -> Scrape:
    """One scrape, on a connection of its own (so, under several workers, any worker's)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    found: Scrape = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            found[series] = float(value)
    return found


def lag_of(scraped: Scrape, topic: str) -> dict[int, float]:
    pattern = re.compile(r'ssegate_kafka_partition_lag\{.*partition="(\d+)",topic="([^"]+)"\}')
    return {
        int(m.group(1)): value
        for series, value in scraped.items()
        if (m := pattern.fullmatch(series)) is not None and m.group(2) == topic
    }


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not met in time: {what}")
        time.sleep(0.1)


async def open_streams(stack: AsyncExitStack, port: int, path: str, count: int) -> None:
    """``count`` SSE streams, each on a connection of its own, each open (its first event read)."""
    for _ in range(count):
        client = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        response = await stack.enter_async_context(
            client.stream("GET", f"http://127.0.0.1:{port}{path}",
                          headers={"accept": "text/event-stream"})
        )  # fmt: skip
        assert response.status_code == 200
        chunks = response.aiter_raw()  # kept open with the stack: closing it ends the stream
        stack.push_async_callback(chunks.aclose)
        async with asyncio.timeout(DEADLINE):
            await anext(chunks)


@pytest.fixture(scope="module")
def topic(kafka_broker: BrokerInfo) -> Iterator[str]:
    yield topic_with_records(kafka_broker.bootstrap)


def test_open_streams_gauge_reads_the_open_sse_streams_and_returns_to_zero_after_they_close(
    kafka_broker: BrokerInfo, topic: str, tmp_path: Path
) -> None:
    gateway, port, metrics_port = start(tmp_path, kafka_broker.bootstrap, workers=1)
    with gateway:
        assert scrape(metrics_port)["ssegate_sse_streams_open"] == 0

        async def scenario() -> tuple[Scrape, Scrape]:
            async with AsyncExitStack() as stack:
                await open_streams(stack, port, f"/{topic}", STREAMS)
                async with httpx.AsyncClient(timeout=30) as client:  # not a stream: not counted
                    assert (await client.get(f"http://127.0.0.1:{port}/")).status_code == 404
                open_now = await asyncio.to_thread(scrape, metrics_port)
                await asyncio.to_thread(
                    wait_for,
                    lambda: lag_of(scrape(metrics_port), topic) == {0: 0, 1: 0},
                    "lag 0 on both partitions",
                )
                caught_up = await asyncio.to_thread(scrape, metrics_port)
            return open_now, caught_up

        open_now, caught_up = asyncio.run(scenario())
        assert open_now["ssegate_sse_streams_open"] == STREAMS
        assert open_now['stream_active_sent{binding="north_sse_server"}'] == STREAMS
        assert lag_of(caught_up, topic) == {0: 0, 1: 0}
        assert caught_up['ssegate_kafka_fanout_pending{binding="south_kafka_cache_server"}'] == 0
        wait_for(lambda: scrape(metrics_port)["ssegate_sse_streams_open"] == 0, "0 streams")


def test_with_two_workers_each_scrape_is_one_workers_consistent_view(
    kafka_broker: BrokerInfo, topic: str, tmp_path: Path
) -> None:
    gateway, port, metrics_port = start(tmp_path, kafka_broker.bootstrap, workers=2)
    with gateway:
        by_worker: dict[float, Scrape] = {}

        def both_workers_caught_up() -> bool:
            scraped = scrape(metrics_port)
            by_worker[scraped["ssegate_process_pid"]] = scraped
            return len(by_worker) == 2 and all(
                lag_of(s, topic) == {0: 0, 1: 0} for s in by_worker.values()
            )

        async def scenario() -> dict[float, Scrape]:
            async with AsyncExitStack() as stack:
                await open_streams(stack, port, f"/{topic}", STREAMS)
                await asyncio.to_thread(wait_for, both_workers_caught_up, "both workers")
                return dict(by_worker)

        views = asyncio.run(scenario())
        assert len(views) == 2
        for view in views.values():  # each scrape is one worker's: its own streams, its lag
            assert view["ssegate_sse_streams_open"] == view.get(
                'stream_active_sent{binding="north_sse_server"}', 0
            )
        assert sum(v["ssegate_sse_streams_open"] for v in views.values()) == STREAMS
        closed: dict[float, float] = {}

        def every_worker_reads_zero() -> bool:
            scraped = scrape(metrics_port)
            closed[scraped["ssegate_process_pid"]] = scraped["ssegate_sse_streams_open"]
            return len(closed) == 2 and set(closed.values()) == {0}

        wait_for(every_worker_reads_zero, "0 streams on both workers")
