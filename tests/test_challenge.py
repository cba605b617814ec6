"""Continuous authorization end to end: a real gateway, short-lived tokens, h2 and HTTP/1.1.

The gateway guards ``/events`` with a jwt guard whose ``challenge`` is 1 second; tokens live
2 to 3 seconds (``exp`` is whole seconds, so the challenge lands 1 to 2 s after the connect). The
upstream is the example SSE server in the test's own loop. Also here: every forged or stale
token is refused with 401/403, ``www-authenticate`` and a logged reason, never a 500 or a
stream; and a JWKS URL that is down at start-up is used once it comes up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate.tools.sse_server import ExampleSseServer
from ssegate.tools.token import encode_token
from ssegate_lab.bench.gateway import GatewayProcess

from .guards.signing import AUDIENCE, ISSUER, jwks, key, token

CONFIG = """\
name: challenge-test
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
    options:
      host: 127.0.0.1
      port: {port}
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    options:
      authorization:
        authn_jwt:
          credentials:
            cookies:
              access_token: "{{credentials}}"
            headers:
              authorization: Bearer {{credentials}}
            query:
              access_token: "{{credentials}}"
    routes:
      - when:
          - headers:
              :path: /events
        exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    options:
      keepalive: 0
    routes:
      - guarded:
          authn_jwt:
            - proxy:stream
        exit: south_sse_client
  south_sse_client:
    type: sse
    kind: client
    exit: south_http_client
  south_http_client:
    type: http
    kind: client
    options:
      versions:
        - http/1.1
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
    options:
      host: 127.0.0.1
      port: {upstream}
