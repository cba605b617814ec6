"""The last leg of ``ssegate bench pipeline``'s latency cases: sink topic → gateway → SSE client.

:func:`gateway_stream` writes the ``sse.kafka`` chain serving the pipeline's sink topic
(:func:`~ssegate_lab.bench.kafka_rig.write_kafka_gateway_config`), starts it as a real
``ssegate start`` process of one worker (:class:`~ssegate_lab.bench.gateway.GatewayProcess`) and
opens one HTTP/1.1 stream of the topic (:class:`SseReader`, a thread of the bench process); both
end when the ``with`` does. The sink topic is new and still empty when the stream opens, so the
stream, read from the topic's start, gets every record the pipeline writes to it.

Each event is taken as it is read (:func:`arrival`): the time of the read that completed it, in
microseconds since the epoch (the clock of the producer's ``sent``), its offset (with one
partition, the event id's progress token names the next offset) and the ``sent`` of its data's
JSON. :func:`delivery` tallies the events against the offsets a consumer of the sink topic read:
how many came twice, how many reached the sink and never came, and each first copy's latency.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httptools

from ssegate.bindings.sse_kafka.event_id import EventIdError, progress_of_last_event_id
from ssegate.sse_codec.parser import SseEvent, SseParser
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.bench.held_streams import sse_request
from ssegate_lab.bench.kafka_rig import write_kafka_gateway_config

OPEN_TIMEOUT = 10.0
"""Seconds the stream has to be answered."""
READ_TIMEOUT = 0.2
"""Seconds a read waits before the reader looks whether it should stop."""
DRAIN_SECONDS = 5.0
"""Seconds, after the sink's consumer is done, for the stream to bring what it has not yet."""


@dataclass(frozen=True, slots=True)
class Arrival:
    """One event as the SSE client read it."""

    offset: int | None
    """Its offset in the sink topic; ``None`` when its id names none."""
    sent_us: int | None
    """The producer's ``sent`` in its data; ``None`` when the data has none."""
    arrived_us: int


def arrival(event_id: str, data: str, arrived_us: int) -> Arrival:
    """The event of ``event_id`` (an sse-kafka id of a one-partition topic) and ``data`` (JSON
    with ``sent``), read at ``arrived_us``."""
    try:
        offset: int | None = progress_of_last_event_id(event_id)[0] - 1
    except (EventIdError, KeyError):
        offset = None
    try:
        parsed = json.loads(data)
    except ValueError:
        parsed = None
    sent = parsed.get("sent") if isinstance(parsed, dict) else None
    return Arrival(offset, sent if isinstance(sent, int) else None, arrived_us)


@dataclass(frozen=True, slots=True)
class Delivery:
    """What the SSE client got of what reached the sink topic."""

    received: int
    """Every event read, copies included."""
    duplicates: int
    """Events whose offset had already come."""
    missing: int
    """Offsets the sink's consumer read that never came."""
    not_in_sink: int
    """Offsets that came but that the sink's consumer never read."""
    unreadable: int
    """Events without an offset in their id or without ``sent`` in their data."""
    latencies_ms: list[float]
    """Produce → SSE client of the first copy of each event with ``sent``."""


def delivery(sink_offsets: Iterable[int], arrivals: Iterable[Arrival]) -> Delivery:
    """The events of ``arrivals`` against the offsets read from the sink topic."""
    seen: set[int] = set()
    received = duplicates = unreadable = 0
    latencies: list[float] = []
    for event in arrivals:
        received += 1
        if event.offset is not None and event.offset in seen:
            duplicates += 1
            continue
        if event.offset is None or event.sent_us is None:
            unreadable += 1
        if event.offset is not None:
            seen.add(event.offset)
        if event.sent_us is not None:
            latencies.append((event.arrived_us - event.sent_us) / 1000)
    sink = set(sink_offsets)
    return Delivery(received, duplicates, len(sink - seen), len(seen - sink), unreadable, latencies)


class SseReader:
    """One HTTP/1.1 event stream read in a thread, each event kept as an :class:`Arrival`."""

    def __init__(self, port: int, path: str) -> None:
        self.port = port
        self.request = sse_request(path, port)
        self.arrivals: list[Arrival] = []
        self.error = ""
        """Why the stream ended before :meth:`close`, or why it was not answered."""
        self._status = 0
        self._read_at_us = 0
        self._parser = httptools.HttpResponseParser(self)
        self._events = SseParser()
        self._answered = threading.Event()
        self._stop = threading.Event()
        self._socket: socket.socket | None = None
        self._thread = threading.Thread(target=self._read, name="bench-sse-reader", daemon=True)

    def open(self, timeout: float = OPEN_TIMEOUT) -> None:
        """Connect, send the request and start reading; raises unless answered ``200``."""
        self._socket = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        self._socket.sendall(self.request)
        self._socket.settimeout(READ_TIMEOUT)
        self._thread.start()
        if not self._answered.wait(timeout) or self._status != 200:
            status = f"status {self._status}" if self._status else "no answer"
            raise RuntimeError(f"the SSE stream was not opened: {self.error or status}")

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(READ_TIMEOUT * 10)
        if self._socket is not None:
            self._socket.close()

    def _read(self) -> None:
        assert self._socket is not None
        while not self._stop.is_set():
            try:
                data = self._socket.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError as exc:
                self.error = f"read: {exc}"
                break
            if not data:
                self.error = "the gateway ended the stream"
                break
            self._read_at_us = time.time_ns() // 1000
            try:
                self._parser.feed_data(data)
            except httptools.HttpParserError as exc:
                self.error = f"bad response: {exc}"
                break
        self._answered.set()

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        self._answered.set()

    def on_body(self, body: bytes) -> None:
        read_at = self._read_at_us
        for event in self._events.feed(body):
            if isinstance(event, SseEvent):
                self.arrivals.append(arrival(event.id, event.data, read_at))


@dataclass(frozen=True, slots=True)
class SseLeg:
    """A running gateway on the sink topic and the stream read from it."""

    gateway: GatewayProcess
    reader: SseReader

    def drain(self, sink_offsets: Collection[int], within: float = DRAIN_SECONDS) -> Delivery:
        """Wait until every offset of ``sink_offsets`` came, or ``within`` s; stop reading and
        tally what came."""
        deadline = time.monotonic() + within
        while delivery(sink_offsets, list(self.reader.arrivals)).missing:
            if time.monotonic() > deadline or self.reader.error:
                break
            time.sleep(0.2)
        self.reader.close()
        return delivery(sink_offsets, self.reader.arrivals)


@contextmanager
def gateway_stream(bootstrap: str, topic: str, workdir: Path) -> Iterator[SseLeg]:
    """A gateway of one worker serving ``topic`` at ``/<topic>``, and one stream of it open;
    the stream closed and the gateway stopped on the way out, whatever happened."""
    workdir.mkdir(parents=True, exist_ok=True)
    ports = write_kafka_gateway_config(workdir, bootstrap, [topic])
    with GatewayProcess(ports.config) as gateway:  # stopped on the way out
        reader = SseReader(ports.plain, f"/{topic}")
        try:
            reader.open()
            yield SseLeg(gateway, reader)
        finally:
            reader.close()
