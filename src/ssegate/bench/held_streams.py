"""Held SSE streams for the jwt and kafka benchmarks, each with its own request and timings.

:mod:`ssegate.bench.load` sends one request to every stream and reads integer ``id`` fields;
the guarded and the Kafka scenarios need something else: a different request per stream (a
distinct token each), the time each stream took to be authorized (connect start to the ``200``
status line), and events whose ``id`` is a Kafka position rather than a number. Each event's
data is the JSON object the Kafka benchmark produces, ``{"t":<monotonic_ns>,"n":<sequence>}``,
which both ssegate and KafkaSSE pass through as text. A read of up to
``EXACT_PER_READ`` events is scanned event by event; a larger one (a fan-out batch at a high
rate) only at its two ends, which keeps the client's cost per read instead of per event. Two
histograms come out of that: ``latency_ms`` charges every event of such a read the latency of
its oldest (an upper bound), ``latency_ms_lower_bound`` the latency of its newest (a lower
bound); events of reads scanned one by one count exactly in both. The true percentiles lie
between the two. ``latency_ms_sampled`` estimates them: every event of one large read in
``SAMPLE_EVERY`` is scanned exactly and counted ``SAMPLE_EVERY`` times, every event of a small
read once. A read is picked by its place in the stream, not by what it holds, so each event
has the same chance of being measured and the estimate is unbiased.

:class:`HeldStreams` is a spawned client process (:mod:`~ssegate.bench.client_process`;
uvloop, HTTP/1.1, ``asyncio.Protocol``) driven over a pipe: :meth:`HeldStreams.open` connects a
list of requests with bounded concurrency and returns how many were answered
``200 text/event-stream`` and how fast; :meth:`HeldStreams.report` returns what arrived since
the last report; :meth:`HeldStreams.close` closes every stream (with a reset, so the server lets
go at once). Client sockets are bound to 127.0.0.2 ... in turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import resource
import socket
import ssl
import struct
import time
from dataclasses import dataclass
from typing import Any, cast

from ssegate.bench.client_process import ClientProcess
from ssegate.bench.latency import LatencyHistogram

STAMPED_JSON = re.compile(rb'"t":\s*(\d+),\s*"n":\s*(\d+)')
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
    gaps: int
    duplicates: int
    """Events whose sequence number was not above the stream's previous one."""
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
        "lower", "received", "sampled",
    )  # fmt: skip

    def __init__(self) -> None:
        self.histogram = LatencyHistogram()
        self.lower = LatencyHistogram()
        """Like ``histogram``, but a large read's events are charged its newest one."""
        self.sampled = LatencyHistogram()
        """Exact latencies: small reads' events, and a weighted sample of large reads'."""
        self.received = self.gaps = self.closed_early = self.first_ns = self.last_ns = 0
        self.large_reads = self.duplicates = 0


