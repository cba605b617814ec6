"""The SSE load generator: many SSE streams held from a few client processes.

Each client process runs uvloop with :class:`asyncio.Protocol` connections: HTTP/1.1 (one
stream per connection) or h2 through the ``h2`` library (``h2_streams`` streams per connection;
1 is one connection per client, as browsers on different machines would be), plain or TLS.
Client sockets are bound to 127.0.0.2, 127.0.0.3, ... in turn so that more connections than
one source address has ephemeral ports can reach one gateway port; ``RLIMIT_NOFILE`` is raised
to what the process needs.

:class:`LoadClients` starts ``processes`` spawned client processes, each holding its share of
the streams, and talks to them over a pipe: every process connects its streams and reports
``ready``; it then counts what arrives (:class:`~ssegate_lab.bench.latency.StampTally`) until it is
told to stop, or until ``max_seconds`` pass, whichever is first, and reports its counters, its
latency histogram and its own CPU time (``resource.getrusage``). Results of all processes are
merged into one :class:`LoadResult`.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import resource
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, cast

import h2.config
import h2.connection
import h2.events
import h2.settings

from ssegate_lab.bench.latency import LatencyHistogram, ReceiveCounters, StampTally

CONNECT_CONCURRENCY = 256
_MAX_WINDOW = 2**31 - 1
_DEFAULT_WINDOW = 65_535


def h2_client() -> h2.connection.H2Connection:
    """A client-side h2 connection that never makes the server wait on flow control (its
    windows at the largest); :func:`greet` starts it."""
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding=None)
    )
    conn.local_settings = h2.settings.Settings(
        client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: _MAX_WINDOW}
    )
    return conn


def greet(conn: h2.connection.H2Connection) -> None:
    """The connection preface and SETTINGS, and the connection's window opened wide."""
    conn.initiate_connection()
    conn.increment_flow_control_window(_MAX_WINDOW - _DEFAULT_WINDOW)


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """What one load run opens; every field is plain data so it crosses to spawned processes."""

    port: int
    clients: int
    protocol: str = "h1"
    """``h1`` or ``h2``."""
    tls: bool = False
    path: str = "/events"
    host: str = "127.0.0.1"
    h2_streams: int = 1
    """h2 streams per connection (1: a connection per client)."""
    sources: int = 4
    """Source addresses used in turn: 127.0.0.2 ... 127.0.0.(1 + sources)."""
    connect_timeout: float = 30.0
    max_seconds: float = 120.0
    """A client process stops by itself after this long, whatever it was told."""


@dataclass(slots=True)
class LoadResult:
    opened: int = 0
    failed: int = 0
    closed_early: int = 0
    """Streams the server ended or reset before the stop (for example as too slow)."""
    received: int = 0
    """Every event read, duplicates included."""
    gaps: int = 0
    duplicates: int = 0
    late: int = 0
    body_bytes: int = 0
    first_ns: int = 0
    last_ns: int = 0
    histogram: LatencyHistogram = field(default_factory=LatencyHistogram)
    cpu_seconds: list[float] = field(default_factory=list)
    """Per client process: user + system CPU between ``ready`` and the end of the stop."""
    errors: list[str] = field(default_factory=list)

    def merge(self, report: dict[str, Any]) -> None:
        self.opened += report["opened"]
        self.failed += report["failed"]
        self.closed_early += report.get("closed_early", 0)
        self.received += report.get("received", 0)
        self.gaps += report.get("gaps", 0)
        self.duplicates += report.get("duplicates", 0)
        self.late += report.get("late", 0)
        self.body_bytes += report.get("body_bytes", 0)
        if report.get("first_ns"):
            first = report["first_ns"]
            self.first_ns = first if not self.first_ns else min(self.first_ns, first)
        self.last_ns = max(self.last_ns, report.get("last_ns", 0))
        if "histogram" in report:
            self.histogram.merge(LatencyHistogram.from_sparse(report["histogram"]))
        if "cpu_seconds" in report:
            self.cpu_seconds.append(report["cpu_seconds"])
        self.errors.extend(report.get("errors", [])[: max(0, 5 - len(self.errors))])


