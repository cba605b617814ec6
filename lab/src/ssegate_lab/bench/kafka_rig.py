"""What the jwt and kafka benchmarks stand on: a throwaway broker, a gateway config, a producer.

:class:`BenchBroker` starts the local broker (:func:`~ssegate_lab.broker.start_broker`) on
free loopback ports in a temporary data directory, creates the topics a run needs, and stops the
broker and deletes the directory at the end. :func:`write_kafka_gateway_config` writes the chain
of ``examples/sse.kafka`` (tcp → http → sse server → sse-kafka → kafka cache → broker) with a
plain and a TLS port, the route ``/{topic}``, and optionally a ``jwt`` guard on the sse route.
:func:`produce_at_rate` produces stamped JSON values (``{"t":<monotonic_ns>,"n":<seq>}``) at a
fixed rate with confluent-kafka, a batch every few milliseconds; given ``records``, each a
:class:`Record` (a key or none, headers, a partition of its own).

With a topic **model** the config checks every value: ``json`` puts a ``json`` model of
:data:`STAMPED_JSON_SCHEMA` on the cache server's ``topics[]``; ``avro`` puts an ``avro`` model
of :data:`STAMPED_AVRO_SCHEMA` with ``view: json`` on the cache client's ``topics[]`` (the view
lives there), and the values are then produced as Avro in the Confluent wire format
(:func:`stamped_values`), which the view turns back into the same JSON text. Both schemas sit
in an inline catalog of one subject, so the Avro schema id is 1.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.foundation import PASSWORD
from ssegate_lab.bench.gateway import ProcessSample, sample
from ssegate_lab.broker import BrokerInfo, start_broker, stop_broker

GUARD_ISSUER = "https://bench.ssegate.invalid"
GUARD_AUDIENCE = "ssegate-bench"
GUARD_ROLE = "bench:stream"
MODELS = ("none", "json", "avro")
"""What checks the bench topics' values: nothing, a ``json`` model, an ``avro`` model."""
STAMPED_JSON_SCHEMA = {
    "type": "object",
    "properties": {"t": {"type": "integer"}, "n": {"type": "integer"}},
    "required": ["t", "n"],
    "additionalProperties": False,
}
STAMPED_AVRO_SCHEMA = {
    "type": "record",
    "name": "Stamped",
    "fields": [{"name": "t", "type": "long"}, {"name": "n", "type": "long"}],
}
AVRO_SCHEMA_ID = 1
"""The id of the only subject of the bench's inline catalog (subjects are numbered from 1)."""
CATALOG = "bench_catalog"
SUBJECT = "stamped-value"

StampedValue = Callable[[int, int], bytes]
"""``(t, n)`` → the bytes produced."""


class BenchBroker:
    """A broker of one run: free ports, a temp data dir, stopped and removed on exit.

    Given a running broker (``existing``, say a test session's), it uses that one and leaves
    it running.
    """

    def __init__(self, existing: BrokerInfo | None = None, timeout: float = 120.0) -> None:
        self.timeout = timeout
        self.existing = existing
        self.data_dir = Path(tempfile.mkdtemp(prefix="ssegate-bench-kafka-"))
        self.info: BrokerInfo | None = existing
        self.started_in = 0.0

    def __enter__(self) -> BenchBroker:
        if self.existing is not None:
            return self
        started = time.monotonic()
        try:
            self.info = start_broker(
                free_port(), self.data_dir, controller_port=free_port(), timeout=self.timeout
            )
        except BaseException:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise
        self.started_in = time.monotonic() - started
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.info is not None and self.existing is None:
                stop_broker(self.data_dir)
        finally:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    @property
    def bootstrap(self) -> str:
        assert self.info is not None
        return self.info.bootstrap

    @property
    def pid(self) -> int:
        assert self.info is not None
        return self.info.pid

    def sample(self) -> ProcessSample:
        return sample(self.pid)

    def create_topics(self, prefix: str, count: int, partitions: int = 1) -> list[str]:
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        names = [f"{prefix}-{uuid.uuid4().hex[:8]}" for _ in range(count)]
        if not names:
            return names
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(name, partitions, 1) for name in names])
        for future in futures.values():
            future.result(30)
        return names


@dataclass(frozen=True, slots=True)
class GatewayPorts:
    config: Path
    plain: int
    tls: int


KEY_FILTER = """\
          filters:
            - key: ${params.key}
"""


