"""Per-partition lag and the fan-out backlog of a cache server against a real broker.

The loop is made busy on purpose (the test blocks it): what the fetch thread brings meanwhile
waits in the hand-over, and the lag gauge counts it per partition until the loop takes it in.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from tests.bindings.kafka.support import RecordingListener, create_topic, produce, until

from ssegate.bindings.kafka.cache_server import KafkaCacheServer
from ssegate.bindings.kafka.client import KafkaClient
from ssegate.bindings.kafka.partition_lag import LAG, PENDING
from ssegate.telemetry.metrics import Metrics
from ssegate_lab.broker import BrokerInfo

pytestmark = pytest.mark.integration

DEADLINE = 30.0


def lags(server: KafkaCacheServer, topic: str) -> dict[int, float]:
    """The lag gauge's series of ``topic``, by partition, as an export reads them."""
    return {
        int(dict(labels)["partition"]): value
        for kind, name, labels, value in server.metrics.items()
        if kind == "gauge" and name == LAG and dict(labels).get("topic") == topic
        and isinstance(value, float)
    }  # fmt: skip


def pending(server: KafkaCacheServer) -> float:
    return server.metrics.gauge_value(PENDING, server.name)


def blocking_wait(condition: object, timeout: float = DEADLINE) -> None:
    """Wait without letting the loop run (it is busy), for ``condition()``."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def test_records_a_busy_loop_has_not_taken_in_are_lag_per_partition_until_it_does(
    kafka_broker: BrokerInfo,
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap, partitions=3)
    produce(bootstrap, topic, [(None, b"v%d" % n, n % 3) for n in range(12)])
    listener = RecordingListener()
    server = KafkaCacheServer(
        "cache", KafkaClient("kafka", (bootstrap,)), metrics=Metrics(), metadata_interval=0.5
    )
    seen: dict[str, object] = {}

    async def main() -> None:
        server.start()
        try:
            server.subscribe(topic, {}, listener)
            await until(lambda: listener.count() == 12, DEADLINE)
            await until(lambda: lags(server, topic) == {0: 0, 1: 0, 2: 0}, DEADLINE)
            seen["caught up"] = pending(server)
            # The loop is busy from here: the fetch goes on, nothing is fanned out.
            produce(bootstrap, topic, [(None, b"x", 0)] * 7 + [(None, b"y", 2)] * 2)
            blocking_wait(lambda: lags(server, topic) == {0: 7, 1: 0, 2: 2})
            blocking_wait(lambda: pending(server) == 9)
            seen["busy"] = (lags(server, topic), listener.count())
            await until(lambda: lags(server, topic) == {0: 0, 1: 0, 2: 0}, DEADLINE)
            seen["after"] = (pending(server), listener.count())
        finally:
            await server.close()

    asyncio.run(main())
    assert seen["caught up"] == 0
    assert seen["busy"] == ({0: 7, 1: 0, 2: 2}, 12)  # nothing fanned out while it was behind
    assert seen["after"] == (0, 21)
