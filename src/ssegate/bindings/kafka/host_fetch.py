"""One shared fetch per host: the workers of ``start --workers N`` read Kafka through one of them.

Without this, each worker's cache server fetches every partition of every topic it serves, so
``N`` workers ask the broker for every record ``N`` times, and each of them receives, checks and
groups every record, whichever worker holds the streams that want it: a cost that grows with the
workers, not with the streams (16,000 key-filtered streams on six workers at 5,000 messages/s:
0.88 of a core with a fetch per worker, 0.70 with one per host, and the broker's CPU halved;
docs/performance.md, "100,000 streams across workers").

So the workers are linked before they are forked: one Unix socket pair per cache server binding
and worker after the first (:mod:`ssegate.host.worker_links`). Worker 0 is the **leader**:
its fetch thread (:class:`~.fetcher.FetchThread`) reads Kafka as before and, in the same pass,
writes what its shared fetch produced to every follower (:meth:`LeaderEnd.broadcast`). Each
other worker is a **follower**: its fetch thread has no shared-fetch consumer; it reads the
leader's events from its socket (:meth:`FollowerEnd.read`) and hands them to its own loop
exactly as if it had fetched them. A follower that needs a topic started sends a
:class:`~.fetch_events.StartTopic` to the leader, which starts it for everyone; every follower
hears every topic start, so each keeps the same cache from the same offsets as the leader and
resumes any client from its event id.

What stays per worker: the catch-up reader (a client resuming from before the cache), the
check whether a topic exists, and everything on the loop (cache, routing, writes).

The leader writes with blocking sends from its fetch thread, so a follower that falls behind
(its loop's inbox is full and its reader waits, :mod:`~.handover`) slows the shared fetch for
the host: memory stays bounded and Kafka holds the rest, as with one worker. A worker that dies
stops the gateway (:mod:`ssegate.engine.process`); a follower whose leader is gone reports the
broker unavailable to its streams until then.

The wire is private to the processes of one ``start`` (the links have no name in the
filesystem), so its frames (a 4-byte length and a pickle) are never read from anyone else. A
batch of records travels as plain tuples, which pickle several times faster than the frozen
dataclasses they are rebuilt into.
"""

from __future__ import annotations

import contextlib
import pickle
import select
import socket
import struct
from collections.abc import Iterable
from typing import TypeVar

from ssegate.bindings.kafka.fetch_events import (
    BrokerStatus,
    CatchUpAtEnd,
    CatchUpReset,
    Event,
    Fetched,
    StartTopic,
)
from ssegate.bindings.kafka.repeats import Repeat
from ssegate.host.worker_links import WorkerLink
from ssegate.kafka.topics import KafkaMessage
from ssegate.telemetry import log

LENGTH = struct.Struct(">I")
READ_BYTES = 1 << 20
LEADER_GONE = "the worker that fetches for this host stopped"

T = TypeVar("T")


class WireError(ValueError):
    """A frame that is not one this module writes."""


# -- the wire -------------------------------------------------------------------------------------


def encode_events(events: Iterable[Event]) -> bytes | None:
    """The shared fetch's part of ``events`` as one frame; ``None`` when none of it is shared
    (the catch-up reader's batches and answers are the leader's own)."""
    shared: list[object] = []
    for event in events:
        if isinstance(event, Fetched):
            if event.catch_up:
                continue
            shared.append((
                event.topic, event.partition,
                [(m.offset, m.key, m.value, m.headers, m.timestamp_ms) for m in event.messages],
                event.next_offset, event.invalid,
                [(r.offset, r.earlier, r.record_id) for r in event.repeats], event.fetched,
            ))  # fmt: skip
        elif not isinstance(event, (CatchUpReset, CatchUpAtEnd)):
            shared.append(event)
    if not shared:
        return None
    return frame(shared)


def decode_events(payload: bytes) -> list[Event]:
    """The events of a frame's payload, as the leader's fetch thread made them."""
    decoded: list[Event] = []
    for item in _unpickle(payload, list):
        if isinstance(item, tuple):
            topic, partition, records, next_offset, invalid, repeats, fetched = item
            messages = [
                KafkaMessage(topic, partition, offset, key, value, headers, stamp)
                for offset, key, value, headers, stamp in records
            ]
            skipped = [Repeat(offset, earlier, found) for offset, earlier, found in repeats]
            decoded.append(Fetched(topic, partition, messages, next_offset, invalid,
                                   repeats=skipped, fetched=fetched))  # fmt: skip
        else:
            decoded.append(item)
    return decoded


def encode_command(command: StartTopic) -> bytes:
    return frame(command)


