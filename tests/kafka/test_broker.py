"""The local Kafka broker, run for real: jars from the cache, a JVM, confluent-kafka clients."""

from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from ssegate.cache import OFFLINE
from ssegate_lab.broker import (
    BrokerError,
    BrokerInfo,
    broker_status,
    cli_kafka,
    ensure_broker_jars,
    start_broker,
    stop_broker,
)
from ssegate_lab.testing.kafka import TEST_JAVA_OPTIONS, free_port, running_broker

pytestmark = pytest.mark.integration

Headers = list[tuple[str, str | bytes | None]]
RECORDS: list[tuple[bytes, bytes, Headers]] = [
    (f"key-{n}".encode(), f"value-{n}".encode(), [("trace", f"t{n}".encode()), ("kind", b"demo")])
    for n in range(9)
]


def _create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"test-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=15)
    return topic


def _produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value, headers in RECORDS:
        producer.produce(topic, value=value, key=key, headers=headers)
    assert producer.flush(15) == 0


def _consume_all(
    bootstrap: str, topic: str, count: int, *, partitions: int | None = None
) -> list[Message]:
    """Read ``count`` messages as a new consumer group, or from assigned partitions if given."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"group-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    if partitions is None:
        consumer.subscribe([topic])
    else:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    received: list[Message] = []
    deadline = time.monotonic() + 20
    try:
        while len(received) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                received.append(message)
    finally:
        consumer.close()
    return received


def _as_records(messages: list[Message]) -> list[tuple[bytes | None, bytes | None, object]]:
    return sorted((m.key(), m.value(), m.headers()) for m in messages)


def test_keys_values_and_headers_round_trip_through_a_three_partition_topic(
    kafka_broker: BrokerInfo,
) -> None:
    topic = _create_topic(kafka_broker.bootstrap, partitions=3)
    _produce(kafka_broker.bootstrap, topic)

    received = _consume_all(kafka_broker.bootstrap, topic, len(RECORDS))

    assert _as_records(received) == sorted(RECORDS)
    assert {m.partition() for m in received} == {0, 1, 2}


def test_second_start_on_a_running_broker_returns_the_same_broker_at_once(
    kafka_broker: BrokerInfo,
) -> None:
    port = int(kafka_broker.bootstrap.rsplit(":", 1)[1])
    started = time.monotonic()

    again = start_broker(port, kafka_broker.data_dir)

    assert again == kafka_broker
    assert time.monotonic() - started < 2


def test_cli_start_on_a_running_broker_prints_only_its_bootstrap(
    kafka_broker: BrokerInfo, capsys: pytest.CaptureFixture[str]
) -> None:
    port = kafka_broker.bootstrap.rsplit(":", 1)[1]

    status = cli_kafka(["start", "--port", port, "--data-dir", str(kafka_broker.data_dir)])

    assert status == 0
    assert capsys.readouterr().out == f"bootstrap: 127.0.0.1:{port}\n"


def test_cli_status_exits_1_when_no_broker_runs_on_the_data_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_kafka(["status", "--data-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().out == "not running\n"


def test_stopped_broker_restarts_on_its_data_dir_with_its_messages(tmp_path: Path) -> None:
    with running_broker(tmp_path) as first:
        topic = _create_topic(first.bootstrap, partitions=3)
        _produce(first.bootstrap, topic)
        started = time.monotonic()

        assert stop_broker(tmp_path) is True

        assert time.monotonic() - started < 30
        assert not Path(f"/proc/{first.pid}").exists() or _is_zombie_free(first.pid)
        assert not (tmp_path / "broker.pid").exists()
        assert broker_status(tmp_path) is None
        assert stop_broker(tmp_path) is False

        port = int(first.bootstrap.rsplit(":", 1)[1])
        second = start_broker(port, tmp_path, java_options=TEST_JAVA_OPTIONS)

        assert second.pid != first.pid
        kept = _consume_all(second.bootstrap, topic, len(RECORDS), partitions=3)
        assert _as_records(kept) == sorted(RECORDS)
    assert broker_status(tmp_path) is None


def test_broker_that_dies_while_starting_raises_with_the_end_of_its_log(tmp_path: Path) -> None:
    with pytest.raises(BrokerError) as raised:
        start_broker(free_port(), tmp_path, controller_port=free_port(), heap="1k")

    assert "exited with status" in str(raised.value)
    assert "heap" in str(raised.value).lower()
    assert not (tmp_path / "broker.pid").exists()


def test_start_on_a_port_another_process_listens_on_is_refused(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]

        with pytest.raises(BrokerError, match=f"port {port} .* already in use"):
            start_broker(port, tmp_path)


def test_jar_resolution_without_maven_names_the_missing_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(OFFLINE)  # nothing can be fetched without mvn anyway

    with pytest.raises(BrokerError, match="mvn is not on PATH"):
        ensure_broker_jars(tmp_path)


def test_resolved_jars_are_found_again_without_running_maven(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ensure_broker_jars()
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn to run: it must not be needed

    lib = ensure_broker_jars()

    assert any(lib.glob("kafka_2.13-*.jar"))


def _is_zombie_free(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
