"""A guard on the sse-kafka proxy's route keeps its streams authorized, on a real broker.

http server (credentials only) → sse server (no guard) → sse-kafka proxy whose route asks for
the role ``${method}${path}`` → kafka cache → the local broker. The route's guard alone
authorizes the stream: it gets the challenge before ``exp`` and ends at ``exp`` unless the
answer (taken by the http server before any route) extends it. A client asking for
``ext=timestamp`` gets each record's own timestamp. Over h2 and HTTP/1.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

from .guards.signing import AUDIENCE, ISSUER, jwks, token
from .test_challenge import CHALLENGE, answer, json_claims, open_stream

CONFIG = """\
name: sse-kafka-guarded
guards:
  authn_jwt:
    type: jwt
    options:
      issuer: {issuer}
      audience: {audience}
      keys: {keys}
      challenge: 1
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options: {{host: 127.0.0.1, port: {port}}}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    options:
      authorization:
        authn_jwt:
          credentials:
            headers:
              authorization: Bearer {{credentials}}
    exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    options: {{keepalive: 0}}
    exit: north_sse_kafka
  north_sse_kafka:
    type: sse-kafka
    kind: proxy
    routes:
      - when:
          - path: /{{topic}}
        guarded:
          authn_jwt:
            - ${{method}}${{path}}
        exit: north_kafka_cache_client
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

BOTH = pytest.mark.parametrize("http2", [True, False], ids=["h2", "http1.1"])
STAMP = 0x18F3A2B4C5D
"""The record timestamp the tests produce with (milliseconds since the epoch, 2024)."""


class Gateway:
    def __init__(self, root: Path, broker: BrokerInfo, topic: str) -> None:
        self.port = free_port()
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        text = CONFIG.format(
            issuer=ISSUER,
            audience=AUDIENCE,
            keys=json.dumps(jwks()),
            port=self.port,
            bootstrap=broker.bootstrap,
        )
        (root / "zilla.yaml").write_text(text)
        self.process = GatewayProcess(root / "zilla.yaml")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.topic}"

    def bearer(self, ttl: float = 60) -> str:
        return token(ttl=ttl, scope=f"GET/{self.topic}")

    def client(self, *, http2: bool) -> httpx.AsyncClient:
        return httpx.AsyncClient(http2=http2, http1=not http2, timeout=10.0)

    def produce(self, value: str) -> None:
        self.producer.produce(self.topic, value=value.encode(), timestamp=STAMP)
        assert self.producer.flush(30) == 0


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, kafka_broker: BrokerInfo
) -> Iterator[Gateway]:
    topic = f"guarded-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    built = Gateway(tmp_path_factory.mktemp("sse-kafka-guarded"), kafka_broker, topic)
    with built.process:
        yield built


@BOTH
def test_a_guard_on_the_sse_kafka_route_challenges_and_ends_the_stream_at_exp(
    gateway: Gateway, http2: bool
) -> None:
    async def scenario() -> tuple[str, float, float, float]:
        first = gateway.bearer(ttl=3)
        exp = json_claims(first)["exp"]
        async with gateway.client(http2=http2) as client, contextlib.AsyncExitStack() as stack:
            stream = await open_stream(client, gateway.url, first, stack)
            gateway.produce("before the challenge")
            while (event := await stream.next()).type != "challenge":
                pass
            challenged_at = time.time()
            return event.data, challenged_at, exp, await stream.ended()

    challenge, challenged_at, exp, ended = asyncio.run(scenario())
    assert challenge == CHALLENGE
    assert exp - 1 - 0.3 <= challenged_at <= exp - 1 + 0.5
    assert exp - 0.2 <= ended <= exp + 1.0


def test_an_answer_keeps_an_sse_kafka_stream_past_exp(gateway: Gateway) -> None:
    async def scenario() -> tuple[int, str]:
        first = gateway.bearer(ttl=3)
        exp = json_claims(first)["exp"]
        async with gateway.client(http2=True) as client, contextlib.AsyncExitStack() as stack:
            stream = await open_stream(client, gateway.url, first, stack)
            while (await stream.next()).type != "challenge":
                pass
            status = (await answer(client, gateway.url, gateway.bearer(ttl=8))).status_code
            await asyncio.sleep(max(0.0, exp + 0.5 - time.time()))
            gateway.produce("past the first exp")
            while (event := await stream.next()).data != "past the first exp":
                pass
            return status, event.data

    assert asyncio.run(scenario()) == (204, "past the first exp")


@BOTH
def test_the_sse_kafka_route_refuses_a_token_without_the_role_of_this_path(
    gateway: Gateway, http2: bool
) -> None:
    async def scenario() -> httpx.Response:
        async with gateway.client(http2=http2) as client:
            bearer = token(scope="GET/some-other-topic")
            return await client.get(gateway.url, headers={"authorization": f"Bearer {bearer}"})

    refused = asyncio.run(scenario())
    assert refused.status_code == 403
    assert f"token lacks roles GET/{gateway.topic}" in refused.text


@BOTH
def test_ext_timestamp_carries_each_records_own_timestamp(gateway: Gateway, http2: bool) -> None:
    async def scenario() -> tuple[str, bytes]:
        headers = {
            "authorization": f"Bearer {gateway.bearer()}",
            "accept": "text/event-stream;ext=timestamp",
        }
        value = f"stamped-{'h2' if http2 else 'h1'}"
        async with (
            gateway.client(http2=http2) as client,
            client.stream("GET", gateway.url, headers=headers) as response,
        ):
            gateway.produce(value)
            body = b""
            async for chunk in response.aiter_raw():
                body += chunk
                if f"data:{value}\n\n".encode() in body:
                    break
            block = body[: body.index(f"data:{value}\n\n".encode())]
            return response.headers["content-type"], block.rsplit(b"\n\n", 1)[-1]

    content_type, block = asyncio.run(scenario())
    assert content_type == "text/event-stream;ext=timestamp"
    assert block.startswith(f"timestamp:0x{STAMP:x}\nid:".encode())
