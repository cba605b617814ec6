"""The :class:`Guard` protocol: what every binding may ask of a built guard, whatever its type.

Modelled on Zilla's guard handlers: credentials go in, an identity with its roles, attributes,
expiry and challenge time comes out (:class:`~ssegate.contract.identity.Identity`), or a
:class:`~ssegate.contract.identity.CredentialsRejected` saying why not. Bindings talk to guards
through this protocol only. A guard type is one module of :mod:`ssegate.guards` with a
``build(component, ctx)`` returning a :class:`Guard`, registered by its ``type`` in
:data:`ssegate.engine.assembly.GUARD_FACTORIES`.

A guard keeps the streams it authorized (:attr:`Guard.streams`); what the layers above ask of
them is :class:`GuardStreams`: a challenge answer extends them (:class:`Answered`), and an
HTTP/1.1 answer also goes to the other processes sharing the listening address
(:class:`AnswerForwarding`, :class:`RelayedAnswer`). :mod:`ssegate.guards.streams` implements it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ssegate.contract.identity import Authorization, Identity


@dataclass(frozen=True, slots=True)
class Answered:
    """What one challenge answer did to the streams of one guard in one process."""

    extended: int
    """Streams whose session it extended."""
    held: int
    """Streams it could have extended: same identity, and same connection (HTTP/2) or HTTP/1.1."""
    reason: str | None
    """Why none was extended; ``None`` when one was."""


@dataclass(frozen=True, slots=True)
class RelayedAnswer:
    """What an HTTP/1.1 challenge answer did in every process that was asked."""

    extended: int
    """Streams extended, here and elsewhere."""
    relayed: int
    """Of those, streams other processes extended."""
    reason: str | None
    """Why none was extended; ``None`` when one was."""


class AnswerForwarding(Protocol):
    """Where an HTTP/1.1 answer also goes: the other processes sharing the listening address
    (:class:`~ssegate.guards.relay.AnswerRelay`)."""

    def relay(
        self, guard: str, token: str, fresh: Identity, here: Answered
    ) -> asyncio.Future[RelayedAnswer]:
        """Send ``token`` (which established ``fresh``; ``here`` is what it did in this
        process) to the other processes; the future is the answer's outcome everywhere."""


class GuardStreams(Protocol):
    """The streams one guard keeps authorized, as a challenge answer reaches them
    (:class:`~ssegate.guards.streams.GuardedStreams`)."""

    relay: AnswerForwarding | None
    """Where HTTP/1.1 answers also go, when the gateway's ports are shared with other
    processes."""

    def answer(self, fresh: Identity, *, connection_id: int, http2: bool) -> Answered:
        """Extend what ``fresh`` may extend: the HTTP/2 streams of ``connection_id``, or every
        HTTP/1.1 stream of this process."""


class Guard(Protocol):
    """One built guard of the config."""

    @property
    def name(self) -> str:
        """The guard's name in ``guards``."""

    @property
    def scheme(self) -> str:
        """The HTTP authentication scheme a refusal names in ``www-authenticate`` (``Bearer``)."""

    @property
    def streams(self) -> GuardStreams:
        """The streams this guard keeps authorized (challenges, answers, the end at expiry)."""

    @property
    def clock(self) -> Callable[[], float]:
        """The guard's time, seconds since the epoch: what expiry and challenges are due on."""

    def authorize(self, credentials: str) -> Authorization:
        """What ``credentials`` establish now. Synchronous: no I/O, never raises for bad
        credentials (it answers :class:`~ssegate.contract.identity.CredentialsRejected`)."""

    def refresh(self) -> asyncio.Future[None] | None:
        """After a rejection marked ``refreshable``: a refresh of what the guard verifies with
        (its keys) worth waiting for before authorizing once more, or ``None``."""
