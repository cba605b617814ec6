"""Seed 003's chain end to end: client → http(s) → ssegate → sse-kafka → kafka cache → broker.

The gateway is a real ``ssegate start`` process on ``examples/sse.kafka/zilla.yaml``; Kafka is
the real local broker; messages are produced with confluent-kafka; clients are httpx over
HTTP/1.1 and h2. Every test uses topics of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from ssegate.bindings.sse_kafka.event_id import decode_progress, progress_of_last_event_id
from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.certs import make_keystore
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sse.kafka"
PASSWORD = "kafka-secret"
SSE = {"accept": "text/event-stream"}


@dataclass(frozen=True)
class Gateway:
    http_port: int
    https_port: int
    ca: Path

    def url(self, path: str) -> str:
        return f"http://localhost:{self.http_port}{path}"

    def client(self, *, http2: bool = False, timeout: float = 10.0) -> httpx.AsyncClient:
        return httpx.AsyncClient(http2=http2, http1=not http2, timeout=timeout)


def start_gateway(root: Path, bootstrap: str) -> tuple[GatewayProcess, Gateway]:
    bundle = make_keystore(root / "localhost.p12", alias="localhost", password=PASSWORD)
    http_port, https_port = free_port(), free_port()
    env = {
        "SSEGATE_KEYSTORE": str(bundle.keystore),
        "KEYSTORE_PASSWORD": PASSWORD,
        "SSEGATE_HOST": "127.0.0.1",
        "SSEGATE_HTTP_PORT": str(http_port),
        "SSEGATE_HTTPS_PORT": str(https_port),
        "SSEGATE_WWW": str(EXAMPLE / "www"),
        "KAFKA_BOOTSTRAP": bootstrap,
    }
    process = GatewayProcess(EXAMPLE / "zilla.yaml", env=env, expect_listeners=2)
    return process, Gateway(http_port, https_port, bundle.ca_pem)


class Kafka:
    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self.topics: dict[str, str] = {}

    def topic(self, partitions: int = 3, **config: str) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        futures = self.admin.create_topics([NewTopic(name, partitions, 1, config=config)])
        futures[name].result(30)
        return name

    def send(
        self,
        topic: str,
        partition: int,
        value: str | None,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.producer.produce(
            topic,
            value=None if value is None else value.encode(),
            key=None if key is None else key.encode(),
            partition=partition,
            headers=list((headers or {}).items()),
        )

    def flush(self) -> None:
        assert self.producer.flush(30) == 0


TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "order-http1.1": (3, {}),
    "order-h2": (3, {}),
    "live": (3, {}),
    "filters": (3, {}),
    "random": (3, {}),
    "compacted": (1, {"cleanup.policy": "compact"}),
    "moving": (3, {}),
    "moving-keyed": (3, {}),
    "refusals": (1, {}),
}
"""Every topic the tests use, created before the gateway starts (the gateway then knows them)."""


@pytest.fixture(scope="module")
def kafka(kafka_broker: BrokerInfo) -> Kafka:
    kafka = Kafka(kafka_broker.bootstrap)
    for name, (partitions, config) in TOPICS.items():
        kafka.topics[name] = kafka.topic(partitions, **config)
    return kafka


@pytest.fixture(scope="module")
def gateway(
    kafka: Kafka, kafka_broker: BrokerInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    process, gateway = start_gateway(tmp_path_factory.mktemp("gw"), kafka_broker.bootstrap)
    with process:
        yield gateway


class Stream:
    """One open SSE response, read event by event; remembers the last committed id."""

    def __init__(self, response: httpx.Response, last_id: str = "") -> None:
        self.response = response
        self.parser = SseParser(last_event_id=last_id)
        self._chunks = response.aiter_raw()
        self.pending: list[SseEvent] = []

    async def read(self, count: int, timeout: float = 15.0) -> list[SseEvent]:
        async def fill() -> None:
            while len(self.pending) < count:
                chunk = await anext(self._chunks)
                self.pending += [e for e in self.parser.feed(chunk) if isinstance(e, SseEvent)]

        await asyncio.wait_for(fill(), timeout)
        events, self.pending = self.pending[:count], self.pending[count:]
        return events


async def collect(gateway: Gateway, path: str, count: int, *, http2: bool = False) -> Stream:
    async with (
        gateway.client(http2=http2) as client,
        client.stream("GET", gateway.url(path), headers=SSE) as response,
    ):
        assert response.status_code == 200, await response.aread()
        stream = Stream(response)
        stream.pending = await stream.read(count)
        return stream


def by_partition(events: list[SseEvent]) -> dict[int, list[str]]:
    """Partition of each event, from the progress its id moved, with the event's data."""
    seen: dict[int, list[str]] = {}
    before: dict[int, int] = {}
    for event in events:
        after = progress_of_last_event_id(event.id)
        moved = [p for p, o in after.items() if before.get(p) != o]
        assert len(moved) == 1, (before, after)
        seen.setdefault(moved[0], []).append(event.data)
        before = after
    return seen


