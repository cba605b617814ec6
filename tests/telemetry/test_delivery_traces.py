"""Delivery traces end to end: a real broker, a real gateway process, a real collector.

Records are produced to a real Kafka broker and streamed through the gateway to an SSE client;
the gateway's ``otlp`` exporter sends their delivery traces to the collector ``./run setup``
builds, whose debug exporter writes every span it receives to its log, which the tests read.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from calendar import timegm
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from tests.telemetry.test_otlp_collector import Collector, received

from ssegate.engine.runtime import free_ports
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

pytestmark = pytest.mark.integration

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"

CONFIG = """\
name: traces
telemetry:
  exporters:
    otlp0:
      type: otlp
      options:
        interval: 1
        signals: [metrics, traces]
        traces: {{sampling: {sampling}}}
        endpoint: {{location: "http://127.0.0.1:{otlp}"}}
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {{host: 127.0.0.1, port: {port}}}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    routes:
      - exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    exit: north_sse_kafka_mapping
  north_sse_kafka_mapping:
    type: sse-kafka
    kind: proxy
    routes:
      - when:
          - path: /{{topic}}
        exit: north_kafka_cache_client
        with:
          topic: ${{params.topic}}
  north_kafka_cache_client:
    type: kafka
    kind: cache_client
    exit: south_kafka_cache_server
  south_kafka_cache_server:
    type: kafka
    kind: cache_server
    exit: south_kafka_client
  south_kafka_client:
    type: kafka
    kind: client
    options:
      servers: [{bootstrap}]
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
"""

PIPELINES = (
    "    metrics: {receivers: [otlp], exporters: [debug]}\n"
    "    traces: {receivers: [otlp], exporters: [debug]}\n"
)


def spans(output: str) -> list[dict[str, str]]:
    """Each span the debug exporter wrote: its fields (``Trace ID``, ``Name``...) and its
    attributes (``-> ssegate.streams.written``)."""
    found: list[dict[str, str]] = []
    span: dict[str, str] | None = None
    for line in output.splitlines():
        text = line.strip()
        if text.startswith("Span #"):
            span = {}
            found.append(span)
        elif span is not None and text.startswith("-> "):
            key, _, value = text.partition(": ")
            span[key] = value
        elif span is not None and " : " in line:  # "Parent ID      : " when it has none
            key, _, value = line.partition(" : ")
            span[key.strip()] = value.strip()
        elif not line.startswith((" ", "Attributes:")):
            span = None
    return found


def nanos(stamp: str) -> int:
    """``2024-05-01 10:00:00.012345678 +0000 UTC`` in ns since the epoch."""
    found = re.fullmatch(
        r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? \+0000 UTC", stamp
    )
    assert found is not None, stamp
    *fields, fraction = found.groups()
    seconds = timegm((*(int(f) for f in fields), 0, 0, 0))
    return seconds * 1_000_000_000 + int((fraction or "").ljust(9, "0"))


def start_gateway(
    tmp_path: Path, broker: BrokerInfo, sampling: float
) -> tuple[Collector, GatewayProcess, int, str]:
    port, otlp = free_ports(2)
    topic = f"traces-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    collector = Collector(tmp_path, otlp)
    head = collector.config.read_text().split("  pipelines:\n")[0]
    collector.config.write_text(f"{head}  pipelines:\n{PIPELINES}")
    config = tmp_path / "zilla.yaml"
    config.write_text(
        CONFIG.format(port=port, otlp=otlp, sampling=sampling, bootstrap=broker.bootstrap)
    )
    return collector, GatewayProcess(config), port, topic


async def stream_while_producing(
    port: int, topic: str, bootstrap: str, records: list[tuple[bytes, list[tuple[str, bytes]]]]
) -> list[str]:
    """Open ``/topic``; once a first record has come through live, produce ``records`` and
    read them: the data of every event read."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    seen: list[str] = []
    parser = SseParser()
    produced = False
    async with httpx.AsyncClient(timeout=30) as client:
        url = f"http://127.0.0.1:{port}/{topic}"
        async with client.stream("GET", url, headers={"accept": "text/event-stream"}) as response:
            assert response.status_code == 200
            producer.produce(topic, b"warm-up")
            producer.flush(30)
            async with asyncio.timeout(60):
                async for chunk in response.aiter_raw():
                    seen += [e.data for e in parser.feed(chunk) if isinstance(e, SseEvent)]
                    if seen and not produced:
                        for value, headers in records:
                            producer.produce(topic, value, headers=headers)
                        producer.flush(30)
                        produced = True
                    if len(seen) > len(records):
                        break
    return seen


