"""HTTP/1.1 challenge answers across the processes that share a listening address.

A browser answers a challenge on a new HTTP/1.1 connection, and when the gateway's ports are
shared (``start --workers N``, or independent ``start --reuse-port`` processes) the kernel may
hand that connection to a process other than the one holding the stream. So each such process
opens an :class:`AnswerRelay`: a Unix datagram socket ``<pid>.sock`` in a directory of its own
user named after its listening addresses (:func:`relay_directory`), so exactly the processes
that share those addresses meet, and nothing else is needed.

The process an HTTP/1.1 answer reaches extends its own streams, then sends the answer's token
(:class:`~ssegate.host.relay_wire.Renewal`) to every other socket of the directory. Each
receiver verifies the token with its own guard, as if the client had sent it there, extends
what it may extend, and replies with an :class:`~ssegate.host.relay_wire.Outcome`. The
answer is decided (:class:`RelayedAnswer`) at once when a stream was extended here, else at the
first peer that extended one, else once every peer replied or :data:`ANSWER_WAIT` passed:
204 when a stream anywhere was extended, 403 with the reason otherwise (no process holds a
stream of that identity, or the token does not supersede the one it holds).

Nothing on the channel is trusted: a renewal grants only what its token grants (a token of that
identity could open a stream of its own), a datagram that is not exactly one this module writes
(:mod:`~ssegate.host.relay_wire`) is dropped and counted in ``ssegate.guard.relay.dropped``
with one log line per :data:`DROP_LOG_EVERY` seconds, and outcomes count only from the peers a
renewal was sent to. Memory is bounded: at most :data:`MAX_PENDING` answers wait for replies, a
renewal goes to at most :data:`MAX_PEERS` peers, at most :data:`MAX_BACKLOG` datagrams wait
for a peer whose socket queue is full (each for :data:`ANSWER_WAIT` at most), and a wake-up
reads at most :data:`READS_PER_WAKEUP` datagrams. A socket left by a process that was killed refuses
datagrams and is removed once it is :data:`STALE_AFTER` seconds old.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import stat
import tempfile
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ssegate.contract.guard import Answered, Guard, RelayedAnswer
from ssegate.contract.identity import CredentialsRejected, Identity
from ssegate.host.relay_wire import (
    MAX_DATAGRAM,
    MAX_TOKEN,
    MalformedDatagram,
    Outcome,
    Renewal,
    decode,
    encode,
    new_id,
)
from ssegate.guards.streams import NO_CONNECTION
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics

ANSWER_WAIT = 0.5
"""Seconds an answer that extended nothing here waits for the other processes' replies."""
MAX_PENDING = 8192
MAX_PEERS = 256
MAX_BACKLOG = 4096
"""Datagrams waiting for peers whose socket queue is full (Linux holds 10 per socket by
default, ``net.unix.max_dgram_qlen``)."""
FLUSH_EVERY = 0.002
READS_PER_WAKEUP = 64
STALE_AFTER = 10.0
DROP_LOG_EVERY = 10.0
FINISHED_REMEMBERED = 1024
"""Ids of answers decided lately, so a reply arriving after :data:`ANSWER_WAIT` is told from
one that answers nothing."""
SUN_PATH_MAX = 107
NOT_HELD = "no stream of this identity to extend in any process sharing this address"


class RelayUnavailable(Exception):
    """The relay cannot be opened; the reason says why (the gateway runs on without it)."""


def relay_directory(addresses: Iterable[tuple[str, int]], base: Path | None = None) -> Path:
    """The directory the processes listening on ``addresses`` meet in: under ``base``
    (``$SSEGATE_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/ssegate``, else ``ssegate-<uid>`` in
    the temporary directory), named by a digest of the sorted ``host:port`` list."""
    listed = "\n".join(sorted(f"{host}:{port}" for host, port in addresses))
    digest = hashlib.sha256(listed.encode()).hexdigest()[:16]
    return (base or _base_directory()) / digest


def _base_directory() -> Path:
    configured = os.environ.get("SSEGATE_RUNTIME_DIR")
    if configured:
        return Path(configured).absolute()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "ssegate"
    return Path(tempfile.gettempdir()) / f"ssegate-{os.getuid()}"


