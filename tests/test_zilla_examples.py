"""Zilla's three SSE examples without AsyncAPI, in their shape, validate, start and stream.

``zilla_examples/`` holds a ``zilla.yaml`` in the shape of each (see its README). A test copies
one into a directory of its own, writes what the example ships beside it (a keystore under
``tls/``, a page to serve), gives it free ports, the test broker, the upstream and the guard's
public keys through the environment, starts ``ssegate start`` on it and does what the example's
README and test script do:

- ``sse.kafka.fanout``: a record produced to the compacted ``events`` topic with key ``1`` and
  header ``tag=abc`` reaches ``/events/1/abc`` over HTTP/1.1 and over ``curl --http2`` (an h2c
  upgrade), and records of another key or tag do not; a stream resumed from its id starts at the
  next record of that key and tag;
- ``sse.kafka.fanout.jwt``: over TLS and h2, ``/events?access_token=`` streams the topic to a
  token holding ``proxy:stream``, which is challenged before it expires and ended when it does;
- ``sse.proxy.jwt``: over TLS and h2, what the upstream SSE server publishes reaches a token
  holding ``proxy:stream``, challenged and ended the same way.

Without a token, or with one lacking ``proxy:stream``, a request is refused as README.md's
"Where ssegate behaves differently from Zilla" says (RFC 6750: 401 and 403 with
``www-authenticate``); Zilla's READMEs say only that unauthorized clients get no stream.
Tokens live seconds, not the README's 30, and ``challenge`` is 2 instead of 10.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from tests.test_challenge import CHALLENGE, Stream, json_claims

from ssegate.config.loader import load_config
from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent
from ssegate.tools.sse_server import ExampleSseServer
from ssegate.tools.token import encode_token, generate_key
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.broker import BrokerInfo
from ssegate_lab.demo import RSA_KID, example_guard_env
from ssegate_lab.testing.certs import make_keystore
from ssegate_lab.testing.kafka import kafka_broker as kafka_broker

EXAMPLES = Path(__file__).resolve().parent / "zilla_examples"
INPUT = '{"id":1,"name":"Hello World!"}'
"""The record the examples' test scripts produce, and the ``data`` they expect back."""
PAGE = "<!doctype html><title>sse example</title>\n"
PASSWORD = "example-store-secret"
CHALLENGE_SECONDS = 2
TTL = 10
"""Seconds a streaming token lives: the challenge comes 8 s after it is signed."""
RSA_KEY, EC_KEY = generate_key("rsa"), generate_key("ec")
WAIT = 60.0
"""How long a test waits for what should come at once (a busy machine, a broker warming up)."""


@dataclass(frozen=True)
class Example:
    """An example's copy, started: where it listens and what its clients trust."""

    config: Path
    port: int
    ca: Path | None = None
    upstream_port: int = 0

    def url(self, path: str) -> str:
        scheme = "http" if self.ca is None else "https"
        return f"{scheme}://localhost:{self.port}{path}"

    def client(self, *, http2: bool) -> httpx.AsyncClient:
        verify = ssl.create_default_context(cafile=str(self.ca)) if self.ca else True
        return httpx.AsyncClient(verify=verify, http2=http2, http1=not http2, timeout=WAIT)


def prepare(name: str, root: Path, env: dict[str, str]) -> Path:
    """Copy example ``name`` into ``root`` with a page to serve and, when it has a vault, a
    keystore for ``localhost`` beside it; check that its config loads with ``env`` and those
    files (what ``ssegate validate`` checks). Returns the config's path."""
    target = root / name
    shutil.copytree(EXAMPLES / name, target)
    (target / "www").mkdir()
    (target / "www" / "index.html").write_text(PAGE)
    env["WWW_DIR"] = str(target / "www")
    if "vaults:" in (target / "zilla.yaml").read_text():
        bundle = make_keystore(target / "tls" / "localhost.p12", password=PASSWORD)
        env.update(KEYSTORE_PASSWORD=PASSWORD, CA_PEM=str(bundle.ca_pem))
        env.update(example_guard_env(RSA_KEY, EC_KEY), CHALLENGE_SECONDS=str(CHALLENGE_SECONDS))
    with pytest.MonkeyPatch.context() as patched:
        for variable, value in env.items():
            patched.setenv(variable, value)
        load_config(str(target / "zilla.yaml"))
    return target / "zilla.yaml"


