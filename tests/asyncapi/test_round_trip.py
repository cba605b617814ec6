"""AsyncAPI round trip: document → bindings → a running gateway → the document it serves.

The gateway is a real ``ssegate start`` process on ``examples/asyncapi`` (an AsyncAPI 3.0
document of a guarded, validated SSE channel, proxied to the example SSE server). The
document the gateway serves at ``/asyncapi.json`` is valid against the official schema and says
what the source document said: same channel, parameters, payload, action and security.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft7Validator
from tests.asyncapi.official import npm_schema

from ssegate.asyncapi.document import load_document
from ssegate.asyncapi.model import Api, read_api
from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate.tools.sse_server import ExampleSseServer
from ssegate.tools.token import PrivateKey, generate_key, mint, public_jwk
from ssegate_lab.bench.gateway import GatewayProcess

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "asyncapi"
ISSUER, AUDIENCE = "https://auth.example.com", "https://api.example.com"


@dataclass(frozen=True)
class Gateway:
    port: int
    upstream_port: int
    key: PrivateKey

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def token(self) -> str:
        return mint(self.key, kid="example_ec", sub="tester", ttl=120, iss=ISSUER, aud=AUDIENCE)


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    key = generate_key("ec")
    jwk = public_jwk(key, "example_ec")
    port, upstream_port = free_port(), free_port()
    env = {
        "SSEGATE_HOST": "127.0.0.1",
        "SSEGATE_HTTP_PORT": str(port),
        "SSE_SERVER_HOST": "127.0.0.1",
        "SSE_SERVER_PORT": str(upstream_port),
        "JWT_ISSUER": ISSUER,
        "JWT_AUDIENCE": AUDIENCE,
        "JWT_EC_X": jwk["x"],
        "JWT_EC_Y": jwk["y"],
    }
    with GatewayProcess(EXAMPLE / "zilla.yaml", env=env):
        yield Gateway(port, upstream_port, key)


async def read_events(response: httpx.Response, count: int) -> list[SseEvent]:
    parser, events = SseParser(), []
    chunks = response.aiter_raw()
    while len(events) < count:
        chunk = await asyncio.wait_for(anext(chunks), 10)
        events.extend(e for e in parser.feed(chunk) if isinstance(e, SseEvent))
    return events


def test_a_channel_from_the_document_streams_validated_events(gateway: Gateway) -> None:
    async def scenario() -> list[SseEvent]:
        upstream = ExampleSseServer()
        await upstream.start(gateway.upstream_port)
        headers = {"authorization": f"Bearer {gateway.token()}"}
        try:
            async with (
                httpx.AsyncClient(timeout=10, headers=headers) as client,
                client.stream("GET", gateway.url("/sensors/s1/readings")) as response,
            ):
                assert response.status_code == 200
                while not upstream.streams:
                    await asyncio.sleep(0.02)
                for data in ['{"value": 1}', "not a reading", '{"unit": "C"}', '{"value": 2}']:
                    upstream.publish(data)
                return await read_events(response, 2)
        finally:
            await upstream.close()

    events = asyncio.run(scenario())
    assert [e.data for e in events] == ['{"value": 1}', '{"value": 2}']


def test_a_channel_the_document_secures_refuses_a_request_without_a_token(
    gateway: Gateway,
) -> None:
    response = httpx.get(gateway.url("/sensors/s1/readings"), timeout=10)
    assert response.status_code == 401
    assert response.text == (
        "no credentials for guard 'authn_jwt': send \"Authorization: Bearer <token>\"\n"
    )


def test_a_path_the_document_does_not_describe_is_not_found(gateway: Gateway) -> None:
    headers = {"authorization": f"Bearer {gateway.token()}"}
    response = httpx.get(gateway.url("/sensors"), headers=headers, timeout=10)
    assert response.status_code == 404


def summary(api: Api) -> dict[str, Any]:
    """What two documents must agree on to describe the same SSE endpoints."""
    return {
        "protocols": sorted({s.protocol.replace("sse", "http") for s in api.servers}),
        "operations": sorted(
            (
                op.action,
                op.channel.address,
                op.channel.parameters,
                json.dumps(
                    [m.payload and m.payload.schema for m in op.channel.messages],
                    sort_keys=True,
                ),
                sorted((u.type, u.http_scheme, u.roles) for u in op.security),
            )
            for op in api.operations.values()
        ),
    }


def test_the_gateway_serves_an_equivalent_document_valid_against_the_official_schema(
    gateway: Gateway,
) -> None:
    response = httpx.get(gateway.url("/asyncapi.json"), timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    served = response.json()
    assert list(Draft7Validator(npm_schema("3.0.0")).iter_errors(served)) == []
    [server] = served["servers"].values()
    assert server["host"] == f"127.0.0.1:{gateway.port}"
    source = (EXAMPLE / "events.asyncapi.yaml").read_text()
    assert summary(read_api(served)) == summary(read_api(load_document(source)))


def test_the_document_path_refuses_a_post_with_405(gateway: Gateway) -> None:
    response = httpx.post(gateway.url("/asyncapi.json"), content=b"{}", timeout=10)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"