def _private_directory(path: Path) -> None:
    """Make ``path`` (0700) or check that it is a directory of this user that only it may use."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = os.lstat(path)
    except OSError as exc:
        raise RelayUnavailable(f"cannot create {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise RelayUnavailable(f"{path} is not a directory owned by this user")
    if found.st_mode & 0o077:
        raise RelayUnavailable(f"{path} may be used by other users (mode {found.st_mode:o})")


class _Pending:
    """One relayed answer waiting for the other processes' outcomes."""

    __slots__ = (
        "decided",
        "elsewhere",
        "guard",
        "held_reason",
        "here",
        "identity",
        "peers",
        "started",
        "timer",
        "waiting",
    )

    def __init__(self, guard: str, identity: str, here: Answered, peers: list[str]) -> None:
        self.guard = guard
        self.identity = identity
        self.here = here
        self.peers = len(peers)
        self.waiting = set(peers)
        self.elsewhere = 0
        self.held_reason: str | None = here.reason if here.held else None
        self.decided: asyncio.Future[RelayedAnswer] = asyncio.get_running_loop().create_future()
        self.started = time.monotonic()
        self.timer: asyncio.TimerHandle | None = None

    def decide(self) -> None:
        if self.decided.done():
            return
        total = self.here.extended + self.elsewhere
        reason = None if total else (self.held_reason or NOT_HELD)
        self.decided.set_result(RelayedAnswer(total, self.elsewhere, reason))


def share_answers(
    addresses: Iterable[tuple[str, int]], guards: Mapping[str, Guard], metrics: Metrics
) -> Callable[[], None] | None:
    """Ports shared with other processes: open the channel HTTP/1.1 challenge answers take to
    reach the process holding their streams, and give it to every guard's streams. Returns what
    closes it again, or ``None`` when it cannot be opened (logged: an answer then extends only
    the streams of the process it reaches). The runtime calls it by the name
    :data:`~ssegate.engine.runtime.ANSWER_RELAY` gives."""
    try:
        relay = AnswerRelay.open(addresses, guards, metrics)
    except RelayUnavailable as exc:
        log.warning(
            "guard.relay_unavailable",
            pid=os.getpid(),
            reason=str(exc),
            effect="an HTTP/1.1 challenge answer extends only the streams of the process"
            " it reaches",
        )
        return None
    for guard in guards.values():
        guard.streams.relay = relay
    log.event("guard.relay_listening", path=str(relay.path), pid=os.getpid())

    def close() -> None:
        for guard in guards.values():
            guard.streams.relay = None
        relay.close()

    return close