def started(config: Path, env: dict[str, str], upstream_port: int = 0) -> Iterator[Example]:
    with GatewayProcess(config, env=env, timeout=WAIT):
        ca = Path(env["CA_PEM"]) if "CA_PEM" in env else None
        yield Example(config, int(env["GATEWAY_PORT"]), ca, upstream_port)


def example_token(*, scope: str = "proxy:stream", ttl: float = TTL) -> str:
    """A token as the READMEs sign it: RS256, kid ``example``, subject ``example``, no ``iat``."""
    claims = {
        "iss": "https://auth.example.com",
        "aud": "https://api.example.com",
        "sub": "example",
        "exp": int(time.time() + ttl),
        "scope": scope,
    }
    return encode_token(RSA_KEY, claims, kid=RSA_KID)


def events_topic(bootstrap: str) -> None:
    """The examples' ``events`` topic, compacted, as their compose files create it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics([NewTopic("events", 1, 1, config={"cleanup.policy": "compact"})])
    try:
        created["events"].result(30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def produce(bootstrap: str, records: list[tuple[str, str, dict[str, str]]]) -> None:
    """Write ``(key, value, headers)`` records to ``events``, as the examples' kafkacat does."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value, headers in records:
        producer.produce("events", key=key.encode(), value=value.encode(), headers=dict(headers))
    assert producer.flush(30) == 0


@contextlib.asynccontextmanager
async def opened(client: httpx.AsyncClient, url: str, **headers: str) -> AsyncIterator[Stream]:
    request = client.build_request("GET", url, headers={"accept": "text/event-stream", **headers})
    response = await client.send(request, stream=True)
    try:
        assert response.status_code == 200, response.status_code
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["access-control-allow-origin"] == "*"  # policy: cross-origin
        yield Stream(response)
    finally:
        await response.aclose()


async def read_to_end(stream: Stream) -> tuple[list[tuple[float, SseEvent]], float]:
    """Every event of the stream with the time it arrived, and the time the stream ended."""
    arrived = []
    with contextlib.suppress(StopAsyncIteration, httpx.HTTPError):
        while True:
            event = await stream.next(WAIT)
            arrived.append((time.time(), event))
    return arrived, time.time()


def assert_streamed_then_challenged_and_ended_at_exp(
    arrived: list[tuple[float, SseEvent]], ended: float, data: str, exp: int
) -> None:
    """``data`` arrived; one challenge, the README's, came no sooner than ``challenge`` seconds
    before ``exp`` (exp is whole seconds, so up to a second sooner); the stream ended at ``exp``.
    A busy machine may deliver either later, never sooner."""
    assert data in [event.data for _, event in arrived if event.type == "message"]
    [(challenged, challenge)] = [(t, event) for t, event in arrived if event.type == "challenge"]
    assert challenge.data == CHALLENGE
    assert exp - CHALLENGE_SECONDS - 1.5 <= challenged <= ended
    assert exp - 0.5 <= ended <= exp + 15


async def refusals(example: Example) -> list[tuple[int, str, str]]:
    """The status, ``www-authenticate`` and body of ``/events`` without a token and with one
    lacking ``proxy:stream``, over h2."""
    answers = []
    async with example.client(http2=True) as client:
        for query in ("", f"?access_token={example_token(scope='other')}"):
            response = await client.get(example.url(f"/events{query}"))
            assert response.http_version == "HTTP/2"
            answers.append(
                (response.status_code, response.headers["www-authenticate"], response.text)
            )
    return answers


