"""HTTP/1.1 challenge answers across the processes that share a listening address.

A browser answers a challenge on a new HTTP/1.1 connection, and when the gateway's ports are
shared (``start --workers N``, or independent ``start --reuse-port`` processes) the kernel may
hand that connection to a process other than the one holding the stream. So each such process
opens an :class:`AnswerRelay` on its :class:`~ssegate.host.relay_socket.PeerSocket`, a Unix
datagram socket in a directory named after its listening addresses, where exactly the processes
that share those addresses meet.

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
renewal was sent to. Memory is bounded: at most :data:`MAX_PENDING` answers wait for replies,
and the socket bounds its peers, its backlog (each datagram for :data:`ANSWER_WAIT` at most) and
its reads per wake-up (:mod:`ssegate.host.relay_socket`).
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ssegate.contract.guard import Answered, Guard, RelayedAnswer
from ssegate.contract.identity import CredentialsRejected, Identity
from ssegate.guards.streams import NO_CONNECTION
from ssegate.host.relay_socket import PeerSocket, RelayUnavailable
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
from ssegate.telemetry import log
from ssegate.telemetry.metrics import Metrics
from ssegate.telemetry.quiet_log import QuietLog

ANSWER_WAIT = 0.5
"""Seconds an answer that extended nothing here waits for the other processes' replies."""
MAX_PENDING = 8192
DROP_LOG_EVERY = 10.0
FINISHED_REMEMBERED = 1024
"""Ids of answers decided lately, so a reply arriving after :data:`ANSWER_WAIT` is told from
one that answers nothing."""
NOT_HELD = "no stream of this identity to extend in any process sharing this address"


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

    def __init__(self, peers: PeerSocket, guards: Mapping[str, Guard], metrics: Metrics) -> None:
        self._socket = peers
        self._guards = guards
        self._metrics = metrics
        self._pending: dict[str, _Pending] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._refreshing = 0
        self._quiet = QuietLog(DROP_LOG_EVERY)

    @property
    def path(self) -> Path:
        """This process's socket."""
        return self._socket.path

    @property
    def directory(self) -> Path:
        """Where the processes sharing this address meet."""
        return self._socket.directory

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
        unreachable = functools.partial(metrics.inc, "ssegate.guard.relay.unreachable")
        relay = cls(PeerSocket.bind(addresses, unreachable, base), guards, metrics)
        relay._socket.start(relay._readable)
        return relay

    def close(self) -> None:
        """Stop reading, decide what still waits, and remove this process's socket."""
        self._socket.close()
        for pending in list(self._pending.values()):
            pending.decide()

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
        if len(token) > MAX_TOKEN or not self._socket.open:  # no other process could be told
            pending.decide()
            return pending.decided
        if len(self._pending) >= MAX_PENDING:
            self._metrics.inc("ssegate.guard.relay.overflow", guard=guard)
            self._quietly("guard.relay_overflow", "overflow", guard=guard, pending=MAX_PENDING)
            pending.decide()
            return pending.decided
        id_ = new_id()
        datagram = encode(Renewal(id_, guard, token))
        reached = [p for p in self._socket.peers() if self._socket.send(datagram, p, ANSWER_WAIT)]
        self._metrics.inc("ssegate.guard.relay.relayed", guard=guard)
        pending.peers = len(reached)
        pending.waiting = set(reached)
        if not reached:
            self._finish(id_, pending)
            return pending.decided
        self._pending[id_] = pending
        pending.timer = asyncio.get_running_loop().call_later(ANSWER_WAIT, self._give_up, id_)
        return pending.decided

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
        for data, sender in self._socket.received(MAX_DATAGRAM + 1):
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
        if not self._socket.is_peer(sender):
            self._drop("foreign_sender", str(sender)[:120])
            return
        assert isinstance(sender, str)
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
                    if self._socket.open:
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
        self._socket.send(encode(outcome), sender, ANSWER_WAIT)

    def _drop(self, reason: str, sender: str) -> None:
        self._metrics.inc("ssegate.guard.relay.dropped", reason=reason)
        self._quietly("guard.relay_dropped", reason, reason=reason, sender=sender)

    def _quietly(self, event: str, key: str, **fields: Any) -> None:
        """Log ``event`` at most once per :data:`DROP_LOG_EVERY` seconds per ``key``, saying how
        many were not logged since."""
        self._quiet.warning(event, key, **fields, pid=os.getpid())