def write_kafka_gateway_config(
    workdir: Path,
    bootstrap: str,
    topics: list[str],
    *,
    guard_keys: list[dict[str, str]] | None = None,
    model: str = "none",
    keyed: bool = False,
    default_offset: str | None = None,
    sse_options: dict[str, object] | None = None,
    metrics_port: int | None = None,
    cache_max_bytes: int | None = None,
    cache_max_age: float | None = None,
    routes: str | None = None,
    topic_options: dict[str, object] | None = None,
    traces: tuple[int, float] | None = None,
) -> GatewayPorts:
    """The sse.kafka example's chain serving ``/{topic}``; a jwt guard when keys are given;
    every topic's values checked by ``model`` (one of :data:`MODELS`). ``keyed`` serves
    ``/{topic}/{key}`` instead: each stream filtered on the message key from its path.
    ``routes`` replaces both: the sse-kafka proxy's routes, YAML indented to stand under its
    ``routes:``. ``default_offset`` sets every topic's ``defaultOffset`` and ``topic_options``
    are added to every cache server ``topics[]`` entry (``transforms``, say), with no model only.
    ``sse_options`` are the sse server's ``options``; with ``metrics_port`` the gateway serves
    its metrics in the Prometheus format at ``http://127.0.0.1:<metrics_port>/metrics``;
    ``cache_max_bytes`` and ``cache_max_age`` bound the cache server's cache (``cache.max-bytes``,
    ``cache.max-age``). Every server of a
    cluster's comma-separated ``bootstrap`` is one of the kafka client's ``servers``. With
    ``traces`` ``(port, sampling)`` an ``otlp`` exporter sends delivery traces of that share of
    records to a collector on ``http://127.0.0.1:<port>``."""
    from ssegate_lab.testing.certs import make_keystore

    make_keystore(workdir / "localhost.p12", alias="localhost", password=PASSWORD)
    plain, tls = free_port(), free_port()
    guards = ""
    authorization = ""
    sse_routes = "    exit: north_sse_kafka_mapping\n"
    if guard_keys is not None:
        guards = (
            "guards:\n  authn_jwt:\n    type: jwt\n    options:\n"
            f"      issuer: {GUARD_ISSUER}\n      audience: {GUARD_AUDIENCE}\n"
            f"      keys: {json.dumps(guard_keys)}\n"
        )
        authorization = (
            "    options:\n      authorization:\n        authn_jwt:\n          credentials:\n"
            "            headers:\n              authorization: Bearer {credentials}\n"
        )
        sse_routes = (
            "    routes:\n      - guarded:\n          authn_jwt:\n"
            f"            - {GUARD_ROLE}\n        exit: north_sse_kafka_mapping\n"
        )
    catalogs, client_options, server_topics = _topic_models(model, topics)
    if default_offset is not None or topic_options:
        if model != "none":
            raise ValueError("default_offset and topic_options go with model 'none'")
        offset = {} if default_offset is None else {"defaultOffset": default_offset}
        entries = [{"name": topic, **offset, **(topic_options or {})} for topic in topics]
        server_topics = f"      topics: {json.dumps(entries)}\n"
    sse_server_options = f"    options: {json.dumps(sse_options)}\n" if sse_options else ""
    cache = {"max-bytes": cache_max_bytes, "max-age": cache_max_age}
    if any(value is not None for value in cache.values()):
        bounds = {name: value for name, value in cache.items() if value is not None}
        server_topics += f"      cache: {json.dumps(bounds)}\n"
    if routes is None:
        routes = (
            f"      - when:\n          - path: {'/{topic}/{key}' if keyed else '/{topic}'}\n"
            "        exit: north_kafka_cache_client\n        with:\n"
            f"          topic: ${{params.topic}}\n{KEY_FILTER if keyed else ''}"
        )
    telemetry = ""
    if metrics_port is not None:
        telemetry = (
            "telemetry:\n  exporters:\n    metrics:\n      type: prometheus\n      options:\n"
            f"        endpoints: [{{scheme: http, port: {metrics_port}, path: /metrics}}]\n"
        )
    if traces is not None:
        telemetry = telemetry or "telemetry:\n  exporters:\n"
        telemetry += (
            "    traces:\n      type: otlp\n      options:\n        interval: 1\n"
            f"        signals: [traces]\n        traces: {{sampling: {traces[1]}}}\n"
            f"        endpoint: {{location: 'http://127.0.0.1:{traces[0]}'}}\n"
        )
    config = workdir / "zilla.yaml"
    config.write_text(
        f"""\
name: bench-kafka
{telemetry}vaults:
  server:
    type: filesystem
    options:
      keys:
        store: localhost.p12
        password: {PASSWORD}
{catalogs}{guards}bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options:
      host: 127.0.0.1
      port: [{plain}, {tls}]
    routes:
      - when:
          - port: {tls}
        exit: north_tls_server
    exit: north_http_server
  north_tls_server:
    type: tls
    kind: server
    vault: server
    options:
      keys: [localhost]
      alpn: [http/1.1]
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
{authorization}    routes:
      - exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
{sse_server_options}{sse_routes}  north_sse_kafka_mapping:
    type: sse-kafka
    kind: proxy
    routes:
{routes}  north_kafka_cache_client:
    type: kafka
    kind: cache_client
{client_options}    exit: south_kafka_cache_server
  south_kafka_cache_server:
    type: kafka
    kind: cache_server
    options:
      bootstrap: {json.dumps(topics)}
{server_topics}    exit: south_kafka_client
  south_kafka_client:
    type: kafka
    kind: client
    options:
      servers: {json.dumps(bootstrap.split(","))}
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
"""
    )
    return GatewayPorts(config, plain, tls)