def assert_refused_as_rfc_6750_says(answers: list[tuple[int, str, str]]) -> None:
    (none, none_challenge, none_body), (scopeless, scope_challenge, scope_body) = answers
    assert (none, scopeless) == (401, 403)
    assert none_challenge == 'Bearer realm="authn_jwt"'
    assert none_body.startswith("no credentials for guard 'authn_jwt'")
    assert 'error="insufficient_scope"' in scope_challenge
    assert "token lacks roles proxy:stream" in scope_body


# sse.kafka.fanout


def kafka_example(name: str, broker: BrokerInfo, root: Path) -> Iterator[Example]:
    """Example ``name`` started on ``broker``, whose ``events`` topic it makes first."""
    events_topic(broker.bootstrap)
    env = {
        "GATEWAY_HOST": "127.0.0.1",
        "GATEWAY_PORT": str(free_port()),
        "KAFKA_BOOTSTRAP_SERVER": broker.bootstrap,
    }
    yield from started(prepare(name, root, env), env)


@pytest.fixture(scope="module")
def fanout(kafka_broker: BrokerInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Example]:
    root = tmp_path_factory.mktemp("fanout")
    for example in kafka_example("sse_kafka_fanout", kafka_broker, root):
        produce(kafka_broker.bootstrap, [("2", '{"id":2,"name":"another key"}', {"tag": "abc"})])
        yield example


def test_the_fanout_example_streams_key_1_tag_abc_live_and_resumes_from_its_id(
    fanout: Example, kafka_broker: BrokerInfo
) -> None:
    """The stream opens on the latest record of key ``1`` (the topic is compacted, so earlier
    ones of that key are not replayed; key ``2`` is filtered out), then gets the next record of
    key ``1`` and tag ``abc`` but not one tagged ``xyz``; a stream resumed from the first
    event's id starts at that same next record."""
    other_tag, second = '{"id":3,"name":"another tag"}', '{"id":5,"name":"after the first"}'
    produce(kafka_broker.bootstrap, [("1", INPUT, {"tag": "abc"})])

    async def scenario() -> tuple[SseEvent, SseEvent, SseEvent]:
        async with fanout.client(http2=False) as client:
            async with opened(client, fanout.url("/events/1/abc")) as stream:
                first = await stream.next(WAIT)
                records = [("1", other_tag, {"tag": "xyz"}), ("1", second, {"tag": "abc"})]
                produce(kafka_broker.bootstrap, records)
                live = await stream.next(WAIT)
            resume = {"last-event-id": first.id or ""}
            async with opened(client, fanout.url("/events/1/abc"), **resume) as stream:
                return first, live, await stream.next(WAIT)

    first, live, resumed = asyncio.run(scenario())
    assert first.data == INPUT
    assert first.id
    assert (live.data, resumed.data) == (second, second)
    assert resumed.id == live.id


def test_the_fanout_example_serves_other_paths_from_its_directory(fanout: Example) -> None:
    async def scenario() -> httpx.Response:
        async with fanout.client(http2=False) as client:
            return await client.get(fanout.url("/index.html"))

    page = asyncio.run(scenario())
    assert (page.status_code, page.text) == (200, PAGE)


def test_the_fanout_example_streams_to_curl_over_an_h2c_upgrade(
    fanout: Example, kafka_broker: BrokerInfo
) -> None:
    """As the example's test script: produce the record, then ``curl --http2`` the stream."""
    produce(kafka_broker.bootstrap, [("1", INPUT, {"tag": "abc"})])
    command = ["/usr/bin/curl", "-sS", "-N", "-i", "--http2", "--max-time", str(WAIT)]
    command += ["-H", "Accept:text/event-stream", fanout.url("/events/1/abc")]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as curl:
        assert curl.stdout is not None
        head = []
        for line in curl.stdout:
            head.append(line.rstrip())
            if line.startswith("data:"):
                break
        curl.terminate()
    statuses = [line for line in head if line.startswith("HTTP/")]
    assert statuses == ["HTTP/1.1 101 Switching Protocols", "HTTP/2 200"]
    assert head[-1] == f"data:{INPUT}"


