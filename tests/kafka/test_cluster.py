"""A local cluster of 3 KRaft nodes, through ``ssegate kafka start|status|stop --brokers 3``."""

from __future__ import annotations

import random
import socket
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]
from confluent_kafka.cimpl import NewTopic

from ssegate_lab.broker import admin_client, cli_kafka
from ssegate_lab.cluster import KafkaCluster

pytestmark = pytest.mark.integration


def port_block(count: int) -> int:
    """The first of ``count`` consecutive free ports, below the kernel's ephemeral range."""
    for _ in range(200):
        first = random.randrange(20_000, 32_000)
        if all(_is_free(first + offset) for offset in range(count)):
            return first
    raise AssertionError(f"no {count} consecutive free ports")


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def produce(bootstrap: str, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
    for n in values:
        producer.produce(topic, str(n).encode(), partition=n % 3)
    assert producer.flush(30) == 0


def read_all(bootstrap: str, topic: str, count: int) -> list[int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}", "log_level": 0}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    values: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(int(message.value() or b"-1"))
    finally:
        consumer.close()
    return sorted(values)


@pytest.mark.timeout(300)  # about 60 s on idle cores: three JVMs start, then one again
def test_a_three_node_cluster_replicates_every_topic_and_survives_a_node_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = port_block(6)  # clients on port ... port+2, controllers on port+3 ... port+5
    data = tmp_path / "cluster"
    where = ["--port", str(port), "--data-dir", str(data)]
    addresses = [f"127.0.0.1:{port + n}" for n in range(3)]
    try:
        assert cli_kafka(["start", "--brokers", "3", *where]) == 0
        assert capsys.readouterr().out == f"bootstrap: {','.join(addresses)}\n"
        cluster = KafkaCluster.saved(data)
        assert cluster is not None and cluster.bootstrap == ",".join(addresses)
        assert sorted(cluster.controller_ports.values()) == [port + 3, port + 4, port + 5]

        topic = f"replicated-{uuid.uuid4().hex[:8]}"
        admin = admin_client(cluster.bootstrap)
        admin.create_topics([NewTopic(topic, 3)])[topic].result(30)  # the cluster's defaults
        cluster.wait_in_sync([topic])
        assert all(len(s.replicas) == 3 for s in cluster.partitions(topic).values())
        resource = ConfigResource("topic", topic)
        configs = admin.describe_configs([resource])[resource].result(30)
        assert configs["min.insync.replicas"].value == "2"
        produce(cluster.bootstrap, topic, range(30))

        crashed = cluster.leader_of(topic, 0)
        assert cluster.kill(crashed)
        assert cli_kafka(["status", *where]) == 1
        lines = capsys.readouterr().out.splitlines()
        assert [line.split()[:3] for line in lines[:3]] == [
            ["node", f"{n}:", addresses[n - 1]] for n in (1, 2, 3)
        ]
        assert ("not running" in lines[crashed - 1]) and sum("pid:" in x for x in lines) == 2
        produce(cluster.bootstrap, topic, range(30, 60))  # acknowledged by the two left

        assert cli_kafka(["start", "--brokers", "3", *where]) == 0  # starts the missing node
        assert cluster.brokers_up() == {1, 2, 3}
        cluster.wait_in_sync([topic])
        assert read_all(addresses[crashed - 1], topic, 60) == list(range(60))

        assert cli_kafka(["start", *where]) == 1  # one broker on a cluster's directory
        assert "holds a cluster of 3 nodes, not 1" in capsys.readouterr().err
    finally:
        cli_kafka(["stop", *where])
    assert capsys.readouterr().out.endswith(f"stopped 3 of 3 nodes on {data}\n")
    assert cli_kafka(["status", *where]) == 1
    assert all(n.pid is None for n in KafkaCluster.saved(data).status())  # type: ignore[union-attr]