def test_a_record_with_traceparent_is_delivered_under_its_producers_span_stage_by_stage(
    tmp_path: Path, kafka_broker: BrokerInfo
) -> None:
    collector, gateway, port, topic = start_gateway(tmp_path, kafka_broker, 1.0)
    traceparent = [("traceparent", f"00-{TRACE}-{PARENT}-01".encode())]
    records = [(b"traced", traceparent), (b"untraced", [])]
    with collector, gateway:
        seen = asyncio.run(stream_while_producing(port, topic, kafka_broker.bootstrap, records))
        assert seen == ["warm-up", "traced", "untraced"]

        def delivered(text: str) -> bool:
            names = [s.get("Name", "") for s in spans(text)]
            return names.count(f"deliver {topic}") >= 3 and names.count("write") >= 3

        output = collector.wait_for(delivered, "the three records' delivery spans")
    found = spans(output)
    by_id = {span["ID"]: span for span in found}
    deliveries = {
        span["-> messaging.kafka.offset"]: span
        for span in found
        if span["Name"] == f"deliver {topic}"
    }
    traced, untraced = deliveries["Int(1)"], deliveries["Int(2)"]
    assert (traced["Trace ID"], traced["Parent ID"], traced["Kind"]) == (TRACE, PARENT, "Consumer")
    assert traced["-> messaging.destination.name"] == f"Str({topic})"
    assert traced["-> messaging.destination.partition.id"] == "Str(0)"
    assert traced["-> ssegate.streams.written"] == "Int(1)"
    assert traced["-> ssegate.streams.stalled"] == "Int(0)"
    assert traced["-> ssegate.binding"] == "Str(south_kafka_cache_server)"
    stages = {
        span["Name"]: span
        for span in found
        if span["Trace ID"] == TRACE and span["ID"] != traced["ID"]
    }
    assert set(stages) == {"handover", "fanout", "write"}
    assert stages["handover"]["Parent ID"] == stages["fanout"]["Parent ID"] == traced["ID"]
    assert by_id[stages["write"]["Parent ID"]]["Name"] == "fanout"
    times = [
        nanos(traced["Start time"]),
        nanos(stages["handover"]["End time"]),
        nanos(stages["write"]["Start time"]),
        nanos(stages["write"]["End time"]),
        nanos(traced["End time"]),
    ]
    assert times == sorted(times)
    assert nanos(stages["handover"]["Start time"]) == times[0]
    assert nanos(stages["fanout"]["Start time"]) == times[1]
    assert times[-1] - times[0] < 60 * 1_000_000_000
    assert untraced["Trace ID"] not in (TRACE, "0" * 32)
    assert untraced["Parent ID"] == ""
    assert untraced["-> ssegate.streams.written"] == "Int(1)"


def test_with_sampling_zero_nothing_is_exported_even_for_a_sampled_traceparent(
    tmp_path: Path, kafka_broker: BrokerInfo
) -> None:
    collector, gateway, port, topic = start_gateway(tmp_path, kafka_broker, 0)
    records = [(b"traced", [("traceparent", f"00-{TRACE}-{PARENT}-01".encode())])]
    with collector, gateway:
        seen = asyncio.run(stream_while_producing(port, topic, kafka_broker.bootstrap, records))
        assert seen == ["warm-up", "traced"]

        def counted_both(text: str) -> bool:
            return any(
                name == "ssegate.kafka.messages.received" and value == "Value: 2.000000"
                for name, _, value in received(text).points
            )

        output = collector.wait_for(counted_both, "an export made after both deliveries")
    assert spans(output) == []