"""

CHALLENGE = '{"method":"POST","headers":{"content-type":"application/x-challenge-response"}}'
ANSWER = {"content-type": "application/x-challenge-response"}


class Gateway:
    """A gateway on ``config`` (a template of ``CONFIG``'s fields) over the example upstream."""

    def __init__(self, tmp: Path, keys: object, config: str = CONFIG) -> None:
        self.port, self.upstream_port, self.publish_port = free_port(), free_port(), free_port()
        config = config.format(
            issuer=ISSUER,
            audience=AUDIENCE,
            keys=json.dumps(keys),
            port=self.port,
            upstream=self.upstream_port,
        )
        path = tmp / "zilla.yaml"
        path.write_text(config)
        self.process = GatewayProcess(path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/events"

    def client(self, *, http2: bool) -> httpx.AsyncClient:
        return httpx.AsyncClient(http2=http2, http1=not http2, timeout=10.0)

    def logged(self, text: str) -> bool:
        """A line holding ``text`` came from the gateway, waiting a few seconds for it: its
        output is read by a thread, which a loaded machine may run after the client saw what
        the line says happened."""
        return bool(self.process.logged(text, timeout=5.0))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    built = Gateway(tmp_path_factory.mktemp("challenge"), jwks())
    with built.process:
        yield built


class Stream:
    """One guarded SSE response read event by event, with arrival times."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.aiter_raw()
        self._parser = SseParser()
        self._pending: list[SseEvent] = []

    async def next(self, timeout: float = 6.0) -> SseEvent:
        async def read() -> SseEvent:
            while not self._pending:
                chunk = await anext(self._chunks)
                self._pending.extend(e for e in self._parser.feed(chunk) if isinstance(e, SseEvent))
            return self._pending.pop(0)

        return await asyncio.wait_for(read(), timeout)

    async def ended(self, timeout: float = 6.0) -> float:
        """Wait for the stream to end (cleanly, by reset or close); returns when it did."""
        try:
            while True:
                await self.next(timeout)
        except (StopAsyncIteration, httpx.HTTPError):
            return time.time()


async def open_stream(
    client: httpx.AsyncClient, url: str, bearer: str, stack: contextlib.AsyncExitStack
) -> Stream:
    request = client.build_request("GET", url, headers={"authorization": f"Bearer {bearer}"})
    response = await client.send(request, stream=True)
    stack.push_async_callback(response.aclose)
    assert response.status_code == 200
    return Stream(response)


@contextlib.asynccontextmanager
async def upstream(gateway: Gateway) -> AsyncIterator[ExampleSseServer]:
    server = ExampleSseServer()
    await server.start(gateway.upstream_port, gateway.publish_port)
    try:
        yield server
    finally:
        await server.close()


async def answer(client: httpx.AsyncClient, url: str, bearer: str) -> httpx.Response:
    return await client.post(url, headers={**ANSWER, "authorization": f"Bearer {bearer}"})


@pytest.mark.parametrize("http2", [True, False], ids=["h2", "http1.1"])
def test_an_answered_challenge_keeps_the_stream_past_the_first_expiry(
    gateway: Gateway, http2: bool
) -> None:
    async def scenario() -> tuple[SseEvent, float, float, int, str]:
        first = token(ttl=3)
        exp = json_claims(first)["exp"]
        async with (
            upstream(gateway) as server,
            gateway.client(http2=http2) as client,
            gateway.client(http2=http2) as other,
            contextlib.AsyncExitStack() as stack,
        ):
            stream = await open_stream(client, gateway.url, first, stack)
            challenge = await stream.next()
            challenged_at = time.time()
            # HTTP/1.1: the streaming connection is busy, the answer goes on another one.
            answered = await answer(client if http2 else other, gateway.url, token(ttl=8))
            await asyncio.sleep(max(0.0, exp + 0.5 - time.time()))
            server.publish("after the first expiry")
            after = await stream.next()
            return challenge, challenged_at, exp, answered.status_code, after.data

    challenge, challenged_at, exp, status, data = asyncio.run(scenario())
    assert (challenge.type, challenge.data) == ("challenge", CHALLENGE)
    assert exp - 1 - 0.3 <= challenged_at <= exp - 1 + 0.5
    assert status == 204
    assert data == "after the first expiry"


@pytest.mark.parametrize("http2", [True, False], ids=["h2", "http1.1"])
def test_an_unanswered_stream_ends_at_exp(gateway: Gateway, http2: bool) -> None:
    async def scenario() -> tuple[float, float]:
        first = token(ttl=2)
        async with (
            upstream(gateway),
            gateway.client(http2=http2) as client,
            contextlib.AsyncExitStack() as stack,
        ):
            stream = await open_stream(client, gateway.url, first, stack)
            assert (await stream.next()).type == "challenge"
            return json_claims(first)["exp"], await stream.ended()

    exp, ended = asyncio.run(scenario())
    assert exp - 0.2 <= ended <= exp + 1.0


def test_answers_that_do_not_supersede_the_token_are_refused_and_the_stream_ends(
    gateway: Gateway,
) -> None:
    async def scenario() -> tuple[list[httpx.Response], float, float]:
        first = token(ttl=3, scope="proxy:stream audit")
        exp = json_claims(first)["exp"]
        async with (
            upstream(gateway),
            gateway.client(http2=True) as client,
            contextlib.AsyncExitStack() as stack,
        ):
            stream = await open_stream(client, gateway.url, first, stack)
            assert (await stream.next()).type == "challenge"
            answers = [
                await answer(client, gateway.url, fresh)
                for fresh in (
                    token(ttl=1, scope="proxy:stream audit"),  # an earlier exp
                    token(ttl=8, scope="proxy:stream"),  # narrower roles
                    token(ttl=8, sub="mallory", scope="proxy:stream audit"),  # someone else
                )
            ]
            return answers, exp, await stream.ended()

    answers, exp, ended = asyncio.run(scenario())
    assert [response.status_code for response in answers] == [403, 403, 403]
    assert answers[1].text == (
        "guard 'authn_jwt' refused the token: the answer lacks roles audit;"
        f" send one it accepts as {HOW_TO_SEND}\n"
    )
    assert exp - 0.2 <= ended <= exp + 1.0
    assert gateway.logged("the answer lacks roles audit")


def test_one_answer_extends_every_stream_of_the_identity_on_an_h2_connection(
    gateway: Gateway,
) -> None:
    async def scenario() -> tuple[int, list[str]]:
        first = token(ttl=3)
        exp = json_claims(first)["exp"]
        async with (
            upstream(gateway) as server,
            gateway.client(http2=True) as client,
            contextlib.AsyncExitStack() as stack,
        ):
            streams = [await open_stream(client, gateway.url, first, stack) for _ in range(3)]
            for stream in streams:
                assert (await stream.next()).type == "challenge"
            status = (await answer(client, gateway.url, token(ttl=8))).status_code
            await asyncio.sleep(max(0.0, exp + 0.5 - time.time()))
            server.publish("still here")
            return status, [(await stream.next()).data for stream in streams]

    status, data = asyncio.run(scenario())
    assert status == 204
    assert data == ["still here"] * 3


def test_a_challenge_answer_on_another_h2_connection_extends_nothing(gateway: Gateway) -> None:
    async def scenario() -> int:
        async with (
            upstream(gateway),
            gateway.client(http2=True) as client,
            gateway.client(http2=True) as other,
            contextlib.AsyncExitStack() as stack,
        ):
            await open_stream(client, gateway.url, token(ttl=3), stack)
            return (await answer(other, gateway.url, token(ttl=8))).status_code

    assert asyncio.run(scenario()) == 403


def json_claims(signed: str) -> dict[str, int]:
    from ssegate.guards.jwt import b64url_decode

    claims: dict[str, int] = json.loads(b64url_decode(signed.split(".")[1]))
    return claims


def _forged() -> dict[str, str]:
    now = int(time.time())
    claims = {
        "sub": "alice",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "exp": now + 60,
        "scope": "proxy:stream",
    }
    good = token()
    head, body, signature = good.split(".")
    return {
        "alg-none": encode_unsigned({"alg": "none", "kid": "ec"}, claims),
        "hs256-with-public-key": encode_unsigned({"alg": "HS256", "kid": "rsa"}, claims) + "c2ln",
        "missing-kid": encode_token(key("ec"), claims, kid=None),
        "unknown-kid": encode_token(key("ec"), claims, kid="nobody"),
        "ec-kid-rs-alg": encode_token(key("rsa"), claims, kid="ec", alg="RS256"),
        "expired": token(ttl=-5),
        "nbf-in-future": encode_token(key("ec"), {**claims, "nbf": now + 60}, kid="ec"),
        "wrong-iss": token(iss="https://evil.example.com"),
        "missing-aud": encode_token(
            key("ec"), {k: v for k, v in claims.items() if k != "aud"}, kid="ec"
        ),
        "wrong-aud": token(aud="https://other.example.com"),
        "flipped-signature": f"{head}.{body}.{'B' if signature[0] == 'A' else 'A'}{signature[1:]}",
        "truncated": good[: len(good) // 2],
        "non-base64": f"{head}.%%%.{signature}",
        "over-8-kib": encode_token(key("ec"), {**claims, "pad": "x" * 9000}, kid="ec"),
        "no-roles": token(scope=""),
    }


def encode_unsigned(header: dict[str, str], claims: dict[str, object]) -> str:
    from ssegate.guards.jwt import b64url_encode

    def part(value: object) -> str:
        return b64url_encode(json.dumps(value).encode())

    return f"{part(header)}.{part(claims)}."


FORGED = _forged()


HOW_TO_SEND = (
    '"Authorization: Bearer <token>" or ?access_token=<token> or the cookie "access_token=<token>"'
)
"""What a refusal says about where this gateway's http server reads the token."""


@pytest.mark.parametrize("case", sorted(FORGED))
def test_forged_and_stale_tokens_are_403_with_a_logged_reason(gateway: Gateway, case: str) -> None:
    async def scenario() -> httpx.Response:
        async with gateway.client(http2=True) as client:
            return await client.get(
                gateway.url, headers={"authorization": f"Bearer {FORGED[case]}"}
            )

    response = asyncio.run(scenario())
    assert response.status_code == 403
    assert response.headers["www-authenticate"].startswith('Bearer realm="authn_jwt", error=')
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text.startswith("guard 'authn_jwt' refused the token: ")
    assert response.text.endswith(f"; send one it accepts as {HOW_TO_SEND}\n")
    time.sleep(0.1)
    assert gateway.logged("guard.refused")
    assert not any(FORGED[case] in line for line in gateway.process.output)


@pytest.mark.parametrize("carrier", ["none", "other-scheme", "empty-query"])
def test_requests_without_credentials_are_401(gateway: Gateway, carrier: str) -> None:
    headers = {"authorization": "Basic YWxpY2U6c2VjcmV0"} if carrier == "other-scheme" else {}
    url = gateway.url + ("?access_token=" if carrier == "empty-query" else "")

    async def scenario() -> httpx.Response:
        async with gateway.client(http2=False) as client:
            return await client.get(url, headers=headers)

    response = asyncio.run(scenario())
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="authn_jwt"'
    assert response.text == f"no credentials for guard 'authn_jwt': send {HOW_TO_SEND}\n"


@pytest.mark.parametrize("carrier", ["query", "cookie"])
def test_credentials_in_the_query_or_a_cookie_open_the_stream(
    gateway: Gateway, carrier: str
) -> None:
    async def scenario() -> tuple[int, str]:
        query = {"access_token": token()} if carrier == "query" else None
        cookies = {"access_token": token()} if carrier == "cookie" else None
        async with upstream(gateway) as server, gateway.client(http2=True) as client:
            client.cookies = httpx.Cookies(cookies)
            async with client.stream("GET", gateway.url, params=query) as response:
                server.publish("hello")
                event = await Stream(response).next()
                return response.status_code, event.data

    assert asyncio.run(scenario()) == (200, "hello")


def test_a_cookie_is_looked_up_before_the_header(gateway: Gateway) -> None:
    async def scenario() -> int:
        async with gateway.client(http2=True) as client:
            client.cookies = httpx.Cookies({"access_token": token(ttl=-5)})
            response = await client.get(gateway.url, headers={"authorization": f"Bearer {token()}"})
            return response.status_code

    assert asyncio.run(scenario()) == 403


class _JwksHandler(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_jwks_url_that_is_down_at_start_is_used_once_it_comes_up(tmp_path: Path) -> None:
    jwks_port = free_port()
    built = Gateway(tmp_path, f"http://127.0.0.1:{jwks_port}/jwks.json")

    async def status() -> int:
        async with built.client(http2=True) as client:
            response = await client.get(built.url, headers={"authorization": f"Bearer {token()}"})
            return response.status_code

    with built.process:
        assert asyncio.run(status()) == 403
        assert asyncio.run(status()) == 403  # still down, within the retry interval: no fetch
        _JwksHandler.body = json.dumps({"keys": jwks()}).encode()
        server = ThreadingHTTPServer(("127.0.0.1", jwks_port), _JwksHandler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            time.sleep(1.2)
            assert asyncio.run(status()) == 502  # past the guard; the upstream is not running
        finally:
            server.shutdown()
            server.server_close()
    assert any("could not be fetched" in line for line in built.process.output)
