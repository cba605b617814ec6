"""Seed 000's chain end to end: a client → https (h2 or HTTP/1.1) → ssegate → upstream SSE.

The gateway is a real ``ssegate start`` process on the example config; the upstream is the
example SSE server, run in the test's own event loop so the test can stop and restart it.
``/events`` is guarded as in seed 000: clients carry a token signed by the test's EC key.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate.tools.sse_server import ExampleSseServer
from ssegate.tools.token import PrivateKey, generate_key, mint
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.demo import EC_KID, example_guard_env
from ssegate_lab.testing.certs import make_keystore

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sse.proxy"
PASSWORD = "proxy-secret"


@dataclass(frozen=True)
class Stack:
    https_port: int
    upstream_port: int
    publish_port: int
    ca: Path

    @property
    def events_url(self) -> str:
        return f"https://localhost:{self.https_port}/events"

    def client(self, *, http2: bool, token: str | None = None) -> httpx.AsyncClient:
        context = ssl.create_default_context(cafile=str(self.ca))
        headers = {"authorization": f"Bearer {token or example_token()}"}
        return httpx.AsyncClient(
            verify=context, http2=http2, http1=not http2, timeout=10.0, headers=headers
        )


@functools.cache
def guard_key(kind: str) -> PrivateKey:
    """The example guard's signing keys for this test session (``rsa`` and ``ec``)."""
    return generate_key(kind)


def example_token(*, ttl: float = 120, scope: str = "proxy:stream") -> str:
    """A token the example's guard accepts, as seed 000's issuer would sign it."""
    return mint(
        guard_key("ec"),
        kid=EC_KID,
        sub="tester",
        scope=scope,
        ttl=ttl,
        iss="https://auth.example.com",
        aud="https://api.example.com",
    )