class AnswerRelay:
    """This process's end of the channel among the processes sharing its listening address."""

    def __init__(
        self, sock: socket.socket, path: Path, guards: Mapping[str, Guard], metrics: Metrics
    ) -> None:
        self._sock = sock
        self.path = path
        self.directory = path.parent
        self._inode = os.lstat(path).st_ino
        self._guards = guards
        self._metrics = metrics
        self._pending: dict[str, _Pending] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._refreshing = 0
        self._quiet_until: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._backlog: dict[str, deque[tuple[float, bytes]]] = {}
        """Datagrams waiting for a peer whose queue was full, with when they stop being useful."""
        self._backlog_size = 0
        self._flushing: asyncio.TimerHandle | None = None

    @classmethod
    def open(
        cls,
        addresses: Iterable[tuple[str, int]],
        guards: Mapping[str, Guard],
        metrics: Metrics,
        *,
        base: Path | None = None,
    ) -> AnswerRelay:
        """Bind this process's socket and start reading it; raises :class:`RelayUnavailable`."""
        directory = relay_directory(addresses, base)
        path = directory / f"{os.getpid()}.sock"
        if len(os.fsencode(path)) > SUN_PATH_MAX:
            raise RelayUnavailable(
                f"{path} is longer than a Unix socket path may be; set SSEGATE_RUNTIME_DIR"
                " to a shorter directory"
            )
        _private_directory(directory.parent)
        _private_directory(directory)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        sock.setblocking(False)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # left by a killed process that had this pid
            sock.bind(os.fspath(path))
        except OSError as exc:
            sock.close()
            raise RelayUnavailable(f"cannot bind {path}: {exc.strerror or exc}") from None
        relay = cls(sock, path, guards, metrics)
        relay._loop = asyncio.get_running_loop()
        relay._loop.add_reader(sock.fileno(), relay._readable)
        return relay

    def close(self) -> None:
        """Stop reading, decide what still waits, and remove this process's socket."""
        if self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._loop = None
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        self._backlog.clear()
        for pending in list(self._pending.values()):
            pending.decide()
        self._sock.close()
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self._inode:
                os.unlink(self.path)

    # -- the process an answer reached --------------------------------------------------------

    def relay(
        self, guard: str, token: str, fresh: Identity, here: Answered
    ) -> asyncio.Future[RelayedAnswer]:
        """Send ``token`` (which established ``fresh``; ``here`` is what it did in this process)
        to the other processes; the future is the answer's outcome, decided as the module says.
        """
        pending = _Pending(guard, fresh.identity, here, [])
        if here.extended:
            pending.decide()
        if len(token) > MAX_TOKEN or self._loop is None:  # no other process could be told
            pending.decide()
            return pending.decided
        if len(self._pending) >= MAX_PENDING:
            self._metrics.inc("ssegate.guard.relay.overflow", guard=guard)
            self._quietly("guard.relay_overflow", "overflow", guard=guard, pending=MAX_PENDING)
            pending.decide()
            return pending.decided
        id_ = new_id()
        datagram = encode(Renewal(id_, guard, token))
        reached = [peer for peer in self._peers() if self._send(datagram, peer)]
        self._metrics.inc("ssegate.guard.relay.relayed", guard=guard)
        pending.peers = len(reached)
        pending.waiting = set(reached)
        if not reached:
            self._finish(id_, pending)
            return pending.decided
        self._pending[id_] = pending
        pending.timer = self._loop.call_later(ANSWER_WAIT, self._give_up, id_)
        return pending.decided

    def _peers(self) -> list[str]:
        peers: list[str] = []
        try:
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    if entry.name.endswith(".sock") and entry.path != os.fspath(self.path):
                        peers.append(entry.path)
                        if len(peers) >= MAX_PEERS:
                            break
        except OSError:
            return []
        return peers

    def _send(self, datagram: bytes, peer: str) -> bool:
        """Send ``datagram`` to ``peer`` now, or queue it while the peer's queue is full (the
        kernel holds only a few datagrams per socket); ``False`` when it cannot reach it."""
        if peer not in self._backlog:
            try:
                self._sock.sendto(datagram, peer)
                return True
            except BlockingIOError:
                pass
            except ConnectionRefusedError:
                self._remove_stale(peer)
                return self._unreachable()
            except OSError:
                return self._unreachable()
        if self._backlog_size >= MAX_BACKLOG or self._loop is None:
            return self._unreachable()
        deadline = time.monotonic() + ANSWER_WAIT
        self._backlog.setdefault(peer, deque()).append((deadline, datagram))
        self._backlog_size += 1
        if self._flushing is None:
            self._flushing = self._loop.call_later(FLUSH_EVERY, self._flush)
        return True

    def _flush(self) -> None:
        """Send what waits for peers whose queues were full; what waited too long is lost."""
        self._flushing = None
        now = time.monotonic()
        for peer, queued in list(self._backlog.items()):
            while queued:
                deadline, datagram = queued[0]
                if deadline >= now:
                    try:
                        self._sock.sendto(datagram, peer)
                    except BlockingIOError:
                        break
                    except OSError:
                        deadline = now - 1  # gone: what waits for it is lost
                if deadline < now:
                    self._unreachable()
                queued.popleft()
                self._backlog_size -= 1
            if not queued:
                del self._backlog[peer]
        if self._backlog and self._loop is not None:
            self._flushing = self._loop.call_later(FLUSH_EVERY, self._flush)

    def _unreachable(self) -> bool:
        self._metrics.inc("ssegate.guard.relay.unreachable")
        return False

    def _remove_stale(self, peer: str) -> None:
        """A socket nobody reads: its process was killed. Removed once old enough that it cannot
        be one a starting process has just bound."""
        with contextlib.suppress(OSError):
            if time.time() - os.lstat(peer).st_mtime > STALE_AFTER:
                os.unlink(peer)
                log.event("guard.relay_stale_removed", path=peer, pid=os.getpid())

    def _outcome(self, outcome: Outcome, sender: str) -> None:
        pending = self._pending.get(outcome.id)
        if pending is None:
            if outcome.id in self._finished:
                self._metrics.inc("ssegate.guard.relay.late")
                return
            self._drop("unknown_id", sender)
            return
        if sender not in pending.waiting:
            self._drop("unexpected_sender", sender)
            return
        pending.waiting.discard(sender)
        pending.elsewhere += outcome.extended
        if outcome.held and not outcome.extended and pending.held_reason is None:
            pending.held_reason = outcome.reason
        if pending.elsewhere:
            pending.decide()
        if not pending.waiting:
            self._finish(outcome.id, pending)

    def _give_up(self, id_: str) -> None:
        pending = self._pending.get(id_)
        if pending is not None:
            pending.timer = None
            self._metrics.inc(
                "ssegate.guard.relay.unanswered", value=len(pending.waiting), guard=pending.guard
            )
            self._finish(id_, pending)

    def _finish(self, id_: str, pending: _Pending) -> None:
        self._pending.pop(id_, None)
        if pending.timer is not None:
            pending.timer.cancel()
        self._finished[id_] = None
        if len(self._finished) > FINISHED_REMEMBERED:
            self._finished.popitem(last=False)
        pending.decide()
        log.event(
            "guard.answer_relayed",
            guard=pending.guard,
            identity=pending.identity,
            peers=pending.peers,
            unanswered=len(pending.waiting),
            extended_here=pending.here.extended,
            extended_elsewhere=pending.elsewhere,
            pid=os.getpid(),
            duration_ms=round((time.monotonic() - pending.started) * 1000, 3),
        )

    # -- the other processes ------------------------------------------------------------------

    def _readable(self) -> None:
        for _ in range(READS_PER_WAKEUP):
            try:
                data, sender = self._sock.recvfrom(MAX_DATAGRAM + 1)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            try:
                self._received(data, sender)
            except Exception as exc:  # a guard failing other than by refusing, say
                self._metrics.inc("ssegate.guard.relay.failures")
                log.error(
                    "guard.relay_failed",
                    error=f"{type(exc).__name__}: {exc}"[:300],
                    pid=os.getpid(),
                )

    def _received(self, data: bytes, sender: object) -> None:
        if not isinstance(sender, str) or not sender or Path(sender).parent != self.directory:
            self._drop("foreign_sender", str(sender)[:120])
            return
        try:
            message = decode(data)
        except MalformedDatagram as exc:
            self._drop(exc.reason, sender)
            return
        if isinstance(message, Outcome):
            self._outcome(message, sender)
        else:
            self._renewal(message, sender)

    def _renewal(self, renewal: Renewal, sender: str, *, may_wait: bool = True) -> None:
        guard = self._guards.get(renewal.guard)
        if guard is None:
            self._drop("unknown_guard", sender)
            return
        fresh = guard.authorize(renewal.token)
        if isinstance(fresh, CredentialsRejected):
            waiting = guard.refresh() if fresh.refreshable and may_wait else None
            if waiting is not None and self._refreshing < MAX_PENDING:
                self._refreshing += 1

                def refreshed(_: object) -> None:
                    self._refreshing -= 1
                    if self._loop is not None:
                        self._renewal(renewal, sender, may_wait=False)

                waiting.add_done_callback(refreshed)
                return
            self._refused(renewal, sender, "token", fresh.reason, None)
            self._reply(Outcome(renewal.id, 0, 0, None), sender)
            return
        answered = guard.streams.answer(fresh, connection_id=NO_CONNECTION, http2=False)
        if answered.extended:
            self._metrics.inc("ssegate.guard.relay.applied", guard=renewal.guard)
            log.event(
                "guard.relayed_answer_applied",
                guard=renewal.guard,
                identity=fresh.identity,
                streams=answered.extended,
                origin=Path(sender).stem,
                pid=os.getpid(),
            )
        elif answered.held:
            self._refused(renewal, sender, "not_superseding", answered.reason, fresh.identity)
        else:
            self._metrics.inc("ssegate.guard.relay.not_held", guard=renewal.guard)
        reason = answered.reason if answered.held else None
        self._reply(Outcome(renewal.id, answered.extended, answered.held, reason), sender)

    def _refused(
        self, renewal: Renewal, sender: str, label: str, why: str | None, identity: str | None
    ) -> None:
        """Count a renewal refused here, with a log line: at most one per
        :data:`DROP_LOG_EVERY` seconds and ``label``, since any local process may send them."""
        self._metrics.inc("ssegate.guard.relay.refused", guard=renewal.guard, reason=label)
        self._quietly(
            "guard.relayed_answer_refused",
            f"refused:{label}",
            guard=renewal.guard,
            identity=identity,
            reason=why,
            origin=Path(sender).stem,
        )

    def _reply(self, outcome: Outcome, sender: str) -> None:
        self._send(encode(outcome), sender)

    def _drop(self, reason: str, sender: str) -> None:
        self._metrics.inc("ssegate.guard.relay.dropped", reason=reason)
        self._quietly("guard.relay_dropped", reason, reason=reason, sender=sender)

    def _quietly(self, event: str, key: str, **fields: Any) -> None:
        """Log ``event`` at most once per :data:`DROP_LOG_EVERY` seconds per ``key``, saying how
        many were not logged since."""
        now = time.monotonic()
        if now < self._quiet_until.get(key, 0.0):
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        self._quiet_until[key] = now + DROP_LOG_EVERY
        log.warning(event, **fields, unlogged=self._suppressed.pop(key, 0), pid=os.getpid())
