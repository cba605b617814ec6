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
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ssegate.guards.identity import Authorization

if TYPE_CHECKING:
    from ssegate.guards.streams import GuardedStreams


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