def example_env(keystore: Path, https_port: int, upstream_port: int) -> dict[str, str]:
    return {
        **example_guard_env(guard_key("rsa"), guard_key("ec")),
        "SSEGATE_KEYSTORE": str(keystore),
        "KEYSTORE_PASSWORD": PASSWORD,
        "SSEGATE_HOST": "127.0.0.1",
        "SSEGATE_HTTPS_PORT": str(https_port),
        "SSEGATE_WWW": str(EXAMPLE / "www"),
        "SSE_SERVER_HOST": "127.0.0.1",
        "SSE_SERVER_PORT": str(upstream_port),
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("proxy")
    bundle = make_keystore(root / "localhost.p12", alias="localhost", password=PASSWORD)
    https_port, upstream_port, publish_port = free_port(), free_port(), free_port()
    env = example_env(bundle.keystore, https_port, upstream_port)
    with GatewayProcess(EXAMPLE / "zilla.yaml", env=env):
        yield Stack(https_port, upstream_port, publish_port, bundle.ca_pem)


class EventReader:
    """Reads SSE events off one streamed response, across several calls."""

    def __init__(self, response: httpx.Response) -> None:
        self._chunks = response.aiter_raw()
        self._parser = SseParser()
        self._pending: list[SseEvent] = []

    async def read(self, count: int) -> list[SseEvent]:
        while len(self._pending) < count:
            chunk = await anext(self._chunks)
            self._pending.extend(e for e in self._parser.feed(chunk) if isinstance(e, SseEvent))
        events, self._pending = self._pending[:count], self._pending[count:]
        return events


async def read_events(response: httpx.Response, count: int) -> list[SseEvent]:
    return await asyncio.wait_for(EventReader(response).read(count), 10)


@pytest.mark.parametrize("http2", [True, False], ids=["h2", "http1.1"])
def test_upstream_events_are_relayed_in_order(stack: Stack, http2: bool) -> None:
    async def scenario() -> tuple[httpx.Response, list[SseEvent], int]:
        upstream = ExampleSseServer()
        await upstream.start(stack.upstream_port, stack.publish_port)
        first = upstream.last_id
        try:
            async with (
                stack.client(http2=http2) as client,
                client.stream("GET", stack.events_url) as response,
            ):
                for n in range(5):
                    upstream.publish(f"event {n}")
                events = await read_events(response, 5)
                return response, events, first
        finally:
            await upstream.close()

    response, events, first = asyncio.run(scenario())
    assert response.status_code == 200
    assert response.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache"
    expected = [(str(first + n + 1), f"event {n}") for n in range(5)]
    assert [(e.id, e.data) for e in events] == expected


def test_an_upstream_restart_is_resumed_without_loss_or_repeats(stack: Stack) -> None:
    async def scenario() -> list[SseEvent]:
        upstream = ExampleSseServer()
        await upstream.start(stack.upstream_port, stack.publish_port)
        try:
            async with (
                stack.client(http2=True) as client,
                client.stream("GET", stack.events_url) as response,
            ):
                upstream.publish("before 1")
                upstream.publish("before 2")
                reader = EventReader(response)
                events = await asyncio.wait_for(reader.read(2), 10)
                await upstream.close()
                upstream.publish("while down")  # kept in the upstream's history
                await asyncio.sleep(0.3)
                await upstream.start(stack.upstream_port, stack.publish_port)
                upstream.publish("after 1")
                upstream.publish("after 2")
                events += await asyncio.wait_for(reader.read(3), 15)
                return events
        finally:
            await upstream.close()

    events = asyncio.run(scenario())
    assert [e.data for e in events] == ["before 1", "before 2", "while down", "after 1", "after 2"]
    ids = [int(e.id) for e in events]
    assert ids == list(range(ids[0], ids[0] + 5))


def test_last_event_id_header_resumes_from_the_upstream_history(stack: Stack) -> None:
    async def scenario() -> list[SseEvent]:
        upstream = ExampleSseServer()
        await upstream.start(stack.upstream_port, stack.publish_port)
        try:
            for n in range(4):
                upstream.publish(f"old {n}")
            async with (
                stack.client(http2=True) as client,
                client.stream("GET", stack.events_url, headers={"last-event-id": "2"}) as response,
            ):
                return await read_events(response, 2)
        finally:
            await upstream.close()

    events = asyncio.run(scenario())
    assert [(e.id, e.data) for e in events] == [("3", "old 2"), ("4", "old 3")]


def test_methods_other_than_get_are_405_without_a_body(stack: Stack) -> None:
    async def scenario() -> httpx.Response:
        async with stack.client(http2=True) as client:
            return await client.request("PUT", stack.events_url)

    response = asyncio.run(scenario())
    assert response.status_code == 405
    assert response.content == b""


def test_a_last_event_id_over_254_bytes_is_rejected_with_400(stack: Stack) -> None:
    async def scenario() -> httpx.Response:
        async with stack.client(http2=False) as client:
            return await client.get(stack.events_url, params={"lastEventId": "x" * 255})

    assert asyncio.run(scenario()).status_code == 400


@pytest.mark.parametrize(
    ("token", "status"), [("", 401), ("not-a-token", 403), ("scope", 403)], ids=str
)
def test_events_need_a_token_with_the_proxy_stream_role(
    stack: Stack, token: str, status: int
) -> None:
    headers = {} if not token else {"authorization": f"Bearer {token}"}
    if token == "scope":
        headers["authorization"] = f"Bearer {example_token(scope='other')}"

    async def scenario() -> httpx.Response:
        async with stack.client(http2=True) as client:
            client.headers.pop("authorization")
            return await client.get(stack.events_url, headers=headers)

    response = asyncio.run(scenario())
    assert response.status_code == status
    assert response.headers["www-authenticate"].startswith('Bearer realm="authn_jwt"')
    how = '"Authorization: Bearer <token>" or ?access_token=<token>'  # as the example configures
    expected = {
        "": f"no credentials for guard 'authn_jwt': send {how}",
        "scope": "guard 'authn_jwt' refused the token: token lacks roles proxy:stream;"
        f" send one it accepts as {how}",
    }
    if token in expected:
        assert response.text == expected[token] + "\n"
    else:
        assert response.text.startswith("guard 'authn_jwt' refused the token: ")


def test_an_unreachable_upstream_is_502(stack: Stack) -> None:
    async def scenario() -> httpx.Response:
        async with stack.client(http2=True) as client:
            return await client.get(stack.events_url)

    assert asyncio.run(scenario()).status_code == 502


def test_paths_that_route_nowhere_are_404(stack: Stack) -> None:
    async def scenario() -> httpx.Response:
        async with stack.client(http2=True) as client:
            return await client.get(f"https://localhost:{stack.https_port}/no/such/file")

    assert asyncio.run(scenario()).status_code == 404


def test_sigterm_ends_open_streams_and_exits_0_within_5_seconds(tmp_path: Path) -> None:
    bundle = make_keystore(tmp_path / "localhost.p12", alias="localhost", password=PASSWORD)
    https_port, upstream_port, publish_port = free_port(), free_port(), free_port()
    env = example_env(bundle.keystore, https_port, upstream_port)
    stack = Stack(https_port, upstream_port, publish_port, bundle.ca_pem)
    gateway = GatewayProcess(EXAMPLE / "zilla.yaml", env=env)

    async def scenario() -> tuple[int, float, bool]:
        upstream = ExampleSseServer()
        await upstream.start(upstream_port, publish_port)
        try:
            async with (
                stack.client(http2=True) as client,
                client.stream("GET", stack.events_url) as response,
            ):
                upstream.publish("hello")
                reader = EventReader(response)
                await asyncio.wait_for(reader.read(1), 10)
                assert gateway.process is not None
                started = asyncio.get_running_loop().time()
                gateway.process.terminate()
                status = await asyncio.to_thread(gateway.process.wait, 10)
                elapsed = asyncio.get_running_loop().time() - started
                try:
                    await asyncio.wait_for(reader.read(1), 5)
                except (StopAsyncIteration, httpx.HTTPError):
                    ended = True  # the stream ended (cleanly or by reset)
                else:
                    ended = False
                return status, elapsed, ended
        finally:
            await upstream.close()

    with gateway:
        status, elapsed, ended = asyncio.run(scenario())
    assert status == 0
    assert elapsed < 5.0
    assert ended
