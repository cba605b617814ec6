"""A running gateway's Prometheus metrics, for the tests that start a real one."""

from __future__ import annotations

import asyncio


async def metric(port: int, series: str) -> float:
    """The value of one Prometheus series, ``name{labels}`` as exposed at
    ``http://127.0.0.1:<port>/metrics`` (0 when absent)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nhost: metrics\r\nconnection: close\r\n\r\n")
    text = (await reader.read()).decode()
    writer.close()
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