@pytest.mark.parametrize("http2", [False, True], ids=["http1.1", "h2"])
def test_a_three_partition_topic_streams_in_partition_order(
    gateway: Gateway, kafka: Kafka, http2: bool
) -> None:
    topic = kafka.topics[f"order-{'h2' if http2 else 'http1.1'}"]
    for n in range(4):
        for p in range(3):
            kafka.send(topic, p, f"p{p}-{n}", key=f"k{p}")
    kafka.flush()
    stream = asyncio.run(collect(gateway, f"/{topic}", 12, http2=http2))
    assert stream.response.headers["content-type"] == "text/event-stream"
    assert by_partition(stream.pending) == {p: [f"p{p}-{n}" for n in range(4)] for p in range(3)}
    assert decode_progress(stream.pending[-1].id) == {0: 4, 1: 4, 2: 4}


def test_live_messages_arrive_while_other_partitions_stay_empty(
    gateway: Gateway, kafka: Kafka
) -> None:
    topic = kafka.topics["live"]

    async def scenario() -> list[SseEvent]:
        async with (
            gateway.client() as client,
            client.stream("GET", gateway.url(f"/{topic}"), headers=SSE) as response,
        ):
            assert response.status_code == 200
            kafka.send(topic, 2, "only p2")
            kafka.flush()
            return await Stream(response).read(1)

    [event] = asyncio.run(scenario())
    assert event.data == "only p2"
    assert decode_progress(event.id) == {2: 1}


def test_filters_by_key_by_header_by_both_and_static_or(gateway: Gateway, kafka: Kafka) -> None:
    topic = kafka.topics["filters"]
    rows = [
        ("fred", "eu", "", "fred-eu"),
        ("fred", "us", "", "fred-us"),
        ("wilma", "eu", "gold", "wilma-eu-gold"),
        ("vip", "us", "", "vip-us"),
        ("barney", "us", "", "barney-us"),
    ]
    for n, (key, zone, tier, value) in enumerate(rows):
        headers = {"zone": zone} | ({"tier": tier} if tier else {})
        kafka.send(topic, n % 3, value, key=key, headers=headers)
    kafka.send(topic, 0, "end", key="end", headers={"zone": "end", "tier": "gold"})
    kafka.flush()

    async def values(path: str, count: int) -> list[str]:
        stream = await collect(gateway, path, count)
        return sorted(e.data for e in stream.pending if e.data != "end")

    async def scenario() -> dict[str, list[str]]:
        return {
            "key": await values(f"/{topic}/key/fred", 2),
            "zone": await values(f"/{topic}/zone/eu", 2),
            "both": await values(f"/{topic}/key/fred/zone/us", 1),
            "vip": await values(f"/vip/{topic}", 3),
        }

    assert asyncio.run(scenario()) == {
        "key": ["fred-eu", "fred-us"],
        "zone": ["fred-eu", "wilma-eu-gold"],
        "both": ["fred-us"],
        "vip": ["vip-us", "wilma-eu-gold"],
    }


