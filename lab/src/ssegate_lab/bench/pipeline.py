"""``ssegate bench pipeline``: records/s through the Spark pipeline, and latency to an SSE client.

:func:`run` starts its own Kafka broker (free ports, a temporary data directory, stopped after)
unless given one, and its own Spark session unless given one. It produces ``records`` small JSON
sensor readings into a raw topic, then times two pipelines with ``trigger(availableNow=True)``,
each ``runs`` times from a fresh checkpoint:

- ``stateless``: the ``json`` model with a JSON Schema (checked by the model in Python, and
  with ``validations`` including ``jvm`` by Spark expressions), the declared fields parsed, a
  ``where`` filter and a projection, written to a sink topic;
- ``windowed``: the same reading and checking, then 1 s tumbling windows per device (count, avg,
  max) over a watermark, written in append mode.

records/s is ``records`` over the query's wall time, from its start to its end; the session start
is reported on its own. Spark's own progress reports (batch durations, rows/s), the CPU split
(:mod:`ssegate_lab.bench.pipeline_cpu`) and the machine's load average come with each run.

The latency cases then run the stateless pipeline with each of ``triggers`` (pipeline file
syntax: ``0 seconds``, ``100 milliseconds``, ``real-time 5 seconds``, ``continuous 1 second``)
while a producer writes readings carrying their send time (``sent``) at ``latency_rate`` per
second. Each record is timed twice, at once: on the sink topic, by a consumer of it (the case's
own ``p50_ms`` … ``cdf_ms``: produce → Spark → sink), and at the end of the path a user sees, by
an SSE client of a real gateway serving the sink topic (its ``sse``: produce → Spark → sink →
gateway → client; :mod:`ssegate_lab.bench.pipeline_sse`). ``sse`` also says how many events the
client got, how many came twice (``duplicates``), how many records reached the sink and never
reached the client (``missing``), and the gateway's CPU seconds over the case. A trigger Spark
refuses for this job is reported with Spark's reason.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, Producer, TopicPartition

from ssegate.pipeline.config import Pipeline, Trigger, parse_pipeline, parse_trigger
from ssegate.pipeline.job import start_pipeline
from ssegate.pipeline.topics import TopicSpec, ensure_topics
from ssegate_lab.bench.pipeline_cpu import CpuShare
from ssegate_lab.bench.pipeline_sse import SseLeg, gateway_stream
from ssegate_lab.broker import start_broker, stop_broker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

FIELDS = "device STRING, tenant STRING, temperature DOUBLE, ts TIMESTAMP, sent BIGINT"
READING_SCHEMA = {
    "type": "object",
    "required": ["device", "tenant", "temperature", "ts"],
    "properties": {
        "device": {"type": "string"},
        "tenant": {"type": "string"},
        "temperature": {"type": "number"},
        "ts": {"type": "string"},
        "sent": {"type": "integer"},
    },
}
LATENCY_TRIGGERS = ("0 seconds", "100 milliseconds", "real-time 5 seconds", "continuous 1 second")
DEVICES = 100
READINGS_PER_EVENT_SECOND = 10_000
RAW_TOPIC = "bench.raw"
CDF_POINTS = (1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9)


def run(
    records: int = 1_000_000,
    runs: int = 3,
    *,
    cases: Sequence[str] = ("stateless", "windowed"),
    validations: Sequence[str] = ("python", "jvm"),
    partitions: int = 2,
    triggers: Sequence[str] = LATENCY_TRIGGERS,
    latency_seconds: float = 10.0,
    latency_rate: int = 1000,
    source_options: Mapping[str, str] | None = None,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    bootstrap: str | None = None,
) -> dict[str, Any]:
    """Run every case; ``spark``/``bootstrap`` reuse a session or broker instead of starting one.

    ``validations``: ``python`` (the model in an Arrow UDF, the default) and ``jvm`` (Spark
    expressions from the schema): each case runs with each, named ``<case>`` and ``<case>_jvm``.

    ``source_options`` go to Spark's Kafka source (``maxOffsetsPerTrigger``, say); ``conf`` to the
    session it starts (``spark.sql.execution.arrow.maxRecordsPerBatch``, say).
    """
    with tempfile.TemporaryDirectory(prefix="ssegate-bench-pipeline-") as tmp:
        work = Path(tmp)
        own_broker = bootstrap is None
        if bootstrap is None:
            started = time.monotonic()
            bootstrap = start_broker(
                _free_port(), work / "kafka", controller_port=_free_port(), heap="768m"
            ).bootstrap
            broker_start_s = time.monotonic() - started
        try:
            results: dict[str, Any] = {
                "scenario": "pipeline",
                "records": records,
                "runs": runs,
                "partitions": partitions,
                "master": master,
                "conf": dict(conf or {}),
                "source_options": dict(source_options or {}),
            }
            if own_broker:
                results["broker_start_s"] = round(broker_start_s, 2)
            session_start_s = None
            if spark is None:
                from ssegate.pipeline.session import spark_session

                started = time.monotonic()
                spark = spark_session(master, "ssegate-bench-pipeline", conf)
                session_start_s = time.monotonic() - started
            results["session_start_s"] = session_start_s and round(session_start_s, 2)
            raw = _unique(RAW_TOPIC)
            ensure_topics(bootstrap, [TopicSpec(raw, partitions)])
            results["produce"] = produce_readings(bootstrap, raw, records)
            bench = _Bench(spark, bootstrap, raw, work, dict(source_options or {}))
            for case in cases:
                for validation in validations:
                    name = case if validation == "python" else f"{case}_{validation}"
                    results[name] = bench.throughput(case, records, runs, validation)
            results["latency"] = {
                trigger_name(t): bench.latency(parse_trigger(t, "triggers"), latency_seconds,
                                               latency_rate)
                for t in triggers
            }  # fmt: skip
            return results
        finally:
            if own_broker:
                stop_broker(work / "kafka")


def produce_readings(bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    """``count`` readings, 10,000 per event-time second over 100 devices, produced in batches."""
    producer = Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
        "acks": 1,
    })  # fmt: skip
    started = time.monotonic()
    for index in range(count):
        value = _reading(index)
        while True:
            try:
                producer.produce(topic, value, key=value[11:21])
                break
            except BufferError:
                producer.poll(0.05)
        if index % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError(f"could not produce every reading to {topic}")
    seconds = time.monotonic() - started
    return {"records": count, "seconds": round(seconds, 2), "records_per_s": round(count / seconds)}


def _reading(index: int, sent: int = 0) -> bytes:
    second, part = divmod(index, READINGS_PER_EVENT_SECOND)
    minutes, seconds = divmod(second, 60)
    hours, minutes = divmod(minutes, 60)
    millis = part * 1000 // READINGS_PER_EVENT_SECOND
    return (
        f'{{"device":"device-{index % DEVICES:03d}","tenant":"acme",'
        f'"temperature":{15 + index % 250 / 10},'
        f'"ts":"2024-01-01T{hours % 24:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z",'
        f'"sent":{sent}}}'
    ).encode()


class _Bench:
    """The cases, sharing one session, one broker and one raw topic."""

    def __init__(
        self, spark: SparkSession, bootstrap: str, raw: str, work: Path, options: dict[str, str]
    ) -> None:
        self.spark, self.bootstrap, self.raw, self.work, self.options = (
            spark, bootstrap, raw, work, options,
        )  # fmt: skip
        self.sequence = 0

    def pipeline(self, case: str, raw: str, *, starting: str = "earliest") -> Pipeline:
        self.sequence += 1
        sink: dict[str, Any] = {"from": "readings", "topic": f"bench.{case}.{self.sequence}",
                                "key": "device"}  # fmt: skip
        if case == "windowed":
            sink["window"] = {
                "duration": "1 second",
                "group_by": ["device"],
                "aggregates": {
                    "count": "count(*)",
                    "avg": "avg(temperature)",
                    "max": "max(temperature)",
                },
            }
        else:
            sink["where"] = "temperature > 16"
            sink["select"] = {"device": "device", "celsius": "temperature", "sent": "sent"}
        source: dict[str, Any] = {
            "kafka": {"topic": raw, "starting_offsets": starting, "options": self.options},
            "model": {"model": "json", "catalog": {"schemas": [{"subject": "reading"}]}},
            "fields": FIELDS,
        }
        if case == "windowed":
            source.update(event_time="ts", watermark="1 second")
        return parse_pipeline({
            "name": f"bench-{case}",
            "bootstrap": self.bootstrap,
            "checkpoint": str(self.work / "checkpoints" / f"{case}-{self.sequence}"),
            "catalogs": {"schemas": {"type": "inline", "options": {
                "subjects": {"reading": {"schema": json.dumps(READING_SCHEMA)}}}}},
            "sources": {"readings": source},
            "sinks": {"out": sink},
        })  # fmt: skip

    def throughput(
        self, case: str, records: int, runs: int, validate: str = "python"
    ) -> dict[str, Any]:
        measured = []
        for _ in range(runs):
            pipeline = self.pipeline(case, self.raw)
            cpu = CpuShare()
            load_before = os.getloadavg()[0]
            started = time.monotonic()
            (query,) = start_pipeline(
                self.spark, pipeline, trigger="available_now", validate=validate
            )
            query.awaitTermination()
            seconds = time.monotonic() - started
            shares = cpu.shares()
            if query.exception() is not None:
                raise RuntimeError(f"{case}: {query.exception()}")
            sink = pipeline.sinks["out"].topic
            measured.append({
                "seconds": round(seconds, 2),
                "records_per_s": round(records / seconds),
                "sink_records": _end_offsets(self.bootstrap, sink),
                "load_1m": [round(load_before, 1), round(os.getloadavg()[0], 1)],
                **shares,
                "batches": [_batch(p) for p in _progress(query)],
            })  # fmt: skip
        rates = [m["records_per_s"] for m in measured]
        warm = rates[1:]
        return {
            "median_records_per_s": round(statistics.median(rates)),
            "median_seconds": statistics.median(m["seconds"] for m in measured),
            # the session's first run of the job pays for its start; the rest run warm
            "first_records_per_s": rates[0],
            "warm_median_records_per_s": round(statistics.median(warm)) if warm else None,
            "runs": measured,
        }

    def latency(self, trigger: Trigger, seconds: float, rate: int) -> dict[str, Any]:
        """Produce → sink and produce → SSE client latency of the stateless job with
        ``trigger``, or Spark's refusal."""
        raw = _unique("bench.live")
        ensure_topics(self.bootstrap, [TopicSpec(raw, 1)])
        pipeline = self.pipeline("stateless", raw, starting="latest")
        sink = pipeline.sinks["out"].topic
        ensure_topics(self.bootstrap, [TopicSpec(sink, 1)])
        # the gateway and its client first, so that the case starts on the query's first batch
        with gateway_stream(self.bootstrap, sink, self.work / "gateways" / sink) as sse:
            try:
                (query,) = start_pipeline(self.spark, pipeline, trigger=trigger)
            except Exception as exc:  # Spark refuses the plan with this trigger: the finding
                return {"supported": False, "reason": _first_line(str(exc))}
            try:
                return self._measure(query, trigger, raw, sink, seconds, rate, sse)
            finally:
                query.stop()

    def _measure(
        self, query: StreamingQuery, trigger: Trigger, raw: str, sink: str, seconds: float,
        rate: int, sse: SseLeg,
    ) -> dict[str, Any]:  # fmt: skip
        started = _wait_for_first_batch(query, trigger)
        if started is not None:
            return {"supported": False, "reason": started}
        load_before = os.getloadavg()[0]
        cpu = CpuShare()
        result = measure_latency(self.bootstrap, raw, sink, seconds, rate, sse)
        result.update(cpu.shares())
        result["load_1m"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
        batches = [_batch(p) for p in _progress(query)]
        durations = [b["duration_ms"] for b in batches if b["rows"]]
        if durations:
            result["median_batch_ms"] = statistics.median(durations)
        result["batches_with_rows"] = len(durations)
        return {"supported": True, **result}


def measure_latency(
    bootstrap: str, raw: str, sink: str, seconds: float, rate: int, sse: SseLeg | None = None
) -> dict[str, Any]:
    """Produce ``rate`` readings/s for ``seconds`` carrying their send time; time their arrival
    on ``sink`` and, given the ``sse`` leg, at its SSE client. Latencies are in milliseconds."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _unique("bench"),
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5})  # fmt: skip
    high = consumer.get_watermark_offsets(TopicPartition(sink, 0), timeout=10)[1]
    consumer.assign([TopicPartition(sink, 0, high)])
    expected = int(seconds * rate)
    gateway_cpu = sse.gateway.sample().cpu_seconds if sse is not None else 0.0
    producer_done = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
        started = time.monotonic()
        for index in range(expected):
            delay = started + index / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            producer.produce(raw, _reading(index, time.time_ns() // 1000))
            producer.poll(0)
        producer.flush(30)
        producer_done.set()

    thread = threading.Thread(target=produce, name="bench-producer", daemon=True)
    thread.start()
    latencies: list[float] = []
    offsets: list[int] = []
    deadline = time.monotonic() + seconds + 30
    quiet_since = time.monotonic()
    try:
        # Until the deadline, or 3 s without a record once some arrived and the producer is done.
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)  # one at a time: each gets its own arrival time
            arrived = time.time_ns() // 1000
            if message is not None and message.error() is None:
                sent = json.loads(message.value() or b"{}").get("sent", 0)
                latencies.append((arrived - sent) / 1000)
                offsets.append(message.offset() or 0)  # a fetched record always has one
                quiet_since = time.monotonic()
            elif latencies and producer_done.is_set() and time.monotonic() - quiet_since > 3:
                break
    finally:
        consumer.close()
        thread.join(35)
    result = {
        "rate": rate,
        "seconds": seconds,
        "received": len(latencies),
        **_latency_figures(latencies),
    }
    if sse is not None:
        result["sse"] = _sse_figures(sse, offsets, gateway_cpu)
    return result


def _latency_figures(latencies: list[float]) -> dict[str, Any]:
    """p50, p90, p99, max and the CDF of ``latencies`` (sorted in place)."""
    latencies.sort()
    return {
        **{f"p{q}_ms": _percentile(latencies, q) for q in (50, 90, 99)},
        "max_ms": round(latencies[-1], 1) if latencies else None,
        "cdf_ms": {str(q): _percentile(latencies, q) for q in CDF_POINTS},
    }


def _sse_figures(sse: SseLeg, sink_offsets: list[int], gateway_cpu: float) -> dict[str, Any]:
    """What the SSE client got of the records read from the sink (at ``sink_offsets``), once
    it has had :data:`~ssegate_lab.bench.pipeline_sse.DRAIN_SECONDS` to bring the rest, and
    the gateway's CPU seconds since it had ``gateway_cpu``."""
    delivered = sse.drain(sink_offsets)
    figures: dict[str, Any] = {
        "received": delivered.received,
        "duplicates": delivered.duplicates,
        "missing": delivered.missing,
        "not_in_sink": delivered.not_in_sink,
        "unreadable": delivered.unreadable,
        **_latency_figures(delivered.latencies_ms),
        "gateway_cpu_s": round(sse.gateway.sample().cpu_seconds - gateway_cpu, 2),
    }
    if sse.reader.error:
        figures.update(closed_early=1, stream_error=sse.reader.error)
    return figures


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    return round(values[min(len(values) - 1, int(len(values) * q / 100))], 1)


def _wait_for_first_batch(query: StreamingQuery, trigger: Trigger) -> str | None:
    """Wait until the query reports progress (real-time mode: until its first batch is
    running); ``None`` then, or why the query failed."""
    deadline = time.monotonic() + 60 + (trigger.seconds if trigger.kind == "real-time" else 0)
    while time.monotonic() < deadline:
        if query.exception() is not None:
            return _first_line(str(query.exception()))
        if not query.isActive:
            return "the query stopped"
        if query.recentProgress or (trigger.kind != "interval" and query.status["isTriggerActive"]):
            return None
        time.sleep(0.1)
    return None


def _progress(query: StreamingQuery) -> list[dict[str, Any]]:
    return [json.loads(p.json) for p in query.recentProgress]


def _batch(progress: Mapping[str, Any]) -> dict[str, Any]:
    durations = progress.get("durationMs", {})
    return {
        "rows": progress.get("numInputRows", 0),
        "duration_ms": durations.get("triggerExecution"),
        "add_batch_ms": durations.get("addBatch"),
        "processed_rows_per_s": round(progress.get("processedRowsPerSecond") or 0),
    }


def _end_offsets(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _unique("bench")})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        )
    finally:
        consumer.close()


def trigger_name(trigger: str) -> str:
    """``0 seconds`` → ``trigger_0``, ``100 milliseconds`` → ``trigger_100ms``, ``real-time 5
    seconds`` → ``real_time_5s``."""
    return trigger_key(parse_trigger(trigger, "triggers"))


def trigger_key(spec: Trigger) -> str:
    """A trigger's name in the result's ``latency`` (see :func:`trigger_name`)."""
    if spec.kind == "interval":
        return "trigger_0" if spec.seconds == 0 else f"trigger_{round(spec.seconds * 1000)}ms"
    return f"{spec.kind.replace('-', '_')}_{spec.seconds:g}s"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "no message"


def _unique(name: str) -> str:
    return f"{name}.{time.time_ns() % 10**12:012d}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
