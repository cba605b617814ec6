"""Continuous authorization of long-lived streams: challenge events, answers, the end at ``exp``.

A stream is kept authorized by every guard that let its request through on the way: the one on
the http server's route, on the sse server's route, on the sse-kafka proxy's route, whichever
the config puts it on (:meth:`~ssegate.guards.guarded.Guarded.admit` records them in
``request.authorized_by``). The sse server starts a :class:`StreamAuthorization` for a stream it
opens: one :class:`~ssegate.guards.session.GuardedSession` per such guard, and one timer for
the earliest step due. At ``exp - challenge`` the stream is sent the challenge event; at ``exp``
without an extension it ends (HTTP/1.1: the connection closes; HTTP/2: ``RST_STREAM(NO_ERROR)``).
It never falls back to anonymous.

Each guard keeps its streams in its own :class:`GuardedStreams`, by identity, as Zilla's guards
keep their sessions. A challenge answer (a POST with ``content-type:
application/x-challenge-response`` and a fresh token carried like the first) is answered by the
http server before any route is tried, as Zilla does, through the guard its
``options.authorization`` names: the answer reaches the streams wherever the guard sits, and a
role expression such as ``${method}${path}`` does not turn the answer's POST away.
:meth:`GuardedStreams.answer` finds the sessions the fresh token may extend:

- HTTP/2: the streams of the same identity on the **same connection** (Zilla: sessions are per
  connection and identity), so one answer extends every such stream on it;
- HTTP/1.1: the streaming connection is busy, so a browser sends the answer on another one.
  The answer extends the HTTP/1.1 streams with the same guard and identity whose current token
  the fresh one supersedes (later ``exp``, roles not narrower): this process's, and, when the
  ports are shared with other processes (``--workers N``, ``--reuse-port``), theirs, through
  the :attr:`GuardedStreams.relay` (:mod:`ssegate.guards.relay`), each verifying the token
  itself. A token of that identity could open a stream of its own, so this grants nothing new.

The answer is 204 when at least one stream was extended; otherwise 403 with the reason (for
example: the identity differs, the ``exp`` is not later, or no process holds a stream of that
identity), so the client knows to reconnect with its fresh token instead of waiting to be cut
off.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from typing import Protocol

from ssegate.contract.guard import Answered, AnswerForwarding
from ssegate.contract.identity import Identity
from ssegate.guards.session import (
    CHALLENGE_CONTENT_TYPE,
    CHALLENGE_DATA,
    CHALLENGE_EVENT,
    Due,
    GuardedSession,
)


class AuthorizedSink(Protocol):
    """What a stream under authorization needs from the sse server's downstream stream."""

    def event(self, data: str | None, *, event: str | None = None, id: str | None = None) -> None:
        """Send one event."""

    def expire(self, reason: str) -> None:
        """End the stream because its authorization ran out."""


def is_challenge_answer(method: str, headers: Mapping[str, str]) -> bool:
    """A request of ``method`` with ``headers`` (lower-case names) is a challenge answer: a
    POST with ``content-type: application/x-challenge-response``."""
    if method != "POST":
        return False
    content_type = headers.get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower() == CHALLENGE_CONTENT_TYPE


class StreamAuthorization:
    """Keeps one stream authorized, or ends it."""

    __slots__ = ("_clock", "_handle", "connection_id", "http2", "sessions", "sink")

    def __init__(
        self,
        sink: AuthorizedSink,
        sessions: list[tuple[GuardedSession, GuardedStreams]],
        *,
        connection_id: int,
        http2: bool,
        clock: Callable[[], float],
    ) -> None:
        self.sink = sink
        self.sessions = sessions
        self.connection_id = connection_id
        self.http2 = http2
        self._clock = clock
        self._handle: asyncio.TimerHandle | None = None

    def schedule(self) -> None:
        """(Re)arm the timer for the earliest step due."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self.sessions:
            return
        at = min(session.deadline()[0] for session, _ in self.sessions)
        if math.isinf(at):  # credentials that never expire: nothing is ever due
            return
        delay = max(0.0, at - self._clock())
        self._handle = asyncio.get_running_loop().call_later(delay, self.step)

    def step(self) -> None:
        """Do what is due now: a challenge event, or the end of the stream."""
        self._handle = None
        now = self._clock()
        challenged = False
        for session, _ in self.sessions:
            due = session.due(now)
            if due is Due.EXPIRE:
                self.cancel()
                self.sink.expire(f"the token for guard {session.guard!r} expired")
                return
            if due is Due.CHALLENGE:
                challenged = True
        if challenged:
            self.sink.event(CHALLENGE_DATA, event=CHALLENGE_EVENT)
        self.schedule()

    def cancel(self) -> None:
        """The stream closed: stop the timer and leave the guards' registries."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        for session, streams in self.sessions:
            streams.discard(session.identity, self)


NO_CONNECTION = -1
"""The connection of an answer that reached another process (:mod:`ssegate.guards.relay`)."""


class GuardedStreams:
    """One guard's streams under authorization, by identity, for challenge answers."""

    def __init__(self, guard: str) -> None:
        self.guard = guard
        self._by_identity: dict[str, set[StreamAuthorization]] = {}
        self.relay: AnswerForwarding | None = None
        """Where HTTP/1.1 answers also go: the other processes sharing the listening address
        (set when the gateway's ports are shared; :mod:`ssegate.guards.relay`)."""

    def __len__(self) -> int:
        return sum(len(members) for members in self._by_identity.values())

    def add(self, identity: str, authorization: StreamAuthorization) -> None:
        self._by_identity.setdefault(identity, set()).add(authorization)

    def discard(self, identity: str, authorization: StreamAuthorization) -> None:
        members = self._by_identity.get(identity)
        if members is not None:
            members.discard(authorization)
            if not members:
                del self._by_identity[identity]

    def answer(self, fresh: Identity, *, connection_id: int, http2: bool) -> Answered:
        """Extend what ``fresh`` may extend: the HTTP/2 streams of ``connection_id``, or every
        HTTP/1.1 stream of this process (``connection_id`` :data:`NO_CONNECTION` for an answer
        relayed from another process)."""
        candidates = [
            a
            for a in self._by_identity.get(fresh.identity, ())
            if a.connection_id == connection_id or (not http2 and not a.http2)
        ]
        if not candidates:
            where = "on this connection" if http2 else "in this process"
            return Answered(0, 0, f"no stream of this identity to extend {where}")
        extended = 0
        refused: str | None = None
        for authorization in candidates:
            for session, _ in authorization.sessions:
                if session.guard != self.guard:
                    continue
                reason = session.extend(fresh)
                if reason is None:
                    extended += 1
                    authorization.schedule()
                else:
                    refused = refused or reason
        return Answered(extended, len(candidates), None if extended else refused)
