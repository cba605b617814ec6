"""``ssegate bench kafka``: Kafka produce → N SSE clients, ssegate against KafkaSSE.

One run starts a broker (:class:`~ssegate_lab.bench.kafka_rig.BenchBroker`), creates one
single-partition topic per client count plus an idle one, and starts the gateway on the
``examples/sse.kafka`` chain serving ``/{topic}``. Then:

1. **Idle**: ``idle_clients`` streams subscribe to the idle topic; the gateway's RSS growth
   divided by the streams is the cost of an idle subscribed connection.
2. **Delivery**, per client count N: N streams subscribe to the case's topic, confluent-kafka
   produces ``rate`` messages/s for ``duration`` s (value ``{"t":<monotonic_ns>,"n":<seq>}``,
   stamped at produce time), and after a drain the client reports what arrived: distinct
   events/s delivered, events missing and duplicated (apart: :mod:`~ssegate_lab.bench.validity`),
   sequence gaps, latency from produce to receive (one machine-wide monotonic clock), and the
   CPU and RSS of the server, the broker, the client and the rest of the machine, with the
   client's CPU share and whether it was saturated. Events per server CPU-second is the
   per-core throughput.
3. **KafkaSSE** (:mod:`ssegate_lab.bench.kafkasse`), for the client counts in ``kafkasse_clients``:
   the same clients subscribe to a topic made the same way (fresh, one partition, so neither
   server has history to replay) on KafkaSSE, and the same rate is produced.

Before the cases, :func:`broker_floor` measures produce-to-consume latency with a plain
confluent-kafka consumer polling every few milliseconds: what the broker and the producer cost
before any SSE server is involved.

All streams are held by one :class:`~ssegate_lab.bench.held_streams.HeldStreams` client process.

``model`` (``none``, ``json`` or ``avro``; :mod:`~ssegate_lab.bench.kafka_rig`) puts a model on
every topic the gateway serves, so each message is checked once before the fan-out; with
``avro`` the ssegate cases produce Avro values that the model's ``view: json`` turns back into
the same JSON text. The KafkaSSE cases always get JSON values: KafkaSSE checks nothing.
"""

from __future__ import annotations

import os
import resource
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ssegate_lab.bench import validity
from ssegate_lab.bench.gateway import GatewayProcess, ProcessSample, machine_busy_seconds
from ssegate_lab.bench.held_streams import STAMPED_JSON, HeldStreams, sse_request
from ssegate_lab.bench.kafka_rig import (
    BenchBroker,
    StampedValue,
    new_producer,
    produce_at_rate,
    stamped_values,
    write_kafka_gateway_config,
)
from ssegate_lab.bench.kafkasse import KafkaSseServer, ensure_kafkasse
from ssegate_lab.bench.latency import LatencyHistogram
from ssegate_lab.broker import BrokerInfo

SETTLE_SECONDS = 1.0
DRAIN_SECONDS = 1.5


