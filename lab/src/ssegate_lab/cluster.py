"""A local Kafka cluster: N KRaft nodes on loopback, run from the single broker's jars.

Every node is a broker and a controller at once, and the N controllers are the metadata
quorum's voters, so a cluster of 3 goes on with any one node down: the partitions that node
led get a new leader among their in-sync replicas, and an ``acks=all`` write needs at least 2
in-sync copies (``min.insync.replicas=2``; the settings are
:func:`~ssegate_lab.broker.server_properties`'). Everything lives in the cluster's data
directory, one single broker's layout (:mod:`ssegate_lab.broker`) per node::

    <data dir>/cluster.id        chosen at the first start, given to every node
    <data dir>/node-<id>/        node <id>'s server.properties, logs/, broker.log, broker.pid

Ports: node ``i`` (from 1) of N serves clients on ``port + i - 1`` and its controller on
``controller_port + i - 1`` (``controller_port`` is ``port + N`` unless given: 9092-9094 and
9095-9097 for 3 nodes at 9092). Each node's ``server.properties`` keeps them for later starts.

:class:`KafkaCluster` starts the nodes together (a quorum needs a majority before anything
answers), and stops, kills (SIGKILL, a crash) and restarts them one by one, which is what the
failover test and ``ssegate bench failover`` do. :func:`add_cluster_commands` gives ``ssegate
kafka start|status|stop`` their ``--brokers N`` side.
"""

from __future__ import annotations

import argparse
import fcntl
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException

from ssegate.telemetry.log import event
from ssegate_lab.broker import (
    DEFAULT_PORT,
    STOP_TIMEOUT,
    BrokerError,
    NodeSettings,
    admin_client,
    broker_status,
    default_data_dir,
    ensure_broker_jars,
    listener_port,
    new_cluster_id,
    server_properties,
    spawn_node,
    stop_broker,
)
from ssegate_lab.daemons import log_tail, port_is_free

NODE_PREFIX = "node-"
PROBE_INTERVAL = 0.2


@dataclass(frozen=True)
class NodeInfo:
    node_id: int
    address: str
    """``127.0.0.1:<port>``, what clients connect to."""
    data_dir: Path
    pid: int | None
    """The JVM's process id, or ``None`` when the node is not running."""


@dataclass(frozen=True)
class PartitionState:
    leader: int
    """The leading node's id, -1 while the partition has none."""
    replicas: tuple[int, ...]
    in_sync: tuple[int, ...]


