"""SSE streams that keep every sequenced event they get, for the failover checks.

The failover scenario (:mod:`ssegate.bench.failover`) produces events whose data is
``{"p":<partition>,"s":<sequence in that partition>,"k":"<key>"}`` and must check, at every
client, that it got each one it was owed once and in order. So each stream here keeps, per
partition, every sequence number it read and when (``time.monotonic_ns``, the clock the
producer stamps with too); the checks run afterwards, in the driver, against what the producer
had acknowledged.

:class:`SequenceReaders` is a spawned client process (:mod:`~ssegate.bench.client_process`;
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

from ssegate.bench.client_process import ClientProcess
from ssegate.bench.held_streams import sse_request

SEQUENCED = re.compile(rb'"p":(\d+),"s":(\d+)')


@dataclass(slots=True)
class StreamRecord:
    """What one stream read: per partition, the sequence numbers and their arrival times."""

    path: str
    sequences: dict[int, array[int]] = field(default_factory=dict)
    arrivals: dict[int, array[int]] = field(default_factory=dict)
    closed_early: bool = False

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


class _SequenceStream(asyncio.Protocol):
    """One HTTP/1.1 event stream: the request, the response head, then sequenced events."""

    def __init__(self, request: bytes, answered: asyncio.Future[str], record: StreamRecord):
        self._request = request
        self._answered = answered
        self.record = record
        self._parser = httptools.HttpResponseParser(self)
        self._tail = b""
        self._streaming = False
        self.closing = False

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
        now = time.monotonic_ns()
        add = self.record.add
        for match in SEQUENCED.finditer(buffer, 0, end):
            add(int(match[1]), int(match[2]), now)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._streaming and not self.closing:
            self.record.closed_early = True
        self._settle(f"connection lost: {exc}")

    def _settle(self, error: str) -> None:
        if not self._answered.done():
            self._answered.set_result(error)


class _Readers:
    """The client process's streams."""

    def __init__(self) -> None:
        self.streams: list[tuple[asyncio.BaseTransport, _SequenceStream]] = []

    async def open(self, command: dict[str, Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        port: int = command["port"]
        gate = asyncio.Semaphore(64)
        errors: list[str] = []

        async def connect(path: str) -> bool:
            async with gate:
                answered: asyncio.Future[str] = loop.create_future()
                stream = _SequenceStream(sse_request(path, port), answered, StreamRecord(path))
                try:
                    transport, _ = await loop.create_connection(lambda: stream, "127.0.0.1", port)
                except OSError as exc:
                    errors.append(f"connect: {exc}")
                    return False
                self.streams.append((transport, stream))
                error = await answered
                if error:
                    errors.append(f"{path}: {error}")
                return not error

        tasks = [asyncio.ensure_future(connect(path)) for path in command["paths"]]
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
            return [stream.record.received for _, stream in self.streams]
        return [stream.record for _, stream in self.streams]

    async def close(self) -> None:
        for transport, stream in self.streams:
            stream.closing = True
            transport.close()
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