# sse.kafka.fanout.jwt


@pytest.fixture(scope="module")
def fanout_jwt(
    kafka_broker: BrokerInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Example]:
    root = tmp_path_factory.mktemp("fanout-jwt")
    yield from kafka_example("sse_kafka_fanout_jwt", kafka_broker, root)


def test_the_fanout_jwt_example_streams_the_topic_then_challenges_and_ends_at_exp(
    fanout_jwt: Example, kafka_broker: BrokerInfo
) -> None:
    produce(kafka_broker.bootstrap, [("1", INPUT, {})])
    bearer = example_token()
    exp = json_claims(bearer)["exp"]

    async def scenario() -> tuple[str, list[tuple[float, SseEvent]], float]:
        async with (
            fanout_jwt.client(http2=True) as client,
            opened(client, fanout_jwt.url(f"/events?access_token={bearer}")) as stream,
        ):
            return stream.response.http_version, *await read_to_end(stream)

    version, arrived, ended = asyncio.run(scenario())
    assert version == "HTTP/2"
    assert_streamed_then_challenged_and_ended_at_exp(arrived, ended, INPUT, exp)


def test_the_fanout_jwt_example_refuses_no_token_and_a_token_without_proxy_stream(
    fanout_jwt: Example,
) -> None:
    assert_refused_as_rfc_6750_says(asyncio.run(refusals(fanout_jwt)))


# sse.proxy.jwt


@pytest.fixture(scope="module")
def proxy_jwt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Example]:
    upstream_port = free_port()
    env = {
        "GATEWAY_HOST": "127.0.0.1",
        "GATEWAY_PORT": str(free_port()),
        "SSE_SERVER_HOST": "127.0.0.1",
        "SSE_SERVER_PORT": str(upstream_port),
    }
    config = prepare("sse_proxy_jwt", tmp_path_factory.mktemp("proxy-jwt"), env)
    yield from started(config, env, upstream_port)


def test_the_proxy_jwt_example_relays_the_upstream_then_challenges_and_ends_at_exp(
    proxy_jwt: Example,
) -> None:
    bearer = example_token()
    exp = json_claims(bearer)["exp"]

    async def upstream_requested(upstream: ExampleSseServer) -> None:
        while not upstream.streams:
            await asyncio.sleep(0.02)

    async def scenario() -> tuple[str, list[tuple[float, SseEvent]], float]:
        upstream = ExampleSseServer()
        await upstream.start(proxy_jwt.upstream_port)
        try:
            async with (
                proxy_jwt.client(http2=True) as client,
                opened(client, proxy_jwt.url(f"/events?access_token={bearer}")) as stream,
            ):
                await asyncio.wait_for(upstream_requested(upstream), WAIT)
                upstream.publish("Hello, world")
                return stream.response.http_version, *await read_to_end(stream)
        finally:
            await upstream.close()

    version, arrived, ended = asyncio.run(scenario())
    assert version == "HTTP/2"
    assert_streamed_then_challenged_and_ended_at_exp(arrived, ended, "Hello, world", exp)


def test_the_proxy_jwt_example_refuses_no_token_and_a_token_without_proxy_stream(
    proxy_jwt: Example,
) -> None:
    assert_refused_as_rfc_6750_says(asyncio.run(refusals(proxy_jwt)))


def test_the_proxy_jwt_example_answers_an_http_1_1_client_505(proxy_jwt: Example) -> None:
    """The listener offers h2 alone: a client whose TLS handshake offers only HTTP/1.1 gets
    ``505 HTTP Version Not Supported`` (Zilla's README shows only h2 clients)."""

    async def scenario() -> httpx.Response:
        async with proxy_jwt.client(http2=False) as client:
            return await client.get(proxy_jwt.url(f"/events?access_token={example_token()}"))

    refused = asyncio.run(scenario())
    assert (refused.http_version, refused.status_code) == ("HTTP/1.1", 505)