def test_200_random_disconnects_lose_and_repeat_nothing(gateway: Gateway, kafka: Kafka) -> None:
    topic = kafka.topics["random"]
    total = 450
    rng = random.Random(1628)

    async def produce() -> None:
        for n in range(total):
            kafka.send(topic, n % 3, f"{n % 3}:{n // 3}", key=str(n % 7))
            if n % 15 == 0:
                kafka.producer.poll(0)
                await asyncio.sleep(0.01)
        await asyncio.to_thread(kafka.flush)

    async def consume() -> tuple[list[SseEvent], int]:
        received: list[SseEvent] = []
        last_id = ""
        reconnects = 0
        async with gateway.client(http2=True) as client:
            while len(received) < total or reconnects < 200:
                headers = SSE | ({"last-event-id": last_id} if last_id else {})
                async with client.stream(
                    "GET", gateway.url(f"/{topic}"), headers=headers
                ) as response:
                    assert response.status_code == 200
                    stream = Stream(response, last_id)
                    want = min(rng.randint(0, 4), total - len(received))
                    if want:
                        received += await stream.read(want)
                    received += stream.pending  # parsed with the last chunk: delivered too
                    last_id = stream.parser.last_event_id
                reconnects += 1
        return received, reconnects

    async def scenario() -> tuple[list[SseEvent], int]:
        producing = asyncio.create_task(produce())
        try:
            return await consume()
        finally:
            await producing

    received, reconnects = asyncio.run(scenario())
    assert reconnects >= 200
    values = [e.data for e in received]
    assert len(values) == len(set(values)) == total
    for p in range(3):
        mine = [int(v.split(":")[1]) for v in values if v.startswith(f"{p}:")]
        assert mine == list(range(total // 3))


def test_tombstones_on_a_compacted_topic_are_delete_events(gateway: Gateway, kafka: Kafka) -> None:
    topic = kafka.topics["compacted"]
    kafka.send(topic, 0, "v1", key="a")
    kafka.send(topic, 0, "v2", key="b")
    kafka.flush()

    async def scenario() -> tuple[list[SseEvent], list[SseEvent], list[SseEvent]]:
        async with (
            gateway.client() as client,
            client.stream("GET", gateway.url(f"/keyed/{topic}"), headers=SSE) as response,
        ):
            stream = Stream(response)
            live = await stream.read(2)
            kafka.send(topic, 0, None, key="a")
            kafka.flush()
            live += await stream.read(1)
        fresh = await collect(gateway, f"/keyed/{topic}", 1)
        async with (
            gateway.client() as client,
            client.stream(
                "GET",
                gateway.url(f"/keyed/{topic}"),
                headers=SSE | {"last-event-id": live[1].id},
            ) as response,
        ):
            resumed = await Stream(response, live[1].id).read(1)
        return live, fresh.pending, resumed

    live, fresh, resumed = asyncio.run(scenario())
    assert [(e.type, e.data) for e in live] == [
        ("message", "v1"),
        ("message", "v2"),
        ("delete", "YQ=="),
    ]
    assert live[2].id.startswith('["YQ==",')
    assert [(e.type, e.data) for e in fresh] == [("message", "v2")]
    assert [(e.type, e.data) for e in resumed] == [("delete", "YQ==")]


def test_a_client_moves_between_two_gateways_by_its_id(
    gateway: Gateway,
    kafka: Kafka,
    kafka_broker: BrokerInfo,
    tmp_path: Path,
) -> None:
    topic = kafka.topics["moving"]
    for n in range(30):
        kafka.send(topic, n % 3, f"m{n}")
    kafka.flush()
    other_process, other = start_gateway(tmp_path, kafka_broker.bootstrap)

    async def scenario() -> list[SseEvent]:
        first = await collect(gateway, f"/{topic}", 11)
        last_id = first.pending[-1].id
        async with (
            other.client(http2=True) as client,
            client.stream(
                "GET", other.url(f"/{topic}"), headers=SSE | {"last-event-id": last_id}
            ) as response,
        ):
            return first.pending + await Stream(response, last_id).read(19)

    with other_process:
        events = asyncio.run(scenario())
    assert sorted(e.data for e in events) == sorted(f"m{n}" for n in range(30))


def test_key_filtered_streams_resume_exactly_on_another_gateway_after_kill_9(
    gateway: Gateway,
    kafka: Kafka,
    kafka_broker: BrokerInfo,
    tmp_path: Path,
) -> None:
    """Streams filtered on a key (``/{topic}/key/{key}``) read from one gateway process while
    messages of every key go to every partition; the process is killed with SIGKILL mid-stream
    and messages keep coming. Each stream reconnects to another process with the last id it
    parsed, as a browser does, and ends up with exactly its key's messages: none lost, none
    twice, in order per partition."""
    topic = kafka.topics["moving-keyed"]
    keys = [f"k{n}" for n in range(4)]
    sent: list[tuple[int, str]] = []  # (partition, key) of message "m<n>"

    def produce(count: int) -> None:
        for _ in range(count):
            n = len(sent)
            sent.append((n % 3, keys[n % len(keys)]))
            kafka.send(topic, n % 3, f"m{n}", key=keys[n % len(keys)])
        kafka.flush()

    doomed_process, doomed = start_gateway(tmp_path, kafka_broker.bootstrap)

    async def drain(stream: Stream) -> None:
        """What reached the client before its server died is the client's (a browser's
        EventSource dispatches it all): read it to the end of the connection."""
        with contextlib.suppress(StopAsyncIteration, httpx.HTTPError, TimeoutError):
            await stream.read(10_000, timeout=5.0)

    async def scenario() -> dict[str, list[SseEvent]]:
        received: dict[str, list[SseEvent]] = {}
        resume: dict[str, str] = {}
        produce(40)
        async with doomed.client() as client, contextlib.AsyncExitStack() as stack:
            streams = {}
            for key in keys:
                path = doomed.url(f"/{topic}/key/{key}")
                response = await stack.enter_async_context(client.stream("GET", path, headers=SSE))
                assert response.status_code == 200, await response.aread()
                streams[key] = Stream(response)
            for key, stream in streams.items():
                received[key] = await stream.read(10)  # everything so far
            produce(40)  # live, while the streams are being read
            for key, stream in streams.items():
                received[key] += await stream.read(4)
            doomed_process.process.kill()  # type: ignore[union-attr]  # SIGKILL, no drain
            assert doomed_process.process.wait(10) == -9  # type: ignore[union-attr]
            produce(40)  # while the streams are away
            for key, stream in streams.items():
                await drain(stream)
                received[key] += stream.pending
                resume[key] = stream.parser.last_event_id
        async with gateway.client() as client:
            for key in keys:
                headers = SSE | {"last-event-id": resume[key]}
                async with client.stream(
                    "GET", gateway.url(f"/{topic}/key/{key}"), headers=headers
                ) as response:
                    assert response.status_code == 200, await response.aread()
                    stream = Stream(response, resume[key])
                    received[key] += await stream.read(30 - len(received[key]), timeout=20.0)
                    with contextlib.suppress(TimeoutError):  # a duplicate would come now
                        received[key] += await stream.read(1, timeout=1.0)
                    received[key] += stream.pending
        return received

    with doomed_process:
        received = asyncio.run(scenario())
    for key in keys:
        got = [int(event.data[1:]) for event in received[key]]
        owed = [n for n, (_, k) in enumerate(sent) if k == key]
        assert sorted(got) == owed, key  # none lost, none twice
        for partition in range(3):
            mine = [n for n in got if sent[n][0] == partition]
            assert mine == sorted(mine), (key, partition)


@pytest.mark.parametrize(
    ("last_id", "reason"),
    [
        ("not-an-id", "not URL-safe base64"),
        ("AgQABAIC", "unknown event id version 2"),
        ("AQQABA==", "truncated varint"),
        ('["a2V5",AQQABAIC]', "quoted string"),
    ],
)
def test_malformed_last_event_ids_are_400_with_the_reason(
    gateway: Gateway, kafka: Kafka, last_id: str, reason: str
) -> None:
    topic = kafka.topics["refusals"]

    async def scenario() -> httpx.Response:
        async with gateway.client() as client:
            return await client.get(
                gateway.url(f"/{topic}"), headers=SSE | {"last-event-id": last_id}
            )

    response = asyncio.run(scenario())
    assert response.status_code == 400
    assert reason in response.text


def test_an_oversized_last_event_id_is_400(gateway: Gateway, kafka: Kafka) -> None:
    topic = kafka.topics["refusals"]

    async def scenario() -> httpx.Response:
        async with gateway.client() as client:
            return await client.get(
                gateway.url(f"/{topic}"), params={"lastEventId": "A" * 256}, headers=SSE
            )

    assert asyncio.run(scenario()).status_code == 400


def test_the_page_is_served_over_tls(gateway: Gateway) -> None:
    async def scenario() -> httpx.Response:
        context = ssl.create_default_context(cafile=str(gateway.ca))
        async with httpx.AsyncClient(verify=context) as client:
            return await client.get(f"https://localhost:{gateway.https_port}/index.html")

    response = asyncio.run(scenario())
    assert response.status_code == 200
    assert "EventSource" in response.text


def test_an_unknown_topic_is_404(gateway: Gateway) -> None:
    async def scenario() -> httpx.Response:
        async with gateway.client() as client:
            return await client.get(gateway.url("/no-such-topic-here"), headers=SSE)

    assert asyncio.run(scenario()).status_code == 404


def test_a_topic_created_after_the_gateway_started_is_streamed(
    gateway: Gateway, kafka: Kafka
) -> None:
    topic = kafka.topic(partitions=2)  # the gateway has never heard of it
    kafka.send(topic, 0, "first")
    kafka.send(topic, 1, "second")
    kafka.flush()
    stream = asyncio.run(collect(gateway, f"/{topic}", 2))
    assert sorted(e.data for e in stream.pending) == ["first", "second"]
