"""The example upstream SSE server, spoken to over real sockets."""

from __future__ import annotations

import asyncio

from ssegate.tools.sse_server import ExampleSseServer


async def read_until(reader: asyncio.StreamReader, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = await asyncio.wait_for(reader.read(4096), 5)
        assert chunk, f"closed before {marker!r}; got {data!r}"
        data += chunk
    return data


def test_lines_published_become_events_with_increasing_ids() -> None:
    async def scenario() -> None:
        server = ExampleSseServer()
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.http_port)
        writer.write(b"GET /any/path HTTP/1.1\r\nhost: x\r\n\r\n")
        head = await read_until(reader, b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        for _ in range(100):
            if server.streams:
                break
            await asyncio.sleep(0.01)
        _, publisher = await asyncio.open_connection("127.0.0.1", server.publish_port)
        publisher.write(b"hello\r\nworld\n")
        body = await read_until(reader, b"data:world\n\n")
        assert b"id:1\ndata:hello\n\n" in body and b"id:2\ndata:world\n\n" in body
        publisher.close()
        writer.close()
        await server.close()

    asyncio.run(scenario())


def test_last_event_id_replays_the_events_after_it_from_history() -> None:
    async def scenario() -> None:
        server = ExampleSseServer(history_size=2)
        await server.start()
        for text in ("a", "b", "c"):
            server.publish(text)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.http_port)
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\nlast-event-id: 2\r\n\r\n")
        body = await read_until(reader, b"data:c\n\n")
        assert b"data:b" not in body and b"id:3\ndata:c\n\n" in body
        assert server.replay_after("0") == [b"id:2\ndata:b\n\n", b"id:3\ndata:c\n\n"]
        assert server.replay_after(None) == []
        writer.close()
        await server.close()

    asyncio.run(scenario())


def test_methods_other_than_get_get_405() -> None:
    async def scenario() -> None:
        server = ExampleSseServer()
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.http_port)
        writer.write(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        head = await read_until(reader, b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 405")
        writer.close()
        await server.close()

    asyncio.run(scenario())
