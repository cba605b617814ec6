"""What every guard type shares: a stream put under authorization, and what a guard is built with.

A guard type is one module with a ``build(component, ctx)`` (``ctx`` a :class:`GuardContext`)
returning a :class:`~ssegate.contract.guard.Guard`, registered by its ``type`` in
:data:`ssegate.engine.assembly.GUARD_FACTORIES`. Every guard keeps the streams it authorized in a
:class:`~ssegate.guards.streams.GuardedStreams`; :func:`keep_authorized` puts a stream there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ssegate.config.model import Config
from ssegate.contract.guard import Guard
from ssegate.contract.identity import Identity
from ssegate.guards.session import GuardedSession
from ssegate.guards.streams import AuthorizedSink, GuardedStreams, StreamAuthorization


class GuardContext(Protocol):
    """What a guard type's ``build`` is given besides its component (the runtime)."""

    @property
    def config(self) -> Config:
        """The config the guard is part of."""


def keep_authorized(
    sink: AuthorizedSink,
    grants: Sequence[tuple[Guard, Identity]],
    *,
    connection_id: int,
    http2: bool,
) -> StreamAuthorization:
    """Put a stream under authorization: ``grants`` is each guard with what it established."""
    sessions = [(GuardedSession(guard.name, grant), _kept(guard)) for guard, grant in grants]
    authorization = StreamAuthorization(
        sink, sessions, connection_id=connection_id, http2=http2, clock=grants[0][0].clock
    )
    for session, streams in sessions:
        streams.add(session.identity, authorization)
    authorization.schedule()
    return authorization


def _kept(guard: Guard) -> GuardedStreams:
    """The registry of ``guard``'s streams: a :class:`GuardedStreams`, whatever the guard type."""
    streams = guard.streams
    if not isinstance(streams, GuardedStreams):
        raise TypeError(f"guard {guard.name!r} keeps its streams in {type(streams).__name__}")
    return streams
