"""Held SSE streams for the jwt and kafka benchmarks, each with its own request and timings.

:mod:`ssegate_lab.bench.load` sends one request to every stream and reads integer ``id`` fields; the
guarded and the Kafka scenarios need something else: a different request per stream (a distinct
token each), the time each stream took to be authorized (connect start to the ``200`` status
line), and events whose ``id`` is a Kafka position rather than a number. Each event's data is
the JSON object the Kafka benchmark produces, ``{"t":<monotonic_ns>,"n":<sequence>}``, which
both ssegate and KafkaSSE pass through as text. Every event's ``n`` is checked
(:class:`~ssegate_lab.bench.sequence.StreamSequence`): an event that comes twice is a duplicate,
never a second delivery, and skipped numbers are counted apart from it. Latency is read event by
event in a read of up to ``EXACT_PER_READ`` events; in a larger one (a fan-out batch at a high
rate) only at its two ends, which keeps that part of the client's cost per read instead of per
event (the numbers of a large read are pulled out by one C-level ``findall``, about 0.2 µs an
event). Two histograms come out of that: ``latency_ms`` charges every event of such a read the
latency of its oldest (an upper bound), ``latency_ms_lower_bound`` the latency of its newest (a
lower bound); events of reads scanned one by one count exactly in both. The true percentiles lie
between the two. ``latency_ms_sampled`` estimates them: every event of one large read in
``SAMPLE_EVERY`` is scanned exactly and counted ``SAMPLE_EVERY`` times, every event of a small
read once. A read is picked by its place in the stream, not by what it holds, so each event has
the same chance of being measured and the estimate is unbiased.

:class:`HeldStreams` runs one spawned client process (uvloop, HTTP/1.1, ``asyncio.Protocol``)
and drives it over a pipe: :meth:`HeldStreams.open` connects a list of requests with bounded
concurrency and returns how many were answered ``200 text/event-stream`` and how fast;
:meth:`HeldStreams.report` returns what arrived since the last report; :meth:`HeldStreams.close`
closes every stream (with a reset, so the server lets go at once). Client sockets are bound to
127.0.0.2 ... in turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import h2.events
import h2.exceptions

from ssegate_lab.bench.client_process import ClientProcess, EventStreamReader, cpu_seconds
from ssegate_lab.bench.latency import LatencyHistogram
from ssegate_lab.bench.load import greet, h2_client
from ssegate_lab.bench.sequence import StreamSequence

STAMPED_JSON = re.compile(rb'"t":\s*(\d+),\s*"n":\s*(\d+)')
SEQUENCE = re.compile(rb'"n":\s*(\d+)')
EXACT_PER_READ = 8
"""Reads of up to this many events are scanned event by event; larger ones by their ends."""
SAMPLE_EVERY = 16
"""One large read in this many is also scanned event by event, for the sampled estimate."""
OPEN_ANSWER_MARGIN = 10.0
"""Seconds before the answer timeout at which an ``open`` stops waiting and reports."""


@dataclass(frozen=True, slots=True)
class OpenResult:
    opened: int
    failed: int
    seconds: float
    connect_ms: dict[str, float | None]
    errors: list[str]

    @property
    def connects_per_s(self) -> float:
        return round(self.opened / self.seconds, 1) if self.seconds > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Delivery:
    received: int
    """Every event read, duplicates included."""
    gaps: int
    """Sequence numbers skipped (some may come later, as ``late``)."""
    duplicates: int
    """Events whose sequence number the stream had already had."""
    late: int
    """Events that filled a skipped number: delivered, out of order."""
    closed_early: int
    first_ns: int
    last_ns: int
    latency_ms: dict[str, float | None]
    latency_ms_lower_bound: dict[str, float | None]
    latency_ms_sampled: dict[str, float | None]
    cpu_seconds: float


class _Counters:
    __slots__ = (
        "closed_early", "duplicates", "first_ns", "gaps", "histogram", "large_reads", "last_ns",
        "late", "lower", "received", "sampled",
    )  # fmt: skip

    def __init__(self) -> None:
        self.histogram = LatencyHistogram()
        self.lower = LatencyHistogram()
        """Like ``histogram``, but a large read's events are charged its newest one."""
        self.sampled = LatencyHistogram()
        """Exact latencies: small reads' events, and a weighted sample of large reads'."""
        self.received = self.gaps = self.closed_early = self.first_ns = self.last_ns = 0
        self.large_reads = self.duplicates = self.late = 0


