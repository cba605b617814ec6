"""The load of ``ssegate bench stalled``: live readers and stalled clients in one process.

:class:`StallLoad` spawns one client process (uvloop, ``asyncio.Protocol``) and drives it over
a pipe, so the gateway under measurement shares neither its event loop nor its memory:

- **live readers** (:meth:`StallLoad.open_live`) read an sse-kafka stream as fast as it comes.
  Every event is counted by its ``id``: with one partition the id's progress token names the
  event's offset (the next offset minus one), so each reader knows exactly which offsets it got
  and how often, and the run can say how many it lost and how many came twice. Each event's
  latency is its receipt time against the producer's stamp (``"t":<monotonic_ns>``), into the
  histogram of the current phase and into the histogram of its :data:`SLOT_SECONDS` slot of
  the phase (the timeline shows when in a phase the tail comes); :meth:`StallLoad.report`
  closes a phase and starts the next.
- **stalled clients** (:meth:`StallLoad.stall`) connect with a small ``SO_RCVBUF``, send their
  request and never read. Each is registered in an ``epoll`` set, which the loop watches, for
  ``EPOLLIN`` until its first bytes come, then for ``EPOLLRDHUP`` alone (an error and a hang-up
  are always reported). Its first bytes are peeked at (``MSG_PEEK``, nothing is taken from the
  receive buffer): the seconds from its connect to its response head, and the head's status,
  say when the gateway accepted it. Nothing is read while the connection lasts, and the moment
  the gateway ends it the client is told. It then reads what is left to see how it ended:
  ``ECONNRESET`` (a reset) or end of file (a FIN), and records the seconds from its own connect
  to that moment. :meth:`StallLoad.status` returns them.
"""

from __future__ import annotations

import asyncio
import errno
import re
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ssegate.bindings.sse_kafka.event_id import EventIdError, decode_progress
from ssegate_lab.bench.client_process import ClientProcess, EventStreamReader, cpu_seconds
from ssegate_lab.bench.latency import LatencyHistogram

STAMPED_EVENT = re.compile(rb'id:([A-Za-z0-9_=-]+)\ndata:\{"t":(\d+),')
"""An sse-kafka event of the bench: its progress id and the producer's stamp."""
SLOT_SECONDS = 0.5
"""The span of one point of a phase's latency timeline, by receipt time."""
READ_LIMIT = 16 << 20
"""What an ended stalled client reads at most to see how its connection ended."""
ENDED = select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR
"""What ``epoll`` says of a stalled client's connection that ended."""


class _Phase:
    """What the live readers received since the last report."""

    __slots__ = ("bytes", "histogram", "received", "slots", "started_ns")

    def __init__(self) -> None:
        self.histogram = LatencyHistogram()
        self.received = 0
        self.bytes = 0
        self.started_ns = time.monotonic_ns()
        self.slots: dict[int, LatencyHistogram] = {}

    def slot(self, now_ns: int) -> LatencyHistogram:
        """The histogram of the timeline point ``now_ns`` falls in."""
        index = int((now_ns - self.started_ns) / 1e9 / SLOT_SECONDS)
        histogram = self.slots.get(index)
        if histogram is None:
            histogram = self.slots[index] = LatencyHistogram()
        return histogram

    def timeline(self) -> list[dict[str, float | int | None]]:
        """Per slot that received events, from the phase's start: its start (s), events, p99
        and max (ms). A read of blocks without a stamped event (a keep-alive) counts nowhere."""
        return [
            {"t": round(index * SLOT_SECONDS, 1), "events": histogram.total,
             "p99_ms": histogram.percentile_ms(0.99), "max_ms": histogram.max_ms()}
            for index, histogram in sorted(self.slots.items())
            if histogram.total
        ]  # fmt: skip


class _Offsets:
    """Offset → id, decoded once per event for all readers (they all get the same ids)."""

    def __init__(self) -> None:
        self._by_id: dict[bytes, int] = {}

    def of(self, event_id: bytes) -> int:
        offset = self._by_id.get(event_id)
        if offset is None:
            try:
                offset = decode_progress(event_id.decode("ascii"))[0] - 1
            except (EventIdError, KeyError):
                offset = -1
            self._by_id[event_id] = offset
            if len(self._by_id) > 100_000:
                self._by_id.clear()
        return offset


