"""Warnings a flood could repeat thousands of times a second, written at most once a period.

A refusal a client can provoke at will (a stream over its quota) must be logged, but one line per
refusal would let one client flood the log. :class:`QuietLog` writes the first warning of each
key, then nothing for that key until ``every`` seconds have passed; the next line it writes says
how many it left out since (``unlogged``). Metrics count every occurrence; the log only shows
that it happens, and how often.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ssegate.telemetry import log

QUIET_SECONDS = 10.0


class QuietLog:
    """At most one warning per key per ``every`` seconds (see the module doc)."""

    __slots__ = ("_clock", "_every", "_quiet_until", "_unlogged")

    def __init__(
        self, every: float = QUIET_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._every = every
        self._clock = clock
        self._quiet_until: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def warning(self, event: str, key: str, /, *, binding: str = "", **fields: Any) -> bool:
        """Write warning ``event`` unless ``key`` was written less than ``every`` seconds ago;
        True when it was written. Keys are few (a quota's name, a reason), never a client's."""
        now = self._clock()
        if now < self._quiet_until.get(key, 0.0):
            self._unlogged[key] = self._unlogged.get(key, 0) + 1
            return False
        self._quiet_until[key] = now + self._every
        log.warning(event, binding=binding, **fields, unlogged=self._unlogged.pop(key, 0))
        return True
