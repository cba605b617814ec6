"""``sse`` ``requests[].content`` end to end: a real gateway process proxies an upstream SSE
server and checks every event against a JSON Schema from an inline catalog. An invalid event
never reaches the client (only its id moves the client's cursor), it is logged and counted, and
the stream goes on."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import httpx

from ssegate.engine.runtime import free_port
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate.tools.sse_server import ExampleSseServer
from ssegate_lab.bench.gateway import GatewayProcess

SCHEMA = json.dumps(
    {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"price": {"type": "number", "minimum": 0}},
        "required": ["price"],
    }
)


def write_config(root: Path, port: int, upstream: int, metrics: int) -> Path:
    config = f"""
    name: sse-content-validation
    catalogs:
      local:
        type: inline
        options:
          subjects:
            price:
              schema: '{SCHEMA}'
    bindings:
      north_tcp_server:
        type: tcp
        kind: server
        options: {{host: 127.0.0.1, port: {port}}}
        exit: north_http_server
      north_http_server:
        type: http
        kind: server
        options: {{versions: [http/1.1]}}
        exit: north_sse_server
      north_sse_server:
        type: sse
        kind: server
        options:
          requests:
            - path: /prices
              content:
                model: json
                catalog:
                  local:
                    - subject: price
        exit: south_sse_client
      south_sse_client:
        type: sse
        kind: client
        exit: south_http_client
      south_http_client:
        type: http
        kind: client
        options: {{versions: [http/1.1]}}
        exit: south_tcp_client
      south_tcp_client:
        type: tcp
        kind: client
        options: {{host: 127.0.0.1, port: {upstream}}}
    telemetry:
      exporters:
        logs:
          type: stdout
        metrics:
          type: prometheus
          options:
            endpoints:
              - {{scheme: http, port: {metrics}, path: /metrics}}
    """
    path = root / "zilla.yaml"
    path.write_text(textwrap.dedent(config))
    return path


async def read_until(response: httpx.Response, last: str) -> tuple[list[SseEvent], str]:
    """Events (and the raw text) up to and including the event with data ``last``."""
    parser = SseParser()
    events: list[SseEvent] = []
    raw = ""
    async for chunk in response.aiter_raw():
        raw += chunk.decode()
        events.extend(e for e in parser.feed(chunk) if isinstance(e, SseEvent))
        if events and events[-1].data == last:
            break
    return events, raw


def test_an_invalid_event_is_dropped_logged_and_counted_and_the_stream_goes_on(
    tmp_path: Path,
) -> None:
    port, upstream_port, publish_port, metrics_port = (free_port() for _ in range(4))
    config = write_config(tmp_path, port, upstream_port, metrics_port)

    async def scenario() -> tuple[list[SseEvent], str, str]:
        upstream = ExampleSseServer()
        await upstream.start(upstream_port, publish_port)
        try:
            async with (
                httpx.AsyncClient(timeout=10.0) as client,
                client.stream("GET", f"http://127.0.0.1:{port}/prices") as response,
            ):
                assert response.status_code == 200
                await asyncio.wait_for(upstream_stream_opened(upstream), 5)
                upstream.publish('{"price": 10}')
                upstream.publish('{"price": -1}')
                upstream.publish("not json at all")
                upstream.publish('{"price": 12.5}')
                events, raw = await asyncio.wait_for(read_until(response, '{"price": 12.5}'), 10)
            scraped = await client_get(f"http://127.0.0.1:{metrics_port}/metrics")
            return events, raw, scraped
        finally:
            await upstream.close()

    with GatewayProcess(config) as gateway:
        events, raw, metrics = asyncio.run(scenario())
        logged = [line for line in gateway.output if "sse.invalid_event" in line]

    assert [(e.id, e.data) for e in events] == [("1", '{"price": 10}'), ("4", '{"price": 12.5}')]
    assert "id:2\n\nid:3\n\n" in raw  # the dropped events still move the client's cursor
    invalid_counts = [
        line for line in metrics.splitlines() if line.startswith("ssegate_sse_invalid_events_total")
    ]
    assert invalid_counts and invalid_counts[0].endswith(" 2")
    assert len(logged) == 2
    assert "/price: -1 is less than the minimum of 0" in logged[0]
    assert "not JSON" in logged[1]


async def upstream_stream_opened(upstream: ExampleSseServer) -> None:
    while not upstream.streams:
        await asyncio.sleep(0.02)


async def client_get(url: str) -> str:
    async with httpx.AsyncClient(timeout=5.0) as client:
        return (await client.get(url)).text