class _LiveReader(EventStreamReader):
    """One HTTP/1.1 event stream read as it comes, every event counted by its offset."""

    def __init__(self, load: _Load, request: bytes, opened: asyncio.Future[str]) -> None:
        super().__init__(request, opened)
        self._load = load
        self.seen = bytearray()
        """How many times each offset arrived (capped at 255)."""
        self.unknown_ids = 0
        self.closed_early = False

    def scan(self, data: bytes) -> None:
        phase = self._load.phase
        phase.bytes += len(data)
        buffer, end = self.complete_blocks(data)
        if not end:
            return
        now = time.monotonic_ns()
        offset_of = self._load.offsets.of
        record = phase.histogram.record
        record_in_slot = phase.slot(now).record
        seen = self.seen
        found = 0
        for match in STAMPED_EVENT.finditer(buffer, 0, end):
            offset = offset_of(match[1])
            if offset < 0:
                self.unknown_ids += 1
                continue
            if offset >= len(seen):
                seen.extend(bytes(offset + 4096 - len(seen)))
            seen[offset] = min(255, seen[offset] + 1)
            micros = (now - int(match[2])) // 1000
            record(micros)
            record_in_slot(micros)
            found += 1
        phase.received += found

    def ended_early(self) -> None:
        self.closed_early = True

    def tally(self, first: int, end: int) -> dict[str, int]:
        """Offsets ``first .. end-1``: how many never came, and how many extra copies came
        (of those, and any copy at all of an offset past them)."""
        seen = self.seen
        counts = seen[first:end] + bytes(max(0, end - max(first, len(seen))))
        return {
            "lost": counts.count(0),
            "duplicates": sum(c - 1 for c in counts if c > 1) + sum(seen[end:]),
            "unknown_ids": self.unknown_ids,
            "closed_early": int(self.closed_early),
        }


@dataclass(slots=True)
class _Stalled:
    """One client that never reads; ``ended`` is seconds from its connect to its end."""

    sock: socket.socket
    connected: float
    ended: float | None = None
    how: str = ""
    read_after_end: int = 0
    head: float | None = None
    """Seconds from its connect to the first bytes of its response (None: none came)."""
    status: str = ""
    """The status code of its response head (``200``), once it came."""


@dataclass(slots=True)
class _Load:
    """The client process's state."""

    phase: _Phase = field(default_factory=_Phase)
    offsets: _Offsets = field(default_factory=_Offsets)
    readers: list[tuple[asyncio.BaseTransport, _LiveReader]] = field(default_factory=list)
    stalled: list[_Stalled] = field(default_factory=list)
    watched: dict[int, _Stalled] = field(default_factory=dict)
    """The stalled clients not ended yet, by file descriptor."""
    cpu_mark: float = field(default_factory=cpu_seconds)
    watcher: select.epoll | None = None

    async def open_live(self, host: str, port: int, request: bytes, count: int) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        errors: list[str] = []
        for _ in range(count):
            opened: asyncio.Future[str] = loop.create_future()
            reader = _LiveReader(self, request, opened)
            try:
                transport, _ = await loop.create_connection(_factory(reader), host, port)
            except OSError as exc:
                errors.append(f"connect: {exc}")
                continue
            self.readers.append((transport, reader))
            error = await asyncio.wait_for(opened, 30)
            if error:
                errors.append(error)
        return {"opened": count - len(errors), "errors": errors[:5]}

    async def report(self) -> dict[str, Any]:
        phase, self.phase = self.phase, _Phase()
        cpu = cpu_seconds()
        cpu_used, self.cpu_mark = cpu - self.cpu_mark, cpu
        return {
            "received": phase.received,
            "bytes": phase.bytes,
            "latency_ms": phase.histogram.summary(),
            "histogram_us": phase.histogram.to_sparse(),
            "timeline": phase.timeline(),
            "cpu_seconds": round(cpu_used, 3),
        }

    async def stall(
        self, host: str, port: int, request: bytes, count: int, rcvbuf: int, concurrency: int
    ) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        if self.watcher is None:
            self.watcher = select.epoll()
            loop.add_reader(self.watcher.fileno(), self._ended)
        gate = asyncio.Semaphore(concurrency)
        errors: list[str] = []
        effective_rcvbuf = 0

        async def connect() -> None:
            nonlocal effective_rcvbuf
            async with gate:
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
                effective_rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
                sock.setblocking(False)
                try:
                    await loop.sock_connect(sock, (host, port))
                    await loop.sock_sendall(sock, request)
                except OSError as exc:
                    errors.append(f"connect: {exc}")
                    sock.close()
                    return
                assert self.watcher is not None
                client = _Stalled(sock, time.monotonic())
                self.stalled.append(client)
                self.watched[sock.fileno()] = client
                self.watcher.register(sock.fileno(), select.EPOLLIN | select.EPOLLRDHUP)

        started = time.monotonic()
        await asyncio.gather(*(connect() for _ in range(count)))
        return {
            "connected": count - len(errors),
            "failed": len(errors),
            "connect_s": round(time.monotonic() - started, 3),
            "rcvbuf_bytes": effective_rcvbuf,
            "errors": errors[:5],
        }

    def _ended(self) -> None:
        """The epoll set is readable: some stalled clients' heads came (peek at them), some
        connections ended (see how, then close)."""
        assert self.watcher is not None
        now = time.monotonic()
        for fd, mask in self.watcher.poll(0, 1024):
            if mask & ENDED == 0:
                waiting = self.watched.get(fd)
                if waiting is None or _peek_head(waiting, now):
                    self.watcher.modify(fd, select.EPOLLRDHUP)
                continue
            self.watcher.unregister(fd)
            client = self.watched.pop(fd, None)
            if client is None:
                continue
            if client.head is None:
                _peek_head(client, now)
            client.ended = now - client.connected
            client.how, client.read_after_end = _how_it_ended(client.sock)
            client.sock.close()

    async def status(self) -> dict[str, Any]:
        clients = self.stalled
        first = min((c.connected for c in clients), default=0.0)
        return {
            "connected": len(clients),
            "ended_s": [c.ended for c in clients],
            "how": [c.how for c in clients],
            "read_after_end": [c.read_after_end for c in clients],
            "head_s": [c.head for c in clients],
            "head_status": [c.status for c in clients],
            "head_at_s": [
                None if c.head is None else c.connected + c.head - first for c in clients
            ],
        }

    async def tally(self, first: int, end: int) -> dict[str, Any]:
        tallies = [reader.tally(first, end) for _, reader in self.readers]
        return {name: sum(t[name] for t in tallies) for name in tallies[0]} if tallies else {}

    async def close(self) -> dict[str, Any]:
        for transport, reader in self.readers:
            reader.closing = True
            transport.close()
        for client in self.watched.values():
            client.sock.close()
        self.readers.clear()
        self.watched.clear()
        await asyncio.sleep(0.05)
        return {}


