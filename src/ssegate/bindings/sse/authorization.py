"""Continuous authorization of guarded SSE streams: challenge events, answers, the end at ``exp``.

A GET on a guarded route that passes its guards gets a :class:`StreamAuthorization`: one
:class:`~ssegate.guards.session.GuardedSession` per guard of the route, and one timer for the
earliest step due. At ``exp - challenge`` the stream is sent the challenge event; at ``exp``
without an extension it ends (HTTP/1.1: the connection closes; HTTP/2: ``RST_STREAM(NO_ERROR)``).
It never falls back to anonymous.

A challenge answer is a POST to the stream's URL with ``content-type:
application/x-challenge-response`` and a fresh token carried like the first. The http server
has verified it by then; :meth:`AuthorizedStreams.answer` finds the sessions it may extend:

- HTTP/2: the streams of the same identity on the **same connection** (Zilla: sessions are per
  connection and identity), so one answer extends every such stream on it;
- HTTP/1.1: the streaming connection is busy, so a browser sends the answer on another one.
  The answer extends the HTTP/1.1 streams of this worker process with the same guard and
  identity whose current token the fresh one supersedes (later ``exp``, roles not narrower).
  A token of that identity could open a stream of its own, so this grants nothing new.

The answer is 204 when at least one stream was extended; otherwise 403 with the reason (for
example: the identity differs, the ``exp`` is not later, or, with several worker processes, the
answer reached a process that does not hold the stream), so the client knows to reconnect with
its fresh token instead of waiting to be cut off.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from ssegate.guards.jwt import JwtIdentity
from ssegate.guards.session import CHALLENGE_DATA, CHALLENGE_EVENT, Due, GuardedSession


class AuthorizedSink(Protocol):
    """What a stream under authorization needs from the sse server's downstream stream."""

    def event(self, data: str | None, *, event: str | None = None, id: str | None = None) -> None:
        """Send one event."""

    def expire(self, reason: str) -> None:
        """End the stream because its authorization ran out."""


class StreamAuthorization:
    """Keeps one SSE stream authorized, or ends it."""

    __slots__ = ("_handle", "_registry", "connection_id", "http2", "sessions", "sink")

    def __init__(
        self,
        registry: AuthorizedStreams,
        sink: AuthorizedSink,
        sessions: list[GuardedSession],
        *,
        connection_id: int,
        http2: bool,
    ) -> None:
        self._registry = registry
        self.sink = sink
        self.sessions = sessions
        self.connection_id = connection_id
        self.http2 = http2
        self._handle: asyncio.TimerHandle | None = None

    def schedule(self) -> None:
        """(Re)arm the timer for the earliest step due."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self.sessions:
            return
        at = min(session.deadline()[0] for session in self.sessions)
        delay = max(0.0, at - self._registry.clock())
        self._handle = asyncio.get_running_loop().call_later(delay, self.step)

    def step(self) -> None:
        """Do what is due now: a challenge event, or the end of the stream."""
        self._handle = None
        now = self._registry.clock()
        challenged = False
        for session in self.sessions:
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
        """The stream closed: stop the timer and leave the registry."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._registry.discard(self)


class AuthorizedStreams:
    """An sse server's guarded streams, found by guard and identity for challenge answers."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._by_identity: dict[tuple[str, str], set[StreamAuthorization]] = {}

    def __len__(self) -> int:
        return len({a for members in self._by_identity.values() for a in members})

    def start(
        self,
        sink: AuthorizedSink,
        grants: Mapping[str, tuple[JwtIdentity, float]],
        *,
        connection_id: int,
        http2: bool,
    ) -> StreamAuthorization:
        """Put a stream under authorization: ``grants`` is guard → (identity, challenge)."""
        sessions = [GuardedSession(g, grant, challenge) for g, (grant, challenge) in grants.items()]
        authorization = StreamAuthorization(
            self, sink, sessions, connection_id=connection_id, http2=http2
        )
        for session in sessions:
            self._by_identity.setdefault((session.guard, session.identity), set()).add(
                authorization
            )
        authorization.schedule()
        return authorization

    def discard(self, authorization: StreamAuthorization) -> None:
        for session in authorization.sessions:
            key = (session.guard, session.identity)
            members = self._by_identity.get(key)
            if members is not None:
                members.discard(authorization)
                if not members:
                    del self._by_identity[key]

    def answer(
        self, guard: str, fresh: JwtIdentity, *, connection_id: int, http2: bool
    ) -> tuple[int, str | None]:
        """Extend what ``fresh`` may extend; returns (streams extended, why none was)."""
        candidates = [
            a
            for a in self._by_identity.get((guard, fresh.identity), ())
            if a.connection_id == connection_id or (not http2 and not a.http2)
        ]
        if not candidates:
            return 0, "no stream of this identity to extend on this connection"
        extended = 0
        refused: str | None = None
        for authorization in candidates:
            for session in authorization.sessions:
                if session.guard != guard:
                    continue
                reason = session.extend(fresh)
                if reason is None:
                    extended += 1
                    authorization.schedule()
                else:
                    refused = refused or reason
        return extended, None if extended else refused
