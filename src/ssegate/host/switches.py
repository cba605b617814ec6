"""The switches that turn the host's tuning off, one each and one for all (pure).

A switch is an environment variable, read when the piece it guards is installed (the
process's start), so the workers of one ``start`` agree. :data:`ALL` set to ``off`` turns
every piece off, whatever its own variable says.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

ALL = "SSEGATE_HOST_TUNING"
"""``off``: every piece of host tuning off."""


@dataclass(frozen=True, slots=True)
class Switch:
    """One piece's environment variable and the value that turns the piece off."""

    variable: str
    off: str

    def on(self, environ: Mapping[str, str] | None = None) -> bool:
        """Whether the piece runs, given ``environ`` (this process's by default)."""
        env = os.environ if environ is None else environ
        return env.get(ALL) != "off" and env.get(self.variable) != self.off


GC = Switch("SSEGATE_GC", "python")
"""The collection schedule of :mod:`ssegate.host.collector`; off: CPython's own."""
ALLOCATOR = Switch("SSEGATE_ALLOCATOR", "python")
"""jemalloc under the process (:mod:`ssegate.host.allocator`); off: CPython's allocator."""
TURNS = Switch("SSEGATE_TURNS", "off")
"""The loop turn's budget for new requests (:mod:`ssegate.host.turns`); off: each at once."""
SHARED_FETCH = Switch("SSEGATE_SHARED_FETCH", "off")
"""One Kafka fetch per host (:mod:`ssegate.host.worker_links`); off: one per worker."""

EVERY = (GC, ALLOCATOR, TURNS, SHARED_FETCH)
