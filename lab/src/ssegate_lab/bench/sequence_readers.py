"""SSE streams that keep every sequenced event they get, for the failover checks.

The failover scenario (:mod:`ssegate_lab.bench.failover`) produces events whose data is
``{"p":<partition>,"s":<sequence in that partition>,"k":"<key>"}`` and must check, at every
client, that it got each one it was owed once and in order. So each stream here keeps, per
partition, every sequence number it read and when (``time.monotonic_ns``, the clock the
producer stamps with too); the checks run afterwards, in the driver, against what the producer
had acknowledged. A stream the gateway ends (a slow client is dropped) comes back with the
last event id it read, as a browser's ``EventSource`` does, and counts the reconnect.

:class:`SequenceReaders` is a spawned client process (:mod:`~ssegate_lab.bench.client_process`;
uvloop, HTTP/1.1 through httptools, ``asyncio.Protocol``) driven over a pipe:
:meth:`~SequenceReaders.open` opens one stream per path and says how many were answered
``200``; :meth:`~SequenceReaders.counts` says how many events each stream has so far (to wait
for a drain); :meth:`~SequenceReaders.collect` returns everything kept, as
:class:`StreamRecord` values.
"""

from __future__ import annotations

import asyncio
import re
import time
from array import array
from dataclasses import dataclass, field
from typing import Any, cast

import httptools

from ssegate_lab.bench.command_process import ClientProcess
from ssegate_lab.bench.held_streams import sse_request

SEQUENCED = re.compile(rb'"p":(\d+),"s":(\d+)')
RECONNECT_DELAY = 1.0
"""Seconds before a stream the gateway ended comes back (an ``EventSource`` waits its
``retry``, 3 s in most browsers; a shorter wait keeps the scenario short)."""
MAX_RECONNECTS = 20


def last_event_id(events: bytes) -> str | None:
    """The value of the last ``id:`` line of complete events (each line ends with LF), if any."""
    line = events.rfind(b"\nid:")
    if line < 0 and not events.startswith(b"id:"):
        return None
    start = line + 4 if line >= 0 else 3
    return events[start : events.find(b"\n", start)].strip().decode()


@dataclass(slots=True)
class StreamRecord:
    """What one stream read: per partition, the sequence numbers and their arrival times."""

    path: str
    sequences: dict[int, array[int]] = field(default_factory=dict)
    arrivals: dict[int, array[int]] = field(default_factory=dict)
    reconnects: int = 0
    """Times the gateway ended the stream and it came back with its last event id."""
    closed_early: bool = False
    """The stream ended and could not come back."""

    def add(self, partition: int, sequence: int, now: int) -> None:
        sequences = self.sequences.get(partition)
        if sequences is None:
            sequences = self.sequences[partition] = array("q")
            self.arrivals[partition] = array("q")
        sequences.append(sequence)
        self.arrivals[partition].append(now)

    @property
    def received(self) -> int:
        return sum(len(s) for s in self.sequences.values())


