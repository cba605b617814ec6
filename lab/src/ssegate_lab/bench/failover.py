"""``ssegate bench failover``: Kafka nodes crash under a gateway's SSE clients; nothing is lost.

One case, on a local cluster of 3 nodes (:class:`~ssegate_lab.cluster.KafkaCluster`):

1. a fresh topic of 3 partitions, each replicated to the 3 nodes;
2. a gateway process (tcp → http → sse → sse-kafka → kafka cache → kafka client, its
   ``servers`` every node) serving ``/events`` (every message) and ``/events/{id}`` (the
   messages of key ``id``), and ``clients`` streams opened on it, ``unfiltered`` of them (a
   share) on ``/events``, the rest spread over the keys;
3. a producer (``acks=all``, idempotent) writing ``rate`` messages/s, keys ``k0`` ...
   ``k<keys-1>`` in turn, key ``k<i>`` to partition ``i % 3``, each message numbered within its
   partition: ``{"p":<partition>,"s":<sequence>,"k":"k<i>"}``;
4. after ``warmup`` s, the leader of partition 0 is killed (SIGKILL); once the producer's writes
   are acknowledged again on every partition and ``hold`` s have passed, the node is restarted
   and the case waits until every replica is back in sync; then the leader of a partition that
   another node leads is killed too, and ``hold`` s later the producing stops;
5. once every stream has read what it is owed (or ``drain`` s passed), every stream is checked
   (:mod:`~ssegate_lab.bench.failover_checks`): lost, duplicated, out of order, unexpected; each
   kill's **delivery gap** is measured; once the gateway has logged each departure
   (``kafka.broker_left``, at its next metadata refresh), its metrics are scraped: brokers,
   leader changes, slow clients dropped.

The second node is left down at the end of a case; :func:`run_failover` restarts it before the
next one. Every wait has a deadline: a case that cannot go on raises :class:`FailoverError`.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ssegate.engine.runtime import free_port, free_ports
from ssegate_lab.bench.failover_checks import (
    KEYED_PREFIX,
    Produced,
    check_streams,
    delivery_gap,
    totals,
)
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.bench.kafka_rig import write_kafka_gateway_config
from ssegate_lab.bench.sequence_readers import SEQUENCED, SequenceReaders
from ssegate_lab.broker import admin_client
from ssegate_lab.cluster import KafkaCluster

PARTITIONS = 3
GATEWAY_METRICS = (
    "ssegate_sse_slow_clients_total",
    "ssegate_kafka_brokers",
    "ssegate_kafka_brokers_left_total",
    "ssegate_kafka_brokers_joined_total",
    "ssegate_kafka_leader_changes_total",
    "ssegate_kafka_broker_available",
)
_METRIC_LINE = re.compile(r"^([a-z_]+)(?:\{[^}]*\})? (\S+)$")


class FailoverError(RuntimeError):
    """A step of the scenario did not happen within its deadline."""


ROUTES = """\
      - when:
          - path: /events/{{id}}
        exit: north_kafka_cache_client
        with:
          topic: {topic}
          filters:
            - key: ${{params.id}}
      - when:
          - path: /events
        exit: north_kafka_cache_client
        with:
          topic: {topic}
"""
"""The sse-kafka routes of the scenario's gateway: ``/events/{id}`` (key ``id``), ``/events``."""


@dataclass(frozen=True)
class Workload:
    """What one case runs: streams, messages/s, keys, and how long it waits where."""

    clients: int = 120
    unfiltered: float = 1 / 3
    """The share of the streams that read every message; the others filter on a key."""
    rate: float = 200.0
    keys: int = 30
    warmup: float = 3.0
    """Seconds of producing before the first kill."""
    hold: float = 2.0
    """Seconds after writes are acknowledged again, before the next step."""
    drain: float = 20.0
    """The longest wait, after the producing stopped, for every stream to read what it is owed."""
    workers: int = 1
    """Gateway worker processes."""

    def __post_init__(self) -> None:
        if self.clients < 1 or self.keys < 1 or self.rate <= 0:
            raise ValueError("clients, keys and rate must be positive")
        if not 0 <= self.unfiltered <= 1:
            raise ValueError("the unfiltered share is between 0 and 1")