def _topic_models(model: str, topics: list[str]) -> tuple[str, str, str]:
    """The config's ``catalogs`` block, the cache client's ``options`` and the cache server's
    ``topics`` lines for ``model``."""
    if model not in MODELS:
        raise ValueError(f"{model!r} is not a bench model ({', '.join(MODELS)})")
    if model == "none":
        return "", "", ""
    schema = STAMPED_JSON_SCHEMA if model == "json" else STAMPED_AVRO_SCHEMA
    catalogs = (
        f"catalogs:\n  {CATALOG}:\n    type: inline\n    options:\n      subjects:\n"
        f"        {SUBJECT}:\n          schema: {json.dumps(json.dumps(schema))}\n"
    )
    value: dict[str, object] = {"model": model, "catalog": {CATALOG: [{"subject": SUBJECT}]}}
    if model == "avro":
        value["view"] = "json"
    entries = json.dumps([{"name": topic, "value": value} for topic in topics])
    if model == "json":
        return catalogs, "", f"      topics: {entries}\n"
    return catalogs, f"    options:\n      topics: {entries}\n", ""


def stamped_values(model: str) -> StampedValue:
    """How the bench writes ``{"t": t, "n": n}`` for ``model``: JSON text, or Avro framed with
    :data:`AVRO_SCHEMA_ID` for ``avro``."""
    if model != "avro":
        return lambda t, n: b'{"t":%d,"n":%d}' % (t, n)
    import fastavro

    from ssegate.models.schemas import frame

    parsed = fastavro.parse_schema(STAMPED_AVRO_SCHEMA)

    def avro(t: int, n: int) -> bytes:
        body = io.BytesIO()
        fastavro.schemaless_writer(body, parsed, {"t": t, "n": n})
        return frame(AVRO_SCHEMA_ID, body.getvalue())

    return avro


@dataclass(frozen=True, slots=True)
class Produced:
    messages: int
    first_sequence: int
    started_ns: int
    ended_ns: int


KeyedMessage = Callable[[int], tuple[bytes, bytes]]
"""Given the produce time (``time.monotonic_ns()``), a message's ``(key, value)``."""


@dataclass(frozen=True, slots=True)
class Record:
    """One record to produce, as the producer is handed it."""

    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    partition: int | None = None
    """``None``: the producer's partitioner picks one (by the key, when there is one)."""

    def produce_options(self) -> dict[str, Any]:
        """The ``headers`` and ``partition`` arguments of ``Producer.produce`` it sets."""
        options: dict[str, Any] = {}
        if self.headers:
            options["headers"] = list(self.headers)
        if self.partition is not None:
            options["partition"] = self.partition
        return options


RecordMessage = Callable[[int], Record]
"""Given the produce time (``time.monotonic_ns()``), the record to produce."""


def produce_at_rate(
    producer: Any, topic: str, rate: float, duration: float, *, first_sequence: int = 0,
    tick: float = 0.005, encode: StampedValue | None = None, keyed: KeyedMessage | None = None,
    records: RecordMessage | None = None,
) -> Produced:  # fmt: skip
    """Produce ``rate`` stamped messages/s to ``topic`` for ``duration`` s, then flush; values
    written by ``encode`` (default: JSON text), keys and values by ``keyed``, or whole records
    by ``records``."""
    value_of = encode or stamped_values("none")
    total = max(1, round(rate * duration))
    written = 0
    started = time.monotonic_ns()
    while written < total:
        elapsed = (time.monotonic_ns() - started) / 1e9
        due = min(total, int(rate * elapsed) + 1) - written
        for _ in range(due):
            key: bytes | None = None
            options: dict[str, Any] = {}
            if records is not None:
                record = records(time.monotonic_ns())
                key, value, options = record.key, record.value, record.produce_options()
            elif keyed is None:
                value = value_of(time.monotonic_ns(), first_sequence + written)
            else:
                key, value = keyed(time.monotonic_ns())
            try:
                producer.produce(topic, value=value, key=key, **options)
            except BufferError:
                producer.poll(0.01)
                producer.produce(topic, value=value, key=key, **options)
            written += 1
        producer.poll(0)
        time.sleep(tick)
    producer.flush(30)
    return Produced(written, first_sequence, started, time.monotonic_ns())


def new_producer(bootstrap: str) -> Any:
    """The load's producer. It sends each record as soon as it is produced (``linger.ms`` 0):
    the stamp is taken when the record is handed over, so a producer that waited to batch would
    count its own wait as the latency from Kafka to the browser (2 ms of it per record at
    ``linger.ms`` 2, librdkafka's batching at light load)."""
    from confluent_kafka import Producer

    return Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "queue.buffering.max.messages": 1_000_000}
    )
