"""Reading an SSE stream of a running gateway the way a browser does, for end-to-end tests."""

from __future__ import annotations

import asyncio

import httpx

from ssegate.sse_codec.parser import SseEvent, SseParser


async def read_events(port: int, path: str, owed: int, last_id: str = "") -> list[SseEvent]:
    """The first ``owed`` events of ``path`` on ``127.0.0.1:port`` (from ``last_id``, sent as
    ``last-event-id``), within a generous deadline; the response must be a 200."""
    events: list[SseEvent] = []
    headers = {"accept": "text/event-stream"}
    if last_id:
        headers["last-event-id"] = last_id
    parser = SseParser(last_event_id=last_id)
    async with httpx.AsyncClient(timeout=30) as client:
        url = f"http://127.0.0.1:{port}{path}"
        async with client.stream("GET", url, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            async with asyncio.timeout(60):
                async for chunk in response.aiter_raw():
                    events += [e for e in parser.feed(chunk) if isinstance(e, SseEvent)]
                    if len(events) >= owed:
                        break
    return events[:owed]  # a chunk may carry more: those are read again from the last id
