"""The fixed-rate publisher of the fan-out benchmark's Mercure side: POSTs on one connection.

Mercure takes one update per ``POST /.well-known/mercure`` (form fields ``topic``, ``data``,
``id``), so where :func:`ssegate_lab.bench.publisher.publish` writes one line per event, this
writes one request per event, each with the publisher's bearer token. As there, events go out
in batches every ``tick`` seconds and every event of a batch carries the batch's
``time.monotonic_ns()`` as its data; the ``id`` is the event's sequence number (1, 2, ...), so
the load clients read Mercure's events with the same scan as ssegate's and find gaps the same
way. A batch's requests are written with one ``write`` on one keep-alive HTTP/1.1 connection
(pipelined: the hub answers them in order), which also keeps the updates in order.

Whether the publisher kept up is measured, not assumed: every ``200`` answer is counted as it
arrives, and :class:`HubPublished` says how many were acknowledged, when the last one came,
how far the answers fell behind the writes, and the rate achieved.
"""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, cast

import httptools

from ssegate_lab.bench.mercure import HUB_PATH
from ssegate_lab.bench.publisher import Published

ACK_WAIT_SECONDS = 10.0


@dataclass(slots=True)
class HubPublished:
    """What one publish run wrote and what the hub acknowledged."""

    written: int = 0
    acknowledged: int = 0
    refused: int = 0
    batches: int = 0
    started_ns: int = 0
    ended_ns: int = 0
    """When the publishing loop ended (after its last pause)."""
    last_write_ns: int = 0
    last_ack_ns: int = 0
    most_in_flight: int = 0
    """The most requests written and not yet answered, seen at a batch."""
    errors: list[str] = field(default_factory=list)

    def as_published(self) -> Published:
        return Published(self.written, self.started_ns, self.ended_ns, self.batches)

    def summary(self, rate: float) -> dict[str, Any]:
        """The publisher's figures: whether it kept up with ``rate``."""
        span = (self.last_ack_ns - self.started_ns) / 1e9 if self.last_ack_ns else 0.0
        return {
            "rate": rate,
            "written": self.written,
            "acknowledged": self.acknowledged,
            "refused": self.refused,
            "achieved_events_per_s": round(self.acknowledged / span, 1) if span > 0 else 0.0,
            "last_answer_after_last_write_ms": round(
                max(0, self.last_ack_ns - self.last_write_ns) / 1e6, 2
            ),
            "most_in_flight": self.most_in_flight,
            "errors": self.errors[:3],
        }


class _HubConnection(asyncio.Protocol):
    """One keep-alive connection to the hub, counting the answers to pipelined POSTs."""

    def __init__(self, result: HubPublished) -> None:
        self.result = result
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.body = b""
        self.settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.expected = -1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"unreadable answer from the hub: {exc}")

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        result = self.result
        status = self.parser.get_status_code()
        if status == 200:
            result.acknowledged += 1
            result.last_ack_ns = time.monotonic_ns()
        else:
            result.refused += 1
            if len(result.errors) < 3:
                result.errors.append(f"{status}: {self.body[:200].decode('latin-1').strip()}")
        self.body = b""
        self.settle_if_done()

    def settle_if_done(self) -> None:
        done = self.result.acknowledged + self.result.refused
        if self.expected >= 0 and done >= self.expected and not self.settled.done():
            self.settled.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.settled.done():
            self._fail(f"connection to the hub lost: {exc}")

    def _fail(self, reason: str) -> None:
        if len(self.result.errors) < 3:
            self.result.errors.append(reason)
        if not self.settled.done():
            self.settled.set_result(None)


def _request_head(port: int, token: str) -> bytes:
    return (
        f"POST {HUB_PATH} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        f"authorization: Bearer {token}\r\n"
        "content-type: application/x-www-form-urlencoded\r\n"
    ).encode()


async def publish_to_hub(
    port: int, token: str, topic: str, rate: float, duration: float, *, tick: float = 0.005
) -> HubPublished:
    """POST ``rate`` updates/s for ``duration`` s to the hub's plain port; what happened."""
    loop = asyncio.get_running_loop()
    result = HubPublished()
    _, connection = await loop.create_connection(lambda: _HubConnection(result), "127.0.0.1", port)
    head = _request_head(port, token)
    form_topic = urllib.parse.quote(topic, safe="").encode()
    total = max(0, round(rate * duration))
    step = max(tick, 1.0 / rate) if rate > 0 else tick
    result.started_ns = started = time.monotonic_ns()
    transport = connection.transport
    assert transport is not None
    try:
        while result.written < total and not connection.settled.done():
            elapsed = (time.monotonic_ns() - started) / 1e9
            due = min(total, int(rate * elapsed) + 1) - result.written
            if due > 0:
                stamp = time.monotonic_ns()
                batch = []
                for seq in range(result.written + 1, result.written + due + 1):
                    body = b"topic=%b&data=%d&id=%d" % (form_topic, stamp, seq)
                    batch.append(b"%bcontent-length: %d\r\n\r\n%b" % (head, len(body), body))
                transport.write(b"".join(batch))
                result.last_write_ns = time.monotonic_ns()
                result.written += due
                result.batches += 1
                in_flight = result.written - result.acknowledged - result.refused
                result.most_in_flight = max(result.most_in_flight, in_flight)
            await asyncio.sleep(step)
        result.ended_ns = time.monotonic_ns()
        connection.expected = result.written
        connection.settle_if_done()
        try:
            await asyncio.wait_for(asyncio.shield(connection.settled), ACK_WAIT_SECONDS)
        except TimeoutError:
            unanswered = result.written - result.acknowledged - result.refused
            result.errors.append(f"{unanswered} updates unanswered {ACK_WAIT_SECONDS:.0f} s after")
    finally:
        if not connection.settled.done():
            connection.settled.set_result(None)  # closing now is not a lost connection
        transport.close()
    return result
