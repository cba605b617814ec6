"""A real Kafka broker for tests: free loopback ports, a throwaway data directory, a clean stop.

Test suites that need Kafka register the session fixture in their ``conftest.py``::

    from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

and take ``kafka_broker`` (a :class:`~ssegate_lab.broker.BrokerInfo`) as an argument; its
``bootstrap`` is what clients connect to. :func:`running_broker` is the same thing as a context
manager, for a test that needs a broker of its own (to stop or restart it, say).
:func:`running_cluster` starts a cluster of 3 nodes on free ports
(:class:`~ssegate_lab.cluster.KafkaCluster`: ``kill``, ``start_node``, ``leader_of``, ...).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ssegate.engine.runtime import free_ports
from ssegate_lab.broker import BrokerInfo, start_broker, stop_broker
from ssegate_lab.cluster import KafkaCluster
from ssegate_lab.testing.tools import prepared


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# A test broker carries little load: skipping the C2 compiler shortens its start on two cores.
TEST_JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1",)


@contextmanager
def running_broker(data_dir: Path, *, timeout: float = 90) -> Iterator[BrokerInfo]:
    """Start a broker on free ports with state in ``data_dir``; stop it when the block ends."""
    prepared("kafka")
    info = start_broker(
        free_port(),
        data_dir,
        controller_port=free_port(),
        timeout=timeout,
        java_options=TEST_JAVA_OPTIONS,
    )
    try:
        yield info
    finally:
        stop_broker(data_dir)


@contextmanager
def running_cluster(
    data_dir: Path, *, brokers: int = 3, timeout: float = 120
) -> Iterator[KafkaCluster]:
    """Start a cluster of ``brokers`` nodes on free ports with state in ``data_dir``; stop
    every node when the block ends."""
    prepared("kafka")
    ports = free_ports(2 * brokers)
    cluster = KafkaCluster(
        data_dir, ports[:brokers], ports[brokers:], java_options=TEST_JAVA_OPTIONS
    )
    try:
        cluster.start(timeout)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerInfo]:
    """One broker for the whole test session, stopped after the last test."""
    with running_broker(tmp_path_factory.mktemp("kafka")) as info:
        yield info
