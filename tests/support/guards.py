"""A guard for tests of what bindings do with guards: it accepts a fixed table of credentials."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from ssegate.contract.identity import Authorization, CredentialsRejected, Identity
from ssegate.guards.streams import GuardedStreams


class TableGuard:
    """A :class:`~ssegate.contract.guard.Guard` that knows its credentials by heart."""

    def __init__(
        self,
        name: str,
        accepted: Mapping[str, Identity] | None = None,
        *,
        scheme: str = "Bearer",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.scheme = scheme
        self.accepted = dict(accepted or {})
        self.streams = GuardedStreams(name)
        self.clock = clock

    def authorize(self, credentials: str) -> Authorization:
        found = self.accepted.get(credentials)
        return found if found is not None else CredentialsRejected("unknown credentials")

    def refresh(self) -> asyncio.Future[None] | None:
        return None