def raise_open_files(wanted: int) -> int:
    """Raise the soft ``RLIMIT_NOFILE`` towards ``wanted`` (capped by the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- the protocols -------------------------------------------------------------------------------


class _ProcessRun:
    """The streams of one client process and what they received."""

    def __init__(self, spec: LoadSpec) -> None:
        self.spec = spec
        self.counters = ReceiveCounters()
        self.opened = 0
        self.failed = 0
        self.closed_early = 0
        self.stopping = False
        self.errors: list[str] = []
        self.transports: list[asyncio.BaseTransport] = []

    def refused(self, reason: str) -> None:
        self.failed += 1
        if len(self.errors) < 5:
            self.errors.append(reason)

    def ended(self) -> None:
        if not self.stopping:
            self.closed_early += 1


class _H1Stream(asyncio.Protocol):
    """One HTTP/1.1 connection holding one SSE stream."""

    def __init__(self, run: _ProcessRun, request: bytes, opened: asyncio.Future[bool]) -> None:
        self._run = run
        self._request = request
        self._opened = opened
        self._head = b""
        self._tally: StampTally | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.Transport, transport).write(self._request)

    def data_received(self, data: bytes) -> None:
        tally = self._tally
        if tally is not None:
            tally.feed(data)
            return
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        if end < 0:
            return
        status_line = self._head.split(b"\r\n", 1)[0]
        if status_line[9:12] != b"200":
            self._settle(False, status_line.decode("latin-1"))
            return
        self._tally = StampTally(self._run.counters)
        self._settle(True, "")
        rest = self._head[end + 4 :]
        self._head = b""
        if rest:
            self._tally.feed(rest)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._tally is not None:
            self._run.ended()
        self._settle(False, f"connection lost: {exc}")

    def _settle(self, ok: bool, reason: str) -> None:
        if not self._opened.done():
            if not ok:
                self._run.refused(reason)
            self._opened.set_result(ok)


class _H2Streams(asyncio.Protocol):
    """One h2 connection holding ``count`` SSE streams."""

    def __init__(
        self, run: _ProcessRun, count: int, headers: list[tuple[bytes, bytes]], loop: Any
    ) -> None:
        self._run = run
        self._count = count
        self._headers = headers
        self._conn = h2_client()
        self._tallies: dict[int, StampTally | None] = {}
        self._opened: list[asyncio.Future[bool]] = [loop.create_future() for _ in range(count)]
        self._waiting: dict[int, asyncio.Future[bool]] = {}
        self._transport: asyncio.Transport | None = None

    @property
    def opened(self) -> list[asyncio.Future[bool]]:
        return self._opened

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        conn = self._conn
        greet(conn)
        for future in self._opened:
            stream_id = conn.get_next_available_stream_id()
            conn.send_headers(stream_id, self._headers, end_stream=True)
            self._tallies[stream_id] = None
            self._waiting[stream_id] = future
        self._transport.write(conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        conn = self._conn
        try:
            events = conn.receive_data(data)
        except Exception as exc:  # a protocol error ends this connection's streams
            self._fail_all(f"h2 error: {exc!r}")
            if self._transport is not None:
                self._transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.DataReceived):
                tally = self._tallies.get(event.stream_id)
                if tally is not None:
                    tally.feed(event.data)
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.ResponseReceived):
                status = dict(event.headers).get(b":status", b"")
                ok = status == b"200"
                if ok:
                    self._tallies[event.stream_id] = StampTally(self._run.counters)
                self._settle(event.stream_id, ok, f"status {status.decode('latin-1')}")
            elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                if self._tallies.pop(event.stream_id, None) is not None:
                    self._run.ended()
                self._settle(event.stream_id, False, type(event).__name__)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self._fail_all(f"GOAWAY {event.error_code}")
        out = conn.data_to_send()
        if out and self._transport is not None:
            self._transport.write(out)

    def connection_lost(self, exc: Exception | None) -> None:
        for tally in self._tallies.values():
            if tally is not None:
                self._run.ended()
        self._tallies.clear()
        self._fail_all(f"connection lost: {exc}")

    def _settle(self, stream_id: int, ok: bool, reason: str) -> None:
        future = self._waiting.pop(stream_id, None)
        if future is not None and not future.done():
            if not ok:
                self._run.refused(reason)
            future.set_result(ok)

    def _fail_all(self, reason: str) -> None:
        for stream_id in list(self._waiting):
            self._settle(stream_id, False, reason)


# -- one client process --------------------------------------------------------------------------


def _client_context(protocol: str) -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"] if protocol == "h2" else ["http/1.1"])
    return context


async def _open_all(run: _ProcessRun) -> None:
    spec = run.spec
    loop = asyncio.get_running_loop()
    context = _client_context(spec.protocol) if spec.tls else None
    authority = f"{spec.host}:{spec.port}"
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
    per_connection = max(1, spec.h2_streams) if spec.protocol == "h2" else 1
    connections = -(-spec.clients // per_connection)
    request = (
        f"GET {spec.path} HTTP/1.1\r\nhost: {authority}\r\naccept: text/event-stream\r\n"
        "cache-control: no-cache\r\n\r\n"
    ).encode()
    headers = [
        (b":method", b"GET"),
        (b":scheme", b"https" if spec.tls else b"http"),
        (b":authority", authority.encode()),
        (b":path", spec.path.encode()),
        (b"accept", b"text/event-stream"),
    ]

    async def connect(index: int) -> None:
        count = min(per_connection, spec.clients - index * per_connection)
        source = (f"127.0.0.{2 + index % max(1, spec.sources)}", 0)
        async with gate:
            futures: list[asyncio.Future[bool]]
            try:
                if spec.protocol == "h2":
                    h2_protocol = _H2Streams(run, count, headers, loop)
                    futures = h2_protocol.opened
                    transport, _ = await loop.create_connection(
                        lambda: h2_protocol,
                        spec.host,
                        spec.port,
                        ssl=context,
                        server_hostname="localhost" if context else None,
                        local_addr=source,
                    )
                else:
                    future: asyncio.Future[bool] = loop.create_future()
                    futures = [future]
                    transport, _ = await loop.create_connection(
                        lambda: _H1Stream(run, request, future),
                        spec.host,
                        spec.port,
                        ssl=context,
                        server_hostname="localhost" if context else None,
                        local_addr=source,
                    )
            except OSError as exc:
                for _ in range(count):
                    run.refused(f"connect: {exc}")
                return
            run.transports.append(transport)
            done = await asyncio.gather(*futures)
            run.opened += sum(1 for ok in done if ok)

    await asyncio.wait_for(
        asyncio.gather(*(connect(i) for i in range(connections))), spec.connect_timeout
    )


async def _serve_parent(spec: LoadSpec, pipe: multiprocessing.connection.Connection) -> None:
    run = _ProcessRun(spec)
    try:
        await _open_all(run)
    except TimeoutError:
        run.refused(f"not every stream opened within {spec.connect_timeout} s")
    cpu_at_ready = _cpu_seconds()
    pipe.send({"ready": True, "opened": run.opened, "failed": run.failed, "errors": run.errors})
    loop = asyncio.get_running_loop()
    told: asyncio.Future[None] = loop.create_future()

    def on_message() -> None:
        if not told.done():
            told.set_result(None)

    loop.add_reader(pipe.fileno(), on_message)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(told, spec.max_seconds)
    loop.remove_reader(pipe.fileno())
    if pipe.poll():
        pipe.recv()
    run.stopping = True
    for transport in run.transports:
        transport.close()
    await asyncio.sleep(0)
    counters = run.counters
    pipe.send(
        {
            "opened": run.opened,
            "failed": run.failed,
            "closed_early": run.closed_early,
            "received": counters.received,
            "gaps": counters.gaps,
            "duplicates": counters.duplicates,
            "late": counters.late,
            "body_bytes": counters.body_bytes,
            "first_ns": counters.first_ns,
            "last_ns": counters.last_ns,
            "histogram": counters.histogram.to_sparse(),
            "cpu_seconds": round(_cpu_seconds() - cpu_at_ready, 3),
            "errors": run.errors,
        }
    )


def _client_process(spec: LoadSpec, pipe: multiprocessing.connection.Connection) -> None:
    import uvloop

    raise_open_files(spec.clients + 256)
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        asyncio.run(_serve_parent(spec, pipe))
    finally:
        pipe.close()


# -- the parent's side ---------------------------------------------------------------------------


class LoadClients:
    """``processes`` client processes sharing ``spec.clients`` streams; a context manager."""

    def __init__(self, spec: LoadSpec, processes: int = 1) -> None:
        self.spec = spec
        count = max(1, min(processes, spec.clients))
        base, extra = divmod(spec.clients, count)
        self.shares = [base + (1 if i < extra else 0) for i in range(count)]
        self._pipes: list[multiprocessing.connection.Connection] = []
        self._processes: list[multiprocessing.process.BaseProcess] = []
        self.ready = LoadResult()

    def __enter__(self) -> LoadClients:
        context = multiprocessing.get_context("spawn")
        for share in self.shares:
            parent_end, child_end = context.Pipe()
            spec = _with_clients(self.spec, share)
            process = context.Process(target=_client_process, args=(spec, child_end), daemon=True)
            process.start()
            child_end.close()
            self._pipes.append(parent_end)
            self._processes.append(process)
        return self

    def wait_ready(self) -> LoadResult:
        """Block until every process has opened its streams (or given up); what opened."""
        deadline = time.monotonic() + self.spec.connect_timeout + 20
        for pipe in self._pipes:
            if not pipe.poll(max(0.1, deadline - time.monotonic())):
                raise RuntimeError("a load client process did not report ready in time")
            self.ready.merge(pipe.recv())
        return self.ready

    def stop(self) -> LoadResult:
        """Tell every process to close its streams; their merged counters."""
        for pipe in self._pipes:
            with contextlib.suppress(OSError):
                pipe.send("stop")
        result = LoadResult()
        for pipe in self._pipes:
            if pipe.poll(30):
                result.merge(pipe.recv())
            else:
                result.errors.append("a load client process did not report")
        return result

    def __exit__(self, *exc: object) -> None:
        stop_processes(self._pipes, self._processes, "stop", join_seconds=10)


def stop_processes(
    pipes: list[multiprocessing.connection.Connection],
    processes: list[multiprocessing.process.BaseProcess],
    message: str,
    *,
    join_seconds: float,
) -> None:
    """Ask client processes to end with ``message``, kill those still alive after
    ``join_seconds``, and close the pipes."""
    for pipe in pipes:
        with contextlib.suppress(OSError):
            pipe.send(message)
    for process in processes:
        process.join(join_seconds)
        if process.is_alive():
            process.kill()
            process.join()
    for pipe in pipes:
        pipe.close()


def _with_clients(spec: LoadSpec, clients: int) -> LoadSpec:
    values = {name: getattr(spec, name) for name in LoadSpec.__dataclass_fields__}
    values["clients"] = clients
    return LoadSpec(**values)