class SequencedProducer:
    """Produces numbered, keyed messages at a steady rate from a thread, ``acks=all`` and
    idempotent, and keeps what it sent and what Kafka acknowledged (:class:`Produced`)."""

    def __init__(self, bootstrap: str, topic: str, *, rate: float, keys: int) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.rate = rate
        self.keys = keys
        self.produced = Produced(PARTITIONS)
        self.failures: list[str] = []
        self.acked_sent_ns = [0] * PARTITIONS
        """Per partition, when the latest acknowledged message was produced."""
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "delivery.timeout.ms": 120_000,
                "log_level": 0,
            }
        )
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="failover-producer", daemon=True)

    def start(self) -> SequencedProducer:
        self._thread.start()
        return self

    def resumed_since(self, moment_ns: int) -> bool:
        """Whether every partition has an acknowledged message produced at or after then."""
        return all(sent >= moment_ns for sent in self.acked_sent_ns)

    def stop(self, flush_timeout: float = 60.0) -> None:
        """Stop producing and wait for every acknowledgement (or ``flush_timeout``)."""
        self._stopping.set()
        self._thread.join(flush_timeout + 10)
        left = self._producer.flush(flush_timeout)
        if left:
            self.failures.append(f"{left} message(s) not acknowledged in {flush_timeout:.0f} s")

    @property
    def sent(self) -> int:
        return sum(len(sent) for sent in self.produced.sent_ns.values())

    def _run(self) -> None:
        produced, written = self.produced, 0
        started = time.monotonic()
        while not self._stopping.is_set():
            due = int(self.rate * (time.monotonic() - started)) + 1 - written
            for _ in range(due):
                key = written % self.keys
                partition = key % PARTITIONS
                sequence = len(produced.sent_ns[partition])
                value = b'{"p":%d,"s":%d,"k":"k%d"}' % (partition, sequence, key)
                produced.sent_ns[partition].append(time.monotonic_ns())
                produced.keys[partition].append(key)
                self._send(value, b"k%d" % key, partition)
                written += 1
            self._producer.poll(0)
            time.sleep(0.005)

    def _send(self, value: bytes, key: bytes, partition: int) -> None:
        while True:
            try:
                self._producer.produce(
                    self.topic, value, key, partition=partition, on_delivery=self._delivered
                )
                return
            except BufferError:
                self._producer.poll(0.05)

    def _delivered(self, error: Any, message: Any) -> None:
        match = SEQUENCED.search(message.value() or b"")
        if match is None:
            return
        partition, sequence = int(match[1]), int(match[2])
        if error is not None:
            self.failures.append(f"p{partition} s{sequence}: {error}")
            return
        self.produced.acked[partition].add(sequence)
        sent = self.produced.sent_ns[partition][sequence]
        self.acked_sent_ns[partition] = max(self.acked_sent_ns[partition], sent)


def stream_paths(clients: int, keys: int, unfiltered: float) -> list[str]:
    """A share ``unfiltered`` of the streams (at least one) on ``/events``, the rest on keys
    ``k0``, ``k1``, ... in turn."""
    plain = max(1, round(clients * unfiltered))
    return ["/events"] * plain + [f"{KEYED_PREFIX}k{i % keys}" for i in range(clients - plain)]


def create_topic(cluster: KafkaCluster, timeout: float = 30.0) -> str:
    from confluent_kafka.cimpl import NewTopic

    topic = f"failover-{uuid.uuid4().hex[:8]}"
    replicas = len(cluster.ports)
    admin = admin_client(cluster.bootstrap)  # held until the answer: its end cancels it
    admin.create_topics([NewTopic(topic, PARTITIONS, replicas)])[topic].result(timeout)
    cluster.wait_in_sync([topic], timeout)
    return topic