def _harness_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_kafka(
    clients: list[int],
    rates: list[float],
    *,
    duration: float = 5.0,
    idle_clients: int = 1000,
    kafkasse_clients: list[int] | None = None,
    kafkasse_settle: float = 3.0,
    broker_info: BrokerInfo | None = None,
    model: str = "none",
    workers: int = 1,
) -> dict[str, Any]:
    """Idle memory, then every client count on ssegate and (some) on KafkaSSE.

    Without ``broker_info`` a broker is started for the run and stopped after it. ``model``
    checks the values of ssegate's topics (``none``, ``json``, ``avro``). With ``workers``
    above 1 the gateway's processes share the port; each worker's cache reads the topic for
    the streams the kernel gave it, and the server figures add up all of them.
    """
    if len(rates) not in (1, len(clients)):
        raise ValueError("give one rate, or one rate per client count")
    per_count = rates * len(clients) if len(rates) == 1 else rates
    peer_counts = [1, 100] if kafkasse_clients is None else kafkasse_clients
    results: dict[str, Any] = {
        "scenario": "kafka",
        "model": model,
        "gateway_workers": workers,
        "duration_s": duration,
        "partitions_per_topic": 1,
        "cases": [],
        "kafkasse": {"clients": peer_counts},
    }
    if peer_counts:
        started = time.monotonic()
        reason = ensure_kafkasse()
        results["kafkasse"]["install"] = reason or "ok"
        results["kafkasse"]["install_check_s"] = round(time.monotonic() - started, 1)
        if reason:
            peer_counts = []
    most = max([*clients, idle_clients, 1])
    with BenchBroker(broker_info) as broker, tempfile.TemporaryDirectory() as tmp:
        results["broker_start_s"] = round(broker.started_in, 1)
        idle_topic, floor_topic, *topics = broker.create_topics("bench-kafka", 2 + len(clients))
        peer_topics = dict(
            zip(peer_counts, broker.create_topics("bench-kafkasse", len(peer_counts)), strict=True)
        )
        ports = write_kafka_gateway_config(
            Path(tmp), broker.bootstrap, [idle_topic, *topics], model=model
        )
        values = stamped_values(model)
        producer = new_producer(broker.bootstrap)
        results["broker_floor"] = broker_floor(broker.bootstrap, floor_topic, producer)
        with (
            GatewayProcess(ports.config, workers=workers) as gateway,
            HeldStreams(ports.plain, max_streams=most, concurrency=128) as held,
        ):
            if idle_clients:
                results["idle"] = _idle(held, gateway, ports.plain, idle_topic, idle_clients)
            peer = KafkaSseServer(broker.bootstrap) if peer_counts else None
            if peer is not None:
                peer.__enter__()
            try:
                for count, rate, topic in zip(clients, per_count, topics, strict=True):
                    case = _deliver(
                        "ssegate", held, gateway.sample, ports.plain, topic, count, rate,
                        duration, producer, broker, SETTLE_SECONDS, values,
                        gateway.collections_in,
                    )  # fmt: skip
                    results["cases"].append(case)
                    if peer is not None and count in peer_counts:
                        peer_topic = peer_topics[count]
                        case = _deliver(
                            "kafkasse", held, peer.sample, peer.port, peer_topic, count, rate,
                            duration, producer, broker, kafkasse_settle, stamped_values("none"),
                        )  # fmt: skip
                        results["cases"].append(case)
            finally:
                if peer is not None:
                    results["kafkasse"]["log_tail"] = list(peer.output)[-3:]
                    peer.__exit__()
                producer.flush(5)
                del producer  # before the broker stops, or librdkafka logs its reconnects
    _ratios(results)
    return results