class _HeldStream(asyncio.Protocol):
    """One HTTP/1.1 connection: the request, the status line, then stamped events."""

    def __init__(self, request: bytes, opened: asyncio.Future[str], counters: _Counters) -> None:
        self._request = request
        self._opened = opened
        self._counters = counters
        self._head = b""
        self._tail = b""
        self._streaming = False
        self._last_n = -1
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.Transport, transport).write(self._request)

    def data_received(self, data: bytes) -> None:
        if self._streaming:
            self._scan(data)
            return
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self._head[:end].lower()
        if head[9:12] != b"200" or b"text/event-stream" not in head:
            self._settle(head.split(b"\r\n", 1)[0].decode("latin-1"))
            return
        self._streaming = True
        self._settle("")
        rest, self._head = self._head[end + 4 :], b""
        if rest:
            self._scan(rest)

    def _scan(self, data: bytes) -> None:
        buffer = self._tail + data if self._tail else data
        end = buffer.rfind(b"\n\n")
        if end < 0:
            self._tail = buffer
            return
        self._tail = buffer[end + 2 :]
        end += 2
        count = buffer.count(b'"n":', 0, end)
        if count > EXACT_PER_READ:
            self._scan_read(buffer, end, count)
        elif count:
            self._scan_events(buffer, end)

    def _scan_events(self, buffer: bytes, end: int, weight: int = 1) -> None:
        """Every event's own latency and sequence number; ``weight``: how many events each
        stands for in the sampled estimate."""
        now = time.monotonic_ns()
        counters = self._counters
        record, record_lower = counters.histogram.record, counters.lower.record
        record_sampled = counters.sampled.record
        last = self._last_n
        found = 0
        for match in STAMPED_JSON.finditer(buffer, 0, end):
            sequence = int(match[2])
            if last >= 0 and sequence > last + 1:
                counters.gaps += sequence - last - 1
            if sequence <= last:
                counters.duplicates += 1  # received, counted, but not a step forward
            else:
                last = sequence
            micros = (now - int(match[1])) // 1000
            record(micros)
            record_lower(micros)
            record_sampled(micros, weight)
            found += 1
        self._last_n = last
        self._received(found, now)

    def _scan_read(self, buffer: bytes, end: int, count: int) -> None:
        """A large read: its first and last events only. Every event of the read is charged
        the latency of the oldest (the upper bound) and of the newest (the lower bound), and a
        gap is a sequence jump before the first or a span wider than the events counted. One
        such read in :data:`SAMPLE_EVERY` is scanned event by event instead."""
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
        low, high = int(first[2]), int(last[2])
        if self._last_n >= 0 and low > self._last_n + 1:
            counters.gaps += low - self._last_n - 1
        span = high - low + 1
        counters.gaps += max(0, span - count)
        # more events than the span holds, or a span that starts at or below what the stream
        # already had: events came twice
        counters.duplicates += max(0, count - span) + max(0, min(self._last_n, high) - low + 1)
        self._last_n = max(high, self._last_n)
        counters.histogram.record((now - int(first[1])) // 1000, count)
        counters.lower.record((now - int(last[1])) // 1000, count)
        self._received(count, now)

    def _received(self, found: int, now: int) -> None:
        if found:
            counters = self._counters
            counters.received += found
            counters.first_ns = counters.first_ns or now
            counters.last_ns = now

    def connection_lost(self, exc: Exception | None) -> None:
        if self._streaming and not self.closing:
            self._counters.closed_early += 1
        self._settle(f"connection lost: {exc}")

    def _settle(self, error: str) -> None:
        if not self._opened.done():
            self._opened.set_result(error)


class _Client:
    """The client process's state: its open streams and what they counted."""

    def __init__(self) -> None:
        self.counters = _Counters()
        self.streams: list[tuple[asyncio.BaseTransport, _HeldStream]] = []
        self.cpu_mark = _cpu_seconds()

    async def open(self, command: dict[str, Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        host, port, sources = command["host"], command["port"], command["sources"]
        context = _tls_context() if command["tls"] else None
        gate = asyncio.Semaphore(command["concurrency"])
        histogram = LatencyHistogram()
        errors: list[str] = []
        opened = failed = 0

        async def connect(index: int, request: bytes) -> None:
            nonlocal opened, failed
            async with gate:
                started = time.perf_counter_ns()
                future: asyncio.Future[str] = loop.create_future()
                protocol = _HeldStream(request, future, self.counters)
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
                    failed += 1
                    errors.append(f"connect: {exc}")
                    return
                self.streams.append((transport, protocol))
                error = await future
            if error:
                failed += 1
                errors.append(error)
            else:
                opened += 1
                histogram.record((time.perf_counter_ns() - started) // 1000)

        started = time.perf_counter()
        deadline = command["deadline"]
        tasks = [asyncio.ensure_future(connect(i, r)) for i, r in enumerate(command["requests"])]
        _, pending = await asyncio.wait(tasks, timeout=deadline)
        for task in pending:
            task.cancel()
        if pending:  # a server that cannot take them all: report what it took in time
            failed += len(pending)
            errors.insert(0, f"{len(pending)} stream(s) not answered within {deadline:.0f} s")
        seconds = time.perf_counter() - started
        return {
            "opened": opened,
            "failed": failed,
            "seconds": seconds,
            "connect_ms": histogram.summary(),
            "errors": errors[:5],
        }

    async def handle(self, command: dict[str, Any]) -> dict[str, Any]:
        op = command["op"]
        if op == "open":
            return await self.open(command)
        if op == "report":
            return self.report()
        return await self.close()

    def report(self) -> dict[str, Any]:
        counters, self.counters = self.counters, _Counters()
        for _, protocol in self.streams:
            protocol._counters = self.counters  # later events count in the next report
        cpu, self.cpu_mark = _cpu_seconds() - self.cpu_mark, _cpu_seconds()
        return {
            "received": counters.received,
            "gaps": counters.gaps,
            "duplicates": counters.duplicates,
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


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
        super().__init__(_Client, max_streams=max_streams, timeout=timeout)
        self.port, self.host, self.tls = port, host, tls
        self.concurrency, self.sources = concurrency, sources

    def _ask(self, command: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = self.ask(command)
        return answer

    def open(self, requests: list[bytes], port: int | None = None) -> OpenResult:
        """Open one stream per request, to ``port`` (default: the one given at creation)."""
        answer = self._ask(
            {
                "op": "open",
                "requests": requests,
                "host": self.host,
                "port": self.port if port is None else port,
                "tls": self.tls,
                "sources": self.sources,
                "concurrency": self.concurrency,
                "deadline": max(1.0, self.timeout - OPEN_ANSWER_MARGIN),
            }
        )
        return OpenResult(
            answer["opened"],
            answer["failed"],
            answer["seconds"],
            answer["connect_ms"],
            answer["errors"],
        )

    def report(self) -> Delivery:
        answer = self._ask({"op": "report"})
        return Delivery(**answer)

    def close(self) -> int:
        closed: int = self._ask({"op": "close"})["closed"]
        return closed


def sse_request(path: str, port: int, headers: dict[str, str] | None = None) -> bytes:
    """An HTTP/1.1 ``GET`` for an event stream, with extra headers."""
    lines = [f"GET {path} HTTP/1.1", f"host: 127.0.0.1:{port}", "accept: text/event-stream"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()