def _factory(reader: _LiveReader) -> Callable[[], _LiveReader]:
    return lambda: reader


def _peek_head(client: _Stalled, now: float) -> bool:
    """Look at the first bytes come to ``client`` without taking them: once its status line
    is there, record when and which status; ``False`` while it is not whole yet."""
    try:
        data = client.sock.recv(len(b"HTTP/1.1 200"), socket.MSG_PEEK)
    except OSError:
        return True
    if len(data) < len(b"HTTP/1.1 200"):
        return not data
    client.head = now - client.connected
    client.status = data[9:12].decode("ascii", "replace")
    return True


def _how_it_ended(sock: socket.socket) -> tuple[str, int]:
    """Read what is left: ``("reset", bytes)`` on ``ECONNRESET``, ``("eof", bytes)`` on end of
    file, ``("open", bytes)`` when the connection turns out to go on."""
    total = 0
    while total < READ_LIMIT:
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return "open", total
        except OSError as exc:
            return ("reset" if exc.errno == errno.ECONNRESET else f"error {exc.errno}"), total
        if not data:
            return "eof", total
        total += len(data)
    return "open", total


class StallLoad(ClientProcess):
    """The load process: live readers and stalled clients of one gateway port."""

    def __init__(self, port: int, request: bytes, *, files: int, timeout: float = 120.0) -> None:
        super().__init__(_Load, files=files, timeout=timeout)
        self.port = port
        self.request = request

    def __enter__(self) -> StallLoad:
        super().__enter__()
        return self

    def open_live(self, count: int) -> dict[str, Any]:
        """Open ``count`` live readers, one after the other; how many answered 200."""
        return self.ask("open_live", host="127.0.0.1", port=self.port, request=self.request,
                        count=count)  # fmt: skip

    def report(self) -> dict[str, Any]:
        """What the live readers received in the phase now closed, and the process's CPU."""
        return self.ask("report")

    def stall(self, count: int, rcvbuf: int, concurrency: int = 64) -> dict[str, Any]:
        """Connect ``count`` clients that never read."""
        return self.ask("stall", host="127.0.0.1", port=self.port, request=self.request,
                        count=count, rcvbuf=rcvbuf, concurrency=concurrency)  # fmt: skip

    def status(self) -> dict[str, Any]:
        """Per stalled client: seconds from its connect to its end (None: still open), how;
        from its connect to its response head, and from the first one's connect to it."""
        return self.ask("status")

    def tally(self, first: int, end: int) -> dict[str, Any]:
        """The live readers' losses and duplicates over offsets ``first .. end-1``."""
        return self.ask("tally", first=first, end=end)