def run_case(
    cluster: KafkaCluster,
    workdir: Path,
    load: Workload,
    *,
    env: dict[str, str] | None = None,
    progress: Callable[[str], None] = lambda step: None,
) -> dict[str, Any]:
    """One case (see the module's description); the result holds the checks' totals, each
    stream's verdict when it is not complete, each kill's delivery gap, and the gateway's
    metrics and ``kafka.broker_left`` lines."""
    started = time.monotonic()
    topic = create_topic(cluster)
    metrics_port = free_port()
    ports = write_kafka_gateway_config(
        workdir, cluster.bootstrap, [topic], routes=ROUTES.format(topic=topic),
        metrics_port=metrics_port,
    )  # fmt: skip
    paths = stream_paths(load.clients, load.keys, load.unfiltered)
    with (
        GatewayProcess(ports.config, workers=load.workers, env=env) as gateway,
        SequenceReaders(ports.plain, max_streams=load.clients + 100) as readers,
    ):
        opened = readers.open(paths)
        if opened["failed"]:
            raise FailoverError(f"{opened['failed']} stream(s) did not open: {opened['errors']}")
        producer = SequencedProducer(cluster.bootstrap, topic, rate=load.rate, keys=load.keys)
        producer.start()
        try:
            time.sleep(load.warmup)
            first = cluster.leader_of(topic, 0)
            kills = [_kill(cluster, producer, topic, first, load.hold, progress)]
            restart_started = time.monotonic()
            cluster.start_node(first)
            cluster.wait_in_sync([topic])
            restart_seconds = time.monotonic() - restart_started
            progress(f"node {first} back in sync after {restart_seconds:.1f} s")
            second = next(
                state.leader
                for state in cluster.partitions(topic).values()
                if state.leader not in (first, -1)
            )
            kills.append(_kill(cluster, producer, topic, second, load.hold, progress))
        finally:
            producer.stop()
        owed_by_path = {path: producer.produced.owed(path) for path in set(paths)}
        owed = sum(len(seqs) for path in paths for seqs in owed_by_path[path].values())
        drained = _drain(readers, owed, load.drain)
        records = readers.collect()
        for kill in kills:  # the gateway sees a departure at its next metadata refresh
            gateway.logged(f"broker={kill['node']} address={kill['address']}", timeout=15)
        metrics = scrape(metrics_port)
        left_lines = [line for line in gateway.output if "kafka.broker_left" in line]
    verdicts = check_streams(records, producer.produced)
    for kill in kills:
        gaps = delivery_gap(records, producer.produced, kill.pop("killed_ns"))
        kill["gap_s"] = _worst(gaps.values())
        kill["gap_by_partition_s"] = {str(p): _round(g) for p, g in gaps.items()}
    return {
        "topic": topic,
        **asdict(load),
        "unfiltered": sum(1 for path in paths if not path.startswith(KEYED_PREFIX)),
        "produced": producer.sent,
        "acknowledged": sum(len(acked) for acked in producer.produced.acked.values()),
        "producer_failures": producer.failures[:5],
        "drained_s": _round(drained),
        **totals(verdicts),
        "incomplete_streams": [asdict(v) for v in verdicts if not v.complete][:10],
        "kills": kills,
        "gap_s": _worst(kill["gap_s"] for kill in kills),
        "restart_in_sync_s": round(restart_seconds, 1),
        "gateway_metrics": metrics,
        "gateway_broker_left_lines": left_lines[:10],
        "seconds": round(time.monotonic() - started, 1),
        "load_average": [round(load, 1) for load in os.getloadavg()],
    }


