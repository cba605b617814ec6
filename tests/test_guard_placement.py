"""A guard on the http server's route, as Zilla's own authorization configs put it, and role
names that are request expressions: a real gateway, short-lived tokens, h2 and HTTP/1.1.

The sse server's route has no guard here: the http route's guard alone authorizes the stream,
and the stream still gets the challenge before ``exp``, ends at ``exp`` unless answered, and one
answer on an h2 connection extends every stream of the identity on it. ``/dynamic`` asks for the
role ``${method}${path}``, which a challenge answer's POST would not hold: the answer is taken
before any route, as in Zilla. Helpers come from ``test_challenge`` (same upstream, same
tokens); the guard on the sse-kafka route is in ``test_sse_kafka_guarded``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .guards.signing import jwks, token
from .test_challenge import (
    CHALLENGE,
    Gateway,
    answer,
    json_claims,
    open_stream,
    upstream,
)
from .test_challenge import (
    CONFIG as CHALLENGE_CONFIG,
)

GUARD_ON_THE_SSE_ROUTE = """\
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
"""

GUARDS_ON_THE_HTTP_ROUTES = """\
    routes:
      - when:
          - headers:
              :path: /events
        guarded:
          authn_jwt:
            - proxy:stream
        exit: north_sse_server
      - when:
          - headers:
              :method: GET
              :path: /dynamic
        guarded:
          authn_jwt:
            - ${{method}}${{path}}
        exit: north_sse_server
      - when:
          - headers:
              :path: /files/*
        exit: east_http_filesystem
  east_http_filesystem:
    type: http-filesystem
    kind: proxy
    routes:
      - when:
          - path: /files/{{path}}
        guarded:
          authn_jwt:
            - ${{method}}${{path}}
        with:
          path: ${{params.path}}
        exit: east_filesystem_server
  east_filesystem_server:
    type: filesystem
    kind: server
    options:
      location: www/
  north_sse_server:
    type: sse
    kind: server
    options:
      keepalive: 0
    exit: south_sse_client
"""

assert GUARD_ON_THE_SSE_ROUTE in CHALLENGE_CONFIG
CONFIG = CHALLENGE_CONFIG.replace(GUARD_ON_THE_SSE_ROUTE, GUARDS_ON_THE_HTTP_ROUTES)
"""``test_challenge``'s gateway with the sse route's guard moved to the http routes."""

BOTH = pytest.mark.parametrize("http2", [True, False], ids=["h2", "http1.1"])


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("http-guarded")
    (root / "www").mkdir()
    (root / "www" / "notes.txt").write_text("for GET/files/notes.txt only\n")
    built = Gateway(root, jwks(), CONFIG)
    with built.process:
        yield built


def at(gateway: Gateway, path: str) -> str:
    return gateway.url.replace("/events", path)


@BOTH
def test_a_guard_on_the_http_route_challenges_and_an_answer_keeps_the_stream(
    gateway: Gateway, http2: bool
) -> None:
    async def scenario() -> tuple[str, float, float, int, str]:
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
            answered = await answer(client if http2 else other, gateway.url, token(ttl=8))
            await asyncio.sleep(max(0.0, exp + 0.5 - time.time()))
            server.publish("past the first exp")
            return (
                challenge.data,
                challenged_at,
                exp,
                answered.status_code,
                (await stream.next()).data,
            )

    challenge, challenged_at, exp, status, data = asyncio.run(scenario())
    assert challenge == CHALLENGE
    assert exp - 1 - 0.3 <= challenged_at <= exp - 1 + 0.5
    assert status == 204
    assert data == "past the first exp"


@BOTH
def test_a_guard_on_the_http_route_ends_the_stream_at_exp(gateway: Gateway, http2: bool) -> None:
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
    assert gateway.logged("sse.authorization_expired")


def test_one_answer_extends_every_stream_under_a_role_expression_on_an_h2_connection(
    gateway: Gateway,
) -> None:
    async def scenario() -> tuple[int, list[str]]:
        first = token(ttl=3, scope="GET/dynamic")
        exp = json_claims(first)["exp"]
        url = at(gateway, "/dynamic")
        async with (
            upstream(gateway) as server,
            gateway.client(http2=True) as client,
            contextlib.AsyncExitStack() as stack,
        ):
            streams = [await open_stream(client, url, first, stack) for _ in range(3)]
            for stream in streams:
                assert (await stream.next()).type == "challenge"
            # The answer is a POST: it holds no role "POST/dynamic", and needs none.
            status = (await answer(client, url, token(ttl=8, scope="GET/dynamic"))).status_code
            await asyncio.sleep(max(0.0, exp + 0.5 - time.time()))
            server.publish("all three")
            return status, [(await stream.next()).data for stream in streams]

    status, data = asyncio.run(scenario())
    assert status == 204
    assert data == ["all three"] * 3


@BOTH
def test_a_role_expression_is_evaluated_per_request(gateway: Gateway, http2: bool) -> None:
    async def scenario() -> tuple[int, httpx.Response]:
        url = at(gateway, "/dynamic?lastEventId=7")
        async with upstream(gateway), gateway.client(http2=http2) as client:
            holder = {"authorization": f"Bearer {token(scope='GET/dynamic')}"}
            async with client.stream("GET", url, headers=holder) as response:
                opened = response.status_code
            other = {"authorization": f"Bearer {token(scope='proxy:stream GET/events')}"}
            return opened, await client.get(url, headers=other)

    opened, refused = asyncio.run(scenario())
    assert opened == 200
    assert refused.status_code == 403
    assert "token lacks roles GET/dynamic" in refused.text
    assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]


def test_a_role_expression_naming_something_unknown_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "zilla.yaml"
    text = CONFIG.replace("${{method}}${{path}}", "${{params.tenant}}")
    config.write_text(
        text.format(issuer="https://a", audience="b", keys=json.dumps(jwks()), port=1, upstream=2)
    )
    result = subprocess.run(
        [sys.executable, "-m", "ssegate", "validate", "-c", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert (
        "bindings.north_http_server.routes[1].guarded.authn_jwt[0]: '${params.tenant}' is not a"
        " role expression (role names may use ${method} and ${path})"
    ) in result.stderr


@BOTH
def test_a_guarded_http_filesystem_route_evaluates_its_role_expression(
    gateway: Gateway, http2: bool
) -> None:
    async def scenario() -> list[httpx.Response]:
        url = at(gateway, "/files/notes.txt")
        async with gateway.client(http2=http2) as client:
            return [
                await client.get(url, headers=headers)
                for headers in (
                    {"authorization": f"Bearer {token(scope='GET/files/notes.txt')}"},
                    {"authorization": f"Bearer {token(scope='GET/files/other.txt')}"},
                    {},
                )
            ]

    allowed, other, anonymous = asyncio.run(scenario())
    assert (allowed.status_code, allowed.text) == (200, "for GET/files/notes.txt only\n")
    assert other.status_code == 403
    assert "token lacks roles GET/files/notes.txt" in other.text
    assert anonymous.status_code == 401
