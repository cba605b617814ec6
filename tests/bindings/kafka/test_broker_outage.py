"""A broker that stops and comes back mid-stream: subscriptions stay, nothing is lost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.bindings.kafka.support import RecordingListener, create_topic, produce, until

from ssegate.bindings.kafka.cache_server import KafkaCacheServer
from ssegate.bindings.kafka.client import KafkaClient
from ssegate.telemetry.metrics import Metrics
from ssegate_lab.broker import start_broker, stop_broker
from ssegate_lab.testing.kafka import TEST_JAVA_OPTIONS, free_port

pytestmark = pytest.mark.integration


def test_a_broker_restart_reports_status_and_delivery_resumes_with_nothing_lost(
    tmp_path: Path,
) -> None:
    port, controller = free_port(), free_port()
    data_dir = tmp_path / "kafka"
    info = start_broker(port, data_dir, controller_port=controller,
                        java_options=TEST_JAVA_OPTIONS)  # fmt: skip
    try:
        topic = create_topic(info.bootstrap)
        produce(info.bootstrap, topic, [(None, f"before-{n}".encode()) for n in range(5)])
        listener = RecordingListener()
        metrics = Metrics()
        server = KafkaCacheServer(
            "cache", KafkaClient("kafka", (info.bootstrap,)), metrics=metrics,
            metadata_interval=0.5,
        )  # fmt: skip

        async def main() -> None:
            server.start()
            try:
                server.subscribe(topic, {}, listener)
                await until(lambda: listener.count() == 5)
                await asyncio.to_thread(stop_broker, data_dir)
                await until(lambda: False in [s for s, _ in listener.statuses], timeout=15)
                assert metrics.gauge_value("ssegate.kafka.broker.available", "cache") == 0
                await asyncio.to_thread(
                    start_broker, port, data_dir, controller_port=controller,
                    java_options=TEST_JAVA_OPTIONS,
                )  # fmt: skip
                await until(lambda: listener.statuses[-1][0], timeout=15)
                produce(info.bootstrap, topic, [(None, f"after-{n}".encode()) for n in range(5)])
                await until(lambda: listener.count() == 10, timeout=15)
            finally:
                await server.close()

        asyncio.run(main())
    finally:
        stop_broker(data_dir)
    assert listener.offsets(0) == list(range(10))
    assert listener.values()[5:] == [f"after-{n}".encode() for n in range(5)]
    assert listener.statuses[0][0] is False and listener.statuses[0][1]
    assert listener.statuses[-1] == (True, "")
    assert metrics.gauge_value("ssegate.kafka.broker.available", "cache") == 1