def _kill(
    cluster: KafkaCluster,
    producer: SequencedProducer,
    topic: str,
    node: int,
    hold: float,
    progress: Callable[[str], None],
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Kill ``node``; return once writes are acknowledged again everywhere and ``hold`` s
    passed."""
    led = sorted(p for p, state in cluster.partitions(topic).items() if state.leader == node)
    killed_ns = time.monotonic_ns()
    cluster.kill(node)
    deadline = time.monotonic() + timeout
    while not producer.resumed_since(killed_ns):
        if time.monotonic() > deadline:
            raise FailoverError(f"writes were not acknowledged {timeout:.0f} s after node {node}")
        time.sleep(0.05)
    acks_resumed = (time.monotonic_ns() - killed_ns) / 1e9
    progress(f"killed node {node} (leader of {led}); acks again after {acks_resumed:.1f} s")
    time.sleep(hold)
    return {
        "node": node,
        "address": cluster.address(node),
        "led_partitions": led,
        "killed_ns": killed_ns,
        "acks_resumed_s": round(acks_resumed, 2),
    }


def _drain(readers: SequenceReaders, owed: int, timeout: float) -> float | None:
    """Wait until the streams read ``owed`` events in all; seconds waited (``None``: never)."""
    started = time.monotonic()
    while sum(readers.counts()) < owed:
        if time.monotonic() - started > timeout:
            return None
        time.sleep(0.2)
    return time.monotonic() - started


def scrape(metrics_port: int) -> dict[str, float]:
    """The gateway's metrics of :data:`GATEWAY_METRICS`, each summed over its labels."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = dict.fromkeys(GATEWAY_METRICS, 0.0)  # a counter shows once it counted
    for line in text.splitlines():
        match = _METRIC_LINE.match(line)
        if match is not None and match[1] in GATEWAY_METRICS:
            found[match[1]] += float(match[2])
    return found


def _worst(values: Any) -> float | None:
    values = list(values)
    if not values or any(value is None for value in values):
        return None
    return _round(max(values))


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def run_failover(load: Workload, *, repeat: int = 3, heap: str = "512m") -> dict[str, Any]:
    """``repeat`` cases on one cluster of 3 nodes started for the run (restored between
    cases); the summary gives the worst gap and the total lost and duplicated."""
    results: dict[str, Any] = {
        "scenario": "failover",
        **asdict(load),
        "repeat": repeat,
        "brokers": 3,
        "heap": heap,
        "cases": [],
    }
    with tempfile.TemporaryDirectory(prefix="ssegate-failover-") as tmp:
        root = Path(tmp)
        ports = free_ports(6)
        cluster = KafkaCluster(root / "kafka", ports[:3], ports[3:], heap=heap)
        started = time.monotonic()
        cluster.start(timeout=180)
        results["cluster_start_s"] = round(time.monotonic() - started, 1)
        try:
            for index in range(repeat):
                workdir = root / f"case-{index}"
                workdir.mkdir()
                case = run_case(cluster, workdir, load, progress=lambda s: print(s, flush=True))
                results["cases"].append(case)
                print(json.dumps(_brief(case)), flush=True)
                cluster.start(timeout=180)  # the node killed last comes back for the next case
        finally:
            cluster.stop()
    results["summary"] = summarize(results["cases"])
    return results


def _brief(case: dict[str, Any]) -> dict[str, Any]:
    keep = ("clients", "produced", "lost", "duplicates", "out_of_order", "unexpected",
            "reconnects", "gap_s")  # fmt: skip
    return {name: case[name] for name in keep}


def summarize(cases: list[dict[str, Any]]) -> dict[str, Any]:
    gaps = [kill["gap_s"] for case in cases for kill in case["kills"]]
    measured = [gap for gap in gaps if gap is not None]
    return {
        "cases": len(cases),
        "kills": len(gaps),
        "gap_s_median": round(statistics.median(measured), 2) if measured else None,
        "gap_s_max": max(measured) if measured and len(measured) == len(gaps) else None,
        **{
            name: sum(case[name] for case in cases)
            for name in ("produced", "lost", "duplicates", "out_of_order", "unexpected")
        },
        "reconnects": sum(case["reconnects"] for case in cases),
        "closed_early": sum(case["closed_early"] for case in cases),
        "complete": all(case["complete"] == case["streams"] for case in cases),
    }