def decode_command(payload: bytes) -> StartTopic:
    return _unpickle(payload, StartTopic)


def frame(value: object) -> bytes:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return LENGTH.pack(len(payload)) + payload


def _unpickle(payload: bytes, kind: type[T]) -> T:
    try:
        value = pickle.loads(payload)  # written only by this gateway's workers
    except Exception as exc:  # pickle raises many kinds
        raise WireError(f"unreadable frame: {exc}") from exc
    if not isinstance(value, kind):
        raise WireError(f"a frame of {type(value).__name__}, not {kind.__name__}")
    return value


class Frames:
    """Frames out of a byte stream read in pieces."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        payloads: list[bytes] = []
        buffer = self._buffer
        start = 0
        while len(buffer) - start >= LENGTH.size:
            (length,) = LENGTH.unpack_from(buffer, start)
            end = start + LENGTH.size + length
            if end > len(buffer):
                break
            payloads.append(bytes(buffer[start + LENGTH.size : end]))
            start = end
        del buffer[:start]
        return payloads


# -- the two ends ---------------------------------------------------------------------------------


class LeaderEnd:
    """The leader's sockets, one per follower; used by its fetch thread only."""

    def __init__(self, followers: list[socket.socket]) -> None:
        self._followers = list(followers)
        self._frames = {sock.fileno(): Frames() for sock in followers}
        for sock in followers:
            sock.setblocking(True)

    @property
    def followers(self) -> int:
        return len(self._followers)

    def broadcast(self, events: list[Event]) -> None:
        """Send the shared part of ``events`` to every follower, waiting for each to take it."""
        data = encode_events(events)
        if data is None:
            return
        for sock in list(self._followers):
            try:
                sock.sendall(data)
            except OSError as exc:
                self._drop(sock, exc)

    def commands(self) -> list[StartTopic]:
        """The topic starts followers asked for since the last call (never waits)."""
        if not self._followers:
            return []
        readable, _, _ = select.select(self._followers, [], [], 0)
        found: list[StartTopic] = []
        for sock in readable:
            try:
                data = sock.recv(READ_BYTES)
            except OSError as exc:
                self._drop(sock, exc)
                continue
            if not data:
                self._drop(sock, None)
                continue
            try:
                found.extend(decode_command(p) for p in self._frames[sock.fileno()].feed(data))
            except WireError as exc:
                self._drop(sock, exc)
        return found

    def _drop(self, sock: socket.socket, exc: Exception | None) -> None:
        log.warning("kafka.shared_fetch_follower_gone", reason=str(exc) if exc else "closed")
        self._followers.remove(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def close(self) -> None:
        for sock in self._followers:
            with contextlib.suppress(OSError):
                sock.close()
        self._followers.clear()


class FollowerEnd:
    """A follower's socket to the leader; used by its fetch thread only."""

    def __init__(self, leader: socket.socket) -> None:
        self._leader: socket.socket | None = leader
        self._frames = Frames()
        leader.setblocking(True)

    @property
    def connected(self) -> bool:
        return self._leader is not None

    def ask(self, command: StartTopic) -> None:
        if self._leader is None:
            return
        with contextlib.suppress(OSError):  # the leader is gone: the next read says so
            self._leader.sendall(encode_command(command))

    def read(self, timeout: float) -> list[Event]:
        """What the leader sent, waiting up to ``timeout`` for the first of it; once the leader
        is gone, one :class:`~.fetch_events.BrokerStatus` saying so, then nothing."""
        sock = self._leader
        if sock is None:
            return []
        readable, _, _ = select.select([sock], [], [], timeout)
        if not readable:
            return []
        try:
            data = sock.recv(READ_BYTES)
            if not data:
                raise ConnectionResetError("closed")
            events: list[Event] = []
            for payload in self._frames.feed(data):
                events.extend(decode_events(payload))
            return events
        except (OSError, WireError) as exc:
            log.warning("kafka.shared_fetch_leader_gone", reason=str(exc))
            self.close()
            return [BrokerStatus(False, LEADER_GONE)]

    def close(self) -> None:
        if self._leader is not None:
            with contextlib.suppress(OSError):
                self._leader.close()
            self._leader = None


SharedFetchEnd = LeaderEnd | FollowerEnd


def end_of(link: WorkerLink | None) -> SharedFetchEnd | None:
    """This worker's end of the shared fetch, from its :class:`~ssegate.host.worker_links.
    WorkerLink` (``None`` with one worker)."""
    if link is None:
        return None
    if link.first:
        return LeaderEnd(list(link.sockets))
    return FollowerEnd(link.sockets[0])
