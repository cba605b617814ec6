"""The :class:`Guard` protocol: what every binding may ask of a built guard, whatever its type.

Modelled on Zilla's guard handlers: credentials go in, an identity with its roles, attributes,
expiry and challenge time comes out (:class:`~ssegate.guards.identity.Identity`), or a
:class:`~ssegate.guards.identity.CredentialsRejected` saying why not. Bindings talk to guards
through this protocol only. A guard type is one module with a ``build(component, ctx)``
returning a :class:`Guard`, registered by its ``type`` in
:data:`ssegate.engine.runtime.GUARD_FACTORIES`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from ssegate.guards.identity import Authorization, Identity
from ssegate.guards.session import GuardedSession
from ssegate.guards.streams import AuthorizedSink, GuardedStreams, StreamAuthorization


class Guard(Protocol):
    """One built guard of the config."""

    @property
    def name(self) -> str:
        """The guard's name in ``guards``."""

    @property
    def scheme(self) -> str:
        """The HTTP authentication scheme a refusal names in ``www-authenticate`` (``Bearer``)."""

    @property
    def streams(self) -> GuardedStreams:
        """The streams this guard keeps authorized (challenges, answers, the end at expiry)."""

    @property
    def clock(self) -> Callable[[], float]:
        """The guard's time, seconds since the epoch: what expiry and challenges are due on."""

    def authorize(self, credentials: str) -> Authorization:
        """What ``credentials`` establish now. Synchronous: no I/O, never raises for bad
        credentials (it answers :class:`~ssegate.guards.identity.CredentialsRejected`)."""

    def refresh(self) -> asyncio.Future[None] | None:
        """After a rejection marked ``refreshable``: a refresh of what the guard verifies with
        (its keys) worth waiting for before authorizing once more, or ``None``."""


def keep_authorized(
    sink: AuthorizedSink,
    grants: Sequence[tuple[Guard, Identity]],
    *,
    connection_id: int,
    http2: bool,
) -> StreamAuthorization:
    """Put a stream under authorization: ``grants`` is each guard with what it established."""
    sessions = [(GuardedSession(guard.name, grant), guard.streams) for guard, grant in grants]
    authorization = StreamAuthorization(
        sink, sessions, connection_id=connection_id, http2=http2, clock=grants[0][0].clock
    )
    for session, streams in sessions:
        streams.add(session.identity, authorization)
    authorization.schedule()
    return authorization