class _HeldStream(EventStreamReader):
    """One HTTP/1.1 connection: the request, the status line, then stamped events."""

    def __init__(self, request: bytes, opened: asyncio.Future[str], counters: _Counters) -> None:
        super().__init__(request, opened)
        self._counters = counters
        self._sequence = StreamSequence()
        self.closing = False

    def scan(self, data: bytes) -> None:
        buffer, end = self.complete_blocks(data)
        count = buffer.count(b'"n":', 0, end)
        if count > EXACT_PER_READ:
            self._scan_read(buffer, end)
        elif count:
            self._scan_events(buffer, end)

    def _scan_events(self, buffer: bytes, end: int, weight: int = 1) -> None:
        """Every event's own latency and sequence number; ``weight``: how many events each
        stands for in the sampled estimate."""
        now = time.monotonic_ns()
        counters = self._counters
        record, record_lower = counters.histogram.record, counters.lower.record
        record_sampled = counters.sampled.record
        numbers = []
        for match in STAMPED_JSON.finditer(buffer, 0, end):
            numbers.append(int(match[2]))
            micros = (now - int(match[1])) // 1000
            record(micros)
            record_lower(micros)
            record_sampled(micros, weight)
        self._count(numbers)
        self._received(len(numbers), now)

    def _scan_read(self, buffer: bytes, end: int) -> None:
        """A large read: every event's sequence number, but the latency of its first and last
        events only. Every event of the read is charged the latency of the oldest (the upper
        bound) and of the newest (the lower bound). One such read in :data:`SAMPLE_EVERY` is
        scanned event by event instead."""
        counters = self._counters
        counters.large_reads += 1
        if counters.large_reads % SAMPLE_EVERY == 0:
            self._scan_events(buffer, end, SAMPLE_EVERY)
            return
        first = STAMPED_JSON.search(buffer, 0, end)
        last = STAMPED_JSON.search(buffer, buffer.rfind(b'"t":', 0, end), end)
        if first is None or last is None:
            self._scan_events(buffer, end)
            return
        now = time.monotonic_ns()
        numbers = list(map(int, SEQUENCE.findall(buffer, 0, end)))
        self._count(numbers)
        counters.histogram.record((now - int(first[1])) // 1000, len(numbers))
        counters.lower.record((now - int(last[1])) // 1000, len(numbers))
        self._received(len(numbers), now)

    def _count(self, numbers: list[int]) -> None:
        counts = self._sequence.take(numbers)
        if counts.skipped or counts.duplicates or counts.late:
            counters = self._counters
            counters.gaps += counts.skipped
            counters.duplicates += counts.duplicates
            counters.late += counts.late

    def _received(self, found: int, now: int) -> None:
        if found:
            counters = self._counters
            counters.received += found
            counters.first_ns = counters.first_ns or now
            counters.last_ns = now

    def ended_early(self) -> None:
        self._counters.closed_early += 1


class _H2HeldStreams(asyncio.Protocol):
    """One HTTP/2 connection holding an SSE stream per path; each stream's body is counted by
    a :class:`_HeldStream` of its own, exactly as an HTTP/1.1 stream's is."""

    def __init__(
        self,
        paths: list[str],
        authority: str,
        streams: list[_HeldStream],
        opened: list[asyncio.Future[str]],
    ) -> None:
        self._paths = paths
        self._authority = authority.encode()
        self._conn = h2_client()
        self._pending = list(zip(streams, opened, strict=True))
        self._streams: dict[int, tuple[_HeldStream, asyncio.Future[str]]] = {}
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        conn = self._conn
        greet(conn)
        for path, (stream, future) in zip(self._paths, self._pending, strict=True):
            stream_id = conn.get_next_available_stream_id()
            headers = [(b":method", b"GET"), (b":scheme", b"http"),
                       (b":authority", self._authority), (b":path", path.encode()),
                       (b"accept", b"text/event-stream")]  # fmt: skip
            conn.send_headers(stream_id, headers, end_stream=True)
            self._streams[stream_id] = (stream, future)
        self._pending = []
        self._transport.write(conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        conn = self._conn
        try:
            events = conn.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            self._end_all(f"h2 error: {exc!r}")
            if self._transport is not None:
                self._transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.DataReceived):
                held = self._streams.get(event.stream_id)
                if held is not None and held[1].done():
                    held[0].scan(event.data)
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.ResponseReceived):
                held = self._streams.get(event.stream_id)
                if held is not None:
                    answer = dict(event.headers)
                    ok = answer.get(b":status") == b"200" and answer.get(
                        b"content-type", b""
                    ).startswith(b"text/event-stream")
                    _settle(held[1], "" if ok else f"status {answer.get(b':status')!r}")
            elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                held = self._streams.pop(event.stream_id, None)
                if held is not None:
                    self._end(held, type(event).__name__)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self._end_all(f"GOAWAY {event.error_code}")
        out = conn.data_to_send()
        if out and self._transport is not None:
            self._transport.write(out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_all(f"connection lost: {exc}")

    def _end_all(self, reason: str) -> None:
        streams, self._streams = self._streams, {}
        for held in streams.values():
            self._end(held, reason)

    @staticmethod
    def _end(held: tuple[_HeldStream, asyncio.Future[str]], reason: str) -> None:
        stream, future = held
        if future.done() and future.result() == "" and not stream.closing:
            stream.ended_early()
        _settle(future, reason)


_Opening = tuple[asyncio.Protocol, list[_HeldStream], list[asyncio.Future[str]]]
"""A connection's protocol, the streams it holds and the futures their answers settle."""


def _settle(future: asyncio.Future[str], error: str) -> None:
    if not future.done():
        future.set_result(error)


class _Client:
    """The client process's state: its open streams and what they counted."""

    def __init__(self) -> None:
        self.counters = _Counters()
        self.streams: list[tuple[asyncio.BaseTransport, _HeldStream]] = []
        self.cpu_mark = cpu_seconds()

    async def open(
        self, requests: list[bytes], host: str, port: int, tls: bool, sources: int,
        concurrency: int, deadline: float,
    ) -> dict[str, Any]:  # fmt: skip
        """One HTTP/1.1 connection per request."""
        loop = asyncio.get_running_loop()

        def one(request: bytes) -> Callable[[], _Opening]:
            def make() -> _Opening:
                future: asyncio.Future[str] = loop.create_future()
                stream = _HeldStream(request, future, self.counters)
                return stream, [stream], [future]

            return make

        context = _tls_context() if tls else None
        makes = [(1, one(request)) for request in requests]
        return await self._connect(makes, host, port, context, sources, concurrency, deadline)

    async def open_h2(
        self, paths: list[str], host: str, port: int, per_connection: int, sources: int,
        concurrency: int, deadline: float,
    ) -> dict[str, Any]:  # fmt: skip
        """One HTTP/2 stream per path (h2c, prior knowledge), ``per_connection`` streams on
        each connection."""
        loop = asyncio.get_running_loop()

        def shared(group: list[str]) -> Callable[[], _Opening]:
            def make() -> _Opening:
                futures: list[asyncio.Future[str]] = [loop.create_future() for _ in group]
                streams = [_HeldStream(b"", future, self.counters) for future in futures]
                return _H2HeldStreams(group, f"{host}:{port}", streams, futures), streams, futures

            return make

        groups = [paths[i : i + per_connection] for i in range(0, len(paths), per_connection)]
        makes = [(len(group), shared(group)) for group in groups]
        return await self._connect(makes, host, port, None, sources, concurrency, deadline)

    async def _connect(
        self, makes: list[tuple[int, Callable[[], _Opening]]], host: str, port: int,
        context: ssl.SSLContext | None, sources: int, concurrency: int, deadline: float,
    ) -> dict[str, Any]:  # fmt: skip
        """A connection per ``(streams, make)`` (at most ``concurrency`` opening at a time, from
        127.0.0.2 ... in turn), each with the streams it holds: how many were answered ``200
        text/event-stream`` within ``deadline``, and how long each connection took to get there."""
        loop = asyncio.get_running_loop()
        gate = asyncio.Semaphore(concurrency)
        histogram = LatencyHistogram()
        errors: list[str] = []
        opened = failed = 0
        unsettled = [count for count, _ in makes]
        """Per connection, its streams not answered yet."""

        async def connect(index: int, make: Callable[[], _Opening]) -> None:
            nonlocal opened, failed
            async with gate:
                started = time.perf_counter_ns()
                protocol, streams, futures = make()
                try:
                    transport, _ = await loop.create_connection(
                        lambda: protocol,
                        host,
                        port,
                        ssl=context,
                        server_hostname="localhost" if context else None,
                        local_addr=(f"127.0.0.{2 + index % sources}", 0),
                    )
                except OSError as exc:
                    failed += len(streams)
                    unsettled[index] = 0
                    errors.append(f"connect: {exc}")
                    return
                self.streams.extend((transport, stream) for stream in streams)
                results = await asyncio.gather(*futures)
            unsettled[index] = 0
            refused = [error for error in results if error]
            failed += len(refused)
            errors.extend(refused)
            opened += len(results) - len(refused)
            if not refused:
                histogram.record((time.perf_counter_ns() - started) // 1000)

        started = time.perf_counter()
        tasks = [asyncio.ensure_future(connect(i, make)) for i, (_, make) in enumerate(makes)]
        _, pending = await asyncio.wait(tasks, timeout=deadline)
        for task in pending:
            task.cancel()
        if pending:  # a server that cannot take them all: report what it took in time
            late = sum(unsettled)
            failed += late
            errors.insert(0, f"{late} stream(s) not answered within {deadline:.0f} s")
        return {
            "opened": opened,
            "failed": failed,
            "seconds": time.perf_counter() - started,
            "connect_ms": histogram.summary(),
            "errors": errors[:5],
        }

    async def report(self) -> dict[str, Any]:
        counters, self.counters = self.counters, _Counters()
        for _, protocol in self.streams:
            protocol._counters = self.counters  # later events count in the next report
        cpu, self.cpu_mark = cpu_seconds() - self.cpu_mark, cpu_seconds()
        return {
            "received": counters.received,
            "gaps": counters.gaps,
            "duplicates": counters.duplicates,
            "late": counters.late,
            "closed_early": counters.closed_early,
            "first_ns": counters.first_ns,
            "last_ns": counters.last_ns,
            "latency_ms": counters.histogram.summary(),
            "latency_ms_lower_bound": counters.lower.summary(),
            "latency_ms_sampled": counters.sampled.summary(),
            "cpu_seconds": round(cpu, 3),
        }

    async def close(self) -> dict[str, Any]:
        for transport, protocol in self.streams:
            protocol.closing = True
            _reset_on_close(transport)
            transport.close()
        closed = len(self.streams)
        self.streams.clear()
        await asyncio.sleep(0.05)
        return {"closed": closed}


def _reset_on_close(transport: asyncio.BaseTransport) -> None:
    """Close with RST: an HTTP/1.1 gateway may keep a FIN-closed stream as half-open until
    a write to it fails, which would leave one case's streams alive during the next."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["http/1.1"])
    return context


class HeldStreams(ClientProcess):
    """A client process holding SSE streams to one ``host:port``; a context manager."""

    def __init__(
        self,
        port: int,
        *,
        host: str = "127.0.0.1",
        tls: bool = False,
        max_streams: int = 10_000,
        concurrency: int = 64,
        sources: int = 4,
        timeout: float = 120.0,
    ) -> None:
        super().__init__(_Client, files=max_streams + 256, timeout=timeout)
        self.port, self.host, self.tls = port, host, tls
        self.max_streams, self.concurrency, self.sources = max_streams, concurrency, sources

    def __enter__(self) -> HeldStreams:
        super().__enter__()
        return self

    def open(self, requests: list[bytes], port: int | None = None) -> OpenResult:
        """Open one stream per request, to ``port`` (default: the one given at creation)."""
        return self._open(
            "open", requests=requests, port=self.port if port is None else port, tls=self.tls
        )

    def open_h2(self, paths: list[str], per_connection: int) -> OpenResult:
        """One HTTP/2 stream per path over cleartext (prior knowledge), ``per_connection``
        streams sharing each connection."""
        return self._open("open_h2", paths=paths, port=self.port, per_connection=per_connection)

    def _open(self, op: str, **arguments: Any) -> OpenResult:
        answer = self.ask(
            op,
            host=self.host,
            sources=self.sources,
            concurrency=self.concurrency,
            deadline=max(1.0, self.timeout - OPEN_ANSWER_MARGIN),
            **arguments,
        )
        return OpenResult(
            answer["opened"],
            answer["failed"],
            answer["seconds"],
            answer["connect_ms"],
            answer["errors"],
        )

    def report(self) -> Delivery:
        answer = self.ask("report")
        return Delivery(**answer)

    def close(self) -> int:
        closed: int = self.ask("close")["closed"]
        return closed


def sse_request(path: str, port: int, headers: dict[str, str] | None = None) -> bytes:
    """An HTTP/1.1 ``GET`` for an event stream, with extra headers."""
    lines = [f"GET {path} HTTP/1.1", f"host: 127.0.0.1:{port}", "accept: text/event-stream"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()