def broker_floor(
    bootstrap: str, topic: str, producer: Any, rate: float = 1000.0, duration: float = 2.0
) -> dict[str, Any]:
    """Latency from produce to a plain consumer's receive, polling every 5 ms."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ssegate-bench-floor",
         "enable.auto.commit": False, "fetch.wait.max.ms": 10}
    )  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    histogram = LatencyHistogram()
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            for record in consumer.consume(num_messages=1000, timeout=0.005):
                value = record.value()
                now = time.monotonic_ns()
                match = STAMPED_JSON.search(value) if value else None
                if match:
                    histogram.record((now - int(match[1])) // 1000)

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    time.sleep(SETTLE_SECONDS)
    produced = produce_at_rate(producer, topic, rate, duration)
    time.sleep(DRAIN_SECONDS)
    stop.set()
    reader.join(5)
    consumer.close()
    return {
        "rate": rate,
        "produced": produced.messages,
        "received": histogram.total,
        "latency_ms": histogram.summary(),
    }


def _idle(
    held: HeldStreams, gateway: GatewayProcess, port: int, topic: str, count: int
) -> dict[str, Any]:
    time.sleep(SETTLE_SECONDS)
    base = gateway.sample()
    opened = held.open([sse_request(f"/{topic}", port)] * count)
    time.sleep(SETTLE_SECONDS * 2)
    loaded = gateway.sample()
    held.close()
    time.sleep(SETTLE_SECONDS)
    return {
        "clients": count,
        "opened": opened.opened,
        "failed": opened.failed,
        "connects_per_s": opened.connects_per_s,
        "gateway_rss_base_mib": round(base.rss_bytes / 2**20, 1),
        "gateway_rss_loaded_mib": round(loaded.rss_bytes / 2**20, 1),
        "gateway_bytes_per_idle_stream": round(
            (loaded.rss_bytes - base.rss_bytes) / max(1, opened.opened)
        ),
        "errors": opened.errors,
    }


def _deliver(
    server: str,
    held: HeldStreams,
    server_sample: Callable[[], ProcessSample],
    port: int,
    topic: str,
    count: int,
    rate: float,
    duration: float,
    producer: Any,
    broker: BenchBroker,
    settle: float,
    values: StampedValue,
    collections: Callable[[float, float], dict[str, float | int]] | None = None,
) -> dict[str, Any]:
    """One case: ``count`` streams of ``server`` read ``rate`` messages/s for ``duration`` s.
    ``collections`` gives the server's full garbage collections in the measured window (a
    gateway's; a peer has none to report)."""
    rss_before_open = server_sample().rss_bytes
    opened = held.open([sse_request(f"/{topic}", port)] * count, port)
    time.sleep(settle)
    held.report()  # counts start now
    server_before, broker_before = server_sample(), broker.sample()
    busy_before, harness_before = machine_busy_seconds(), _harness_cpu()
    wall_before, load_average = time.monotonic(), os.getloadavg()[0]
    produced = produce_at_rate(producer, topic, rate, duration, encode=values)
    time.sleep(DRAIN_SECONDS)
    delivery = held.report()
    server_after, broker_after = server_sample(), broker.sample()
    busy = machine_busy_seconds() - busy_before
    harness = _harness_cpu() - harness_before
    wall = time.monotonic() - wall_before
    collected = collections(wall_before, wall_before + wall) if collections else {}
    held.close()
    time.sleep(0.5)
    server_cpu = server_after.cpu_seconds - server_before.cpu_seconds
    broker_cpu = broker_after.cpu_seconds - broker_before.cpu_seconds
    other = busy - server_cpu - broker_cpu - harness - delivery.cpu_seconds
    expected = produced.messages * opened.opened
    span = (delivery.last_ns - produced.started_ns) / 1e9 if delivery.last_ns else 0.0
    cpus = os.cpu_count() or 1
    delivered = validity.delivery(
        expected, delivery.received, delivery.duplicates, delivery.gaps, delivery.late, span
    )
    return {
        "server": server,
        "clients": count,
        "opened": opened.opened,
        "failed": opened.failed,
        "rate": rate,
        "produced": produced.messages,
        **delivered,
        "closed_early": delivery.closed_early,
        "offered_events_per_s": round(expected / duration, 1),
        "events_per_server_cpu_s": (
            round(delivered["distinct"] / server_cpu) if server_cpu else None
        ),
        **validity.client_load([delivery.cpu_seconds], wall),
        "latency_ms": delivery.latency_ms,
        "latency_ms_lower_bound": delivery.latency_ms_lower_bound,
        "latency_ms_sampled": delivery.latency_ms_sampled,
        "cpu_s": {
            "wall": round(wall, 2),
            "server": round(server_cpu, 2),
            "broker": round(broker_cpu, 2),
            "client": round(delivery.cpu_seconds, 2),
            "producer_and_harness": round(harness, 2),
            "other_work_on_machine": round(max(0.0, other), 2),
        },
        "machine_busy_share": round(busy / max(1e-9, wall * cpus), 2),
        "load_average_1min_at_start": round(load_average, 2),
        "server_rss_mib": round(server_after.rss_bytes / 2**20, 1),
        "server_rss_bytes_per_stream_at_open": round(
            (server_before.rss_bytes - rss_before_open) / max(1, opened.opened)
        ),
        "connects_per_s": opened.connects_per_s,
        "errors": opened.errors,
        **collected,
    }


def _ratios(results: dict[str, Any]) -> None:
    """ssegate over KafkaSSE, per client count both served: events/s and events per CPU-s."""
    by_key = {(c["server"], c["clients"]): c for c in results["cases"]}
    ratios = []
    for (server, count), ours in by_key.items():
        theirs = by_key.get(("kafkasse", count))
        if server != "ssegate" or theirs is None:
            continue
        entry: dict[str, Any] = {"clients": count}
        for field in ("delivered_events_per_s", "events_per_server_cpu_s"):
            if ours.get(field) and theirs.get(field):
                entry[field] = round(ours[field] / theirs[field], 2)
        p99_ours, p99_theirs = ours["latency_ms"]["p99"], theirs["latency_ms"]["p99"]
        if p99_ours and p99_theirs:
            entry["p99_latency_kafkasse_over_ssegate"] = round(p99_theirs / p99_ours, 2)
        ratios.append(entry)
    results["kafkasse"]["ratio_ssegate_over_kafkasse"] = ratios