class KafkaCluster:
    """The nodes of one cluster data directory, on the given loopback ports."""

    def __init__(
        self,
        data_dir: Path,
        ports: Sequence[int],
        controller_ports: Sequence[int],
        *,
        heap: str = "512m",
        java_options: Sequence[str] = (),
    ) -> None:
        if not ports or len(ports) != len(controller_ports):
            raise ValueError("a cluster needs one client and one controller port per node")
        if len({*ports, *controller_ports}) != 2 * len(ports):
            raise BrokerError("every client and controller port of a cluster must differ")
        self.data_dir = data_dir.resolve()
        self.ports = {index + 1: port for index, port in enumerate(ports)}
        self.controller_ports = {index + 1: port for index, port in enumerate(controller_ports)}
        self.heap = heap
        self.java_options = tuple(java_options)

    @classmethod
    def saved(
        cls, data_dir: Path, *, heap: str = "512m", java_options: Sequence[str] = ()
    ) -> KafkaCluster | None:
        """The cluster whose nodes' ``server.properties`` are in ``data_dir``, if any."""
        ports: list[int] = []
        controllers: list[int] = []
        for node_id in range(1, 1 + len(list(data_dir.glob(f"{NODE_PREFIX}*")))):
            properties = data_dir / f"{NODE_PREFIX}{node_id}" / "server.properties"
            port = listener_port(properties, "PLAINTEXT")
            controller = listener_port(properties, "CONTROLLER")
            if port is None or controller is None:
                break
            ports.append(port)
            controllers.append(controller)
        if not ports:
            return None
        return cls(data_dir, ports, controllers, heap=heap, java_options=java_options)

    # -- what it is ----------------------------------------------------------------------------

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.ports)

    @property
    def bootstrap(self) -> str:
        """Every node's address, comma-separated: what a client's ``bootstrap.servers`` takes."""
        return ",".join(self.address(node_id) for node_id in self.node_ids)

    def address(self, node_id: int) -> str:
        return f"127.0.0.1:{self.ports[node_id]}"

    def node_dir(self, node_id: int) -> Path:
        return self.data_dir / f"{NODE_PREFIX}{node_id}"

    def status(self) -> list[NodeInfo]:
        """Each node, with its process id when it runs."""
        nodes = []
        for node_id in self.node_ids:
            info = broker_status(self.node_dir(node_id))
            pid = info.pid if info is not None else None
            nodes.append(NodeInfo(node_id, self.address(node_id), self.node_dir(node_id), pid))
        return nodes

    def brokers_up(self, timeout: float = 5.0) -> set[int]:
        """The nodes the cluster's metadata lists as brokers (registered and not fenced)."""
        try:
            metadata = admin_client(self.bootstrap).list_topics(timeout=timeout)
        except KafkaException:
            return set()
        return set(metadata.brokers)

    def partitions(self, topic: str, timeout: float = 5.0) -> dict[int, PartitionState]:
        """Leader, replicas and in-sync replicas of each partition of ``topic``."""
        metadata = admin_client(self.bootstrap).list_topics(topic, timeout=timeout)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            raise BrokerError(f"topic {topic!r} is unknown to the cluster at {self.bootstrap}")
        return {
            p: PartitionState(int(m.leader), tuple(m.replicas), tuple(m.isrs))
            for p, m in found.partitions.items()
        }

    def leader_of(self, topic: str, partition: int) -> int:
        return self.partitions(topic)[partition].leader

    # -- starting ------------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> None:
        """Start every node that is not running; return once the cluster's metadata lists
        every node as a broker. A node that dies while starting, or a cluster that is not
        complete by ``timeout``, stops what was started and raises :class:`BrokerError`."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if (self.data_dir / "server.properties").exists():
            raise BrokerError(f"{self.data_dir} holds a single broker: start it without --brokers")
        with open(self.data_dir / ".start.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two callers starting one cluster start it once
            started = time.monotonic()
            stopped = [n.node_id for n in self.status() if n.pid is None]
            for node_id in stopped:
                self._prepare(node_id)
            if stopped:
                lib = ensure_broker_jars()
                with ThreadPoolExecutor(len(stopped)) as pool:  # formatting runs a JVM each
                    list(pool.map(lambda node_id: self._spawn(lib, node_id), stopped))
            try:
                self._wait_for(set(self.node_ids), stopped, started + timeout)
            except BrokerError:
                for node_id in stopped:
                    stop_broker(self.node_dir(node_id), kill=True)
                raise
        event("kafka.cluster.started", bootstrap=self.bootstrap, started=stopped,
              seconds=round(time.monotonic() - started, 2))  # fmt: skip

    def start_node(self, node_id: int, timeout: float = 90.0) -> None:
        """Start one node (after :meth:`kill` or :meth:`stop_node`) and return once the
        cluster lists it as a broker again; its replicas then catch up by themselves
        (:meth:`wait_in_sync`)."""
        if broker_status(self.node_dir(node_id)) is not None:
            return
        started = time.monotonic()
        self._prepare(node_id)
        self._spawn(ensure_broker_jars(), node_id)
        self._wait_for({node_id}, [node_id], started + timeout)
        event("kafka.cluster.node_started", node=node_id,
              seconds=round(time.monotonic() - started, 2))  # fmt: skip

    def _prepare(self, node_id: int) -> None:
        for port in (self.ports[node_id], self.controller_ports[node_id]):
            if not port_is_free(port):
                raise BrokerError(f"port {port} on 127.0.0.1 is already in use by another process")
        node_dir = self.node_dir(node_id)
        node_dir.mkdir(parents=True, exist_ok=True)
        voters = ",".join(f"{n}@127.0.0.1:{port}" for n, port in self.controller_ports.items())
        settings = NodeSettings(
            node_dir, self.ports[node_id], self.controller_ports[node_id],
            node_id=node_id, voters=voters, replicas=len(self.ports),
        )  # fmt: skip
        (node_dir / "server.properties").write_text(server_properties(settings))
        (node_dir / "cluster.id").write_text(self._cluster_id() + "\n")

    def _cluster_id(self) -> str:
        id_file = self.data_dir / "cluster.id"
        if not id_file.is_file():
            id_file.write_text(new_cluster_id() + "\n")
        return id_file.read_text().strip()

    def _spawn(self, lib: Path, node_id: int) -> None:
        spawn_node(lib, self.node_dir(node_id), self.heap, self.java_options)

    def _wait_for(self, wanted: set[int], launched: Collection[int], deadline: float) -> None:
        while True:
            for node in self.status():
                if node.node_id in launched and node.pid is None:
                    log = node.data_dir / "broker.log"
                    raise BrokerError(
                        f"Kafka node {node.node_id} exited while starting;"
                        f" last lines of {log}:\n{log_tail(log)}"
                    )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = sorted(wanted - self.brokers_up(1.0)) or sorted(wanted)
                log = self.node_dir(missing[0]) / "broker.log"
                raise BrokerError(
                    f"Kafka node(s) {missing} did not join the cluster in time;"
                    f" last lines of {log}:\n{log_tail(log)}"
                )
            if wanted <= self.brokers_up(max(0.5, min(remaining, 5.0))):
                return
            time.sleep(PROBE_INTERVAL)

    def wait_in_sync(self, topics: Sequence[str], timeout: float = 60.0) -> None:
        """Return once every partition of ``topics`` has a leader and all its replicas in
        sync (a restarted node has caught up); :class:`BrokerError` after ``timeout``."""
        deadline = time.monotonic() + timeout
        behind: Mapping[str, list[int]] = {}
        while time.monotonic() < deadline:
            try:
                behind = {
                    topic: [
                        p
                        for p, state in self.partitions(topic).items()
                        if state.leader < 0 or set(state.in_sync) != set(state.replicas)
                    ]
                    for topic in topics
                }
            except (BrokerError, KafkaException):
                behind = {topic: [] for topic in topics}
            else:
                if not any(behind.values()):
                    return
            time.sleep(PROBE_INTERVAL)
        raise BrokerError(f"partitions not in sync after {timeout:.0f} s: {dict(behind)}")

    # -- stopping ------------------------------------------------------------------------------

    def kill(self, node_id: int) -> bool:
        """SIGKILL one node, as a crash would; ``False`` when it was not running."""
        killed = stop_broker(self.node_dir(node_id), kill=True)
        if killed:
            event("kafka.cluster.node_killed", node=node_id, address=self.address(node_id))
        return killed

    def stop_node(self, node_id: int, timeout: float = STOP_TIMEOUT) -> bool:
        """Stop one node cleanly (its leadership moves to other replicas first)."""
        return stop_broker(self.node_dir(node_id), timeout=timeout)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """Stop every node, all at once (each SIGKILLed after ``timeout``); how many ran."""
        with ThreadPoolExecutor(len(self.ports)) as pool:
            stopped = list(pool.map(lambda n: self.stop_node(n, timeout), self.node_ids))
        return sum(stopped)


def start_cluster(
    brokers: int,
    port: int = DEFAULT_PORT,
    data_dir: Path | None = None,
    *,
    controller_port: int | None = None,
    heap: str = "512m",
    timeout: float = 90.0,
    java_options: Sequence[str] = (),
) -> KafkaCluster:
    """Start (or find running) the cluster of ``brokers`` nodes of ``data_dir`` (default: the
    port's), on its saved ports or, the first time, from ``port`` and ``controller_port``."""
    data_dir = (data_dir or default_data_dir(port)).resolve()
    cluster = KafkaCluster.saved(data_dir, heap=heap, java_options=java_options)
    if cluster is None:
        first_controller = controller_port or port + brokers
        cluster = KafkaCluster(
            data_dir,
            [port + index for index in range(brokers)],
            [first_controller + index for index in range(brokers)],
            heap=heap,
            java_options=java_options,
        )
    elif len(cluster.ports) != brokers:
        held = len(cluster.ports)
        raise BrokerError(f"{data_dir} holds a cluster of {held} nodes, not {brokers}")
    cluster.start(timeout)
    return cluster


def start_command(args: argparse.Namespace) -> int:
    """``ssegate kafka start --brokers N``: start the cluster and print its bootstrap list."""
    try:
        cluster = start_cluster(
            args.brokers, args.port, args.data_dir, controller_port=args.controller_port,
            heap=args.heap, timeout=args.timeout,
        )  # fmt: skip
    except BrokerError as exc:
        print(f"ssegate: {exc}", file=sys.stderr)
        return 1
    print(f"bootstrap: {cluster.bootstrap}")
    return 0


def status_command(cluster: KafkaCluster | None) -> int:
    """One line per node, then the bootstrap list; exit 0 when every node runs."""
    if cluster is None:
        print("not running")
        return 1
    nodes = cluster.status()
    for node in nodes:
        state = f"pid: {node.pid}" if node.pid is not None else "not running"
        print(f"node {node.node_id}: {node.address} {state} data-dir: {node.data_dir}")
    print(f"bootstrap: {cluster.bootstrap}")
    return 0 if all(node.pid is not None for node in nodes) else 1


def stop_command(cluster: KafkaCluster | None) -> int:
    if cluster is None:
        print("no cluster")
        return 0
    stopped = cluster.stop()
    print(f"stopped {stopped} of {len(cluster.ports)} nodes on {cluster.data_dir}")
    return 0