class _Stream:
    """One stream as a browser's ``EventSource`` holds it: when the gateway ends it (a slow
    client is dropped, say), it comes back after :data:`RECONNECT_DELAY` with the last event id
    it read, at most :data:`MAX_RECONNECTS` times."""

    def __init__(self, path: str, port: int) -> None:
        self.path = path
        self.port = port
        self.record = StreamRecord(path)
        self.last_id = ""
        self.transport: asyncio.BaseTransport | None = None
        self.closing = False

    async def connect(self) -> str:
        """Open the stream (again); ``""`` once it is answered ``200``, else what went wrong."""
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[str] = loop.create_future()
        headers = {"last-event-id": self.last_id} if self.last_id else {}
        request = sse_request(self.path, self.port, headers)
        try:
            self.transport, _ = await loop.create_connection(
                lambda: _Connection(self, request, answered), "127.0.0.1", self.port
            )
        except OSError as exc:
            return f"connect: {exc}"
        return await answered

    def read(self, events: bytes) -> None:
        """Complete events (up to a blank line): their sequence numbers, then their last id."""
        now = time.monotonic_ns()
        add = self.record.add
        for match in SEQUENCED.finditer(events):
            add(int(match[1]), int(match[2]), now)
        self.last_id = last_event_id(events) or self.last_id

    def lost(self) -> None:
        if self.closing:
            return
        if self.record.reconnects >= MAX_RECONNECTS:
            self.record.closed_early = True
            return
        self.record.reconnects += 1
        asyncio.get_running_loop().call_later(
            RECONNECT_DELAY, lambda: asyncio.ensure_future(self._come_back())
        )

    async def _come_back(self) -> None:
        if not self.closing and await self.connect():
            self.lost()  # not answered: try again later

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection of a stream: the request, the response head, then events."""

    def __init__(self, stream: _Stream, request: bytes, answered: asyncio.Future[str]) -> None:
        self._stream = stream
        self._request = request
        self._answered = answered
        self._parser = httptools.HttpResponseParser(self)
        self._tail = b""
        self._streaming = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.Transport, transport).write(self._request)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._settle(f"bad response: {exc}")

    # httptools callbacks
    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status != 200:
            self._settle(f"status {status}")
            return
        self._streaming = True
        self._settle("")

    def on_body(self, body: bytes) -> None:
        buffer = self._tail + body if self._tail else body
        end = buffer.rfind(b"\n\n")
        if end < 0:
            self._tail = buffer
            return
        self._tail = buffer[end + 2 :]
        self._stream.read(buffer[: end + 1])

    def connection_lost(self, exc: Exception | None) -> None:
        if self._streaming:
            self._stream.lost()
        self._settle(f"connection lost: {exc}")

    def _settle(self, error: str) -> None:
        if not self._answered.done():
            self._answered.set_result(error)


class _Readers:
    """The client process's streams."""

    def __init__(self) -> None:
        self.streams: list[_Stream] = []

    async def open(self, command: dict[str, Any]) -> dict[str, Any]:
        gate = asyncio.Semaphore(64)
        errors: list[str] = []

        async def connect(stream: _Stream) -> bool:
            async with gate:
                error = await stream.connect()
            if error:
                errors.append(f"{stream.path}: {error}")
            return not error

        streams = [_Stream(path, command["port"]) for path in command["paths"]]
        self.streams += streams
        tasks = [asyncio.ensure_future(connect(stream)) for stream in streams]
        done, pending = await asyncio.wait(tasks, timeout=command["timeout"])
        for task in pending:
            task.cancel()
        opened = sum(1 for task in done if task.result())
        return {"opened": opened, "failed": len(tasks) - opened, "errors": errors[:5]}

    async def handle(self, command: dict[str, Any]) -> Any:
        op = command["op"]
        if op == "open":
            return await self.open(command)
        if op == "counts":
            return [stream.record.received for stream in self.streams]
        return [stream.record for stream in self.streams]

    async def close(self) -> None:
        for stream in self.streams:
            stream.close()
        self.streams.clear()
        await asyncio.sleep(0.05)


class SequenceReaders(ClientProcess):
    """A client process holding event streams to ``127.0.0.1:port``; a context manager."""

    def __init__(self, port: int, *, max_streams: int = 5000, timeout: float = 60.0) -> None:
        super().__init__(_Readers, max_streams=max_streams, timeout=timeout)
        self.port = port

    def open(self, paths: list[str]) -> dict[str, Any]:
        """Open one stream per path; ``{"opened", "failed", "errors"}``."""
        answer: dict[str, Any] = self.ask(
            {"op": "open", "paths": paths, "port": self.port, "timeout": self.timeout - 5}
        )
        return answer

    def counts(self) -> list[int]:
        """Events read so far, per stream, in the order the streams were opened."""
        counts: list[int] = self.ask({"op": "counts"})
        return counts

    def collect(self) -> list[StreamRecord]:
        records: list[StreamRecord] = self.ask({"op": "collect"})
        return records
