"""``x-ssegate-quotas`` read into a :class:`QuotaPolicy`, and decided by a :class:`QuotaBook`.

:func:`parse_policy` checks what the schema cannot say (networks, durations, which keys go
together) and names the YAML path of what it refuses. :class:`QuotaBook` decides one stream:
its client address and the identities its credentials established are counted in the shared
tables (:mod:`ssegate.quotas.shared`), all under one lock, so across every worker either the
stream takes one slot of each quota or it takes none and gets a :class:`QuotaRefusal`. The
concurrency quotas are checked first; the opening rate only for a stream they let through (a
refused stream spends no token), and a stream the rate refuses gives its slots back at once.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ssegate.config.errors import ConfigError
from ssegate.quotas.address import IpNetwork, trusted_networks
from ssegate.quotas.shared import QuotaMemory
from ssegate.quotas.table import ADMITTED, FULL, digest

STREAMS_PER_IDENTITY = "streams-per-identity"
STREAMS_PER_ADDRESS = "streams-per-address"
OPENS_PER_IDENTITY = "opens-per-identity"
TABLE_FULL = "table-full"
CONCURRENCY_RETRY_AFTER = 5
"""``Retry-After`` seconds of a concurrency refusal: a slot frees when a stream ends, which no
one can foretell; a few seconds lets the client's other streams end or move."""

_PERIOD = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True, slots=True)
class OpenRate:
    rate: float
    """Tokens a second."""
    burst: float
    spelled: str
    """As configured, for messages: ``10 per 1s, burst 20``."""


@dataclass(frozen=True, slots=True)
class QuotaPolicy:
    streams_per_identity: int | None = None
    streams_per_address: int | None = None
    opens_per_identity: OpenRate | None = None
    trusted_proxies: tuple[IpNetwork, ...] = ()


@dataclass(frozen=True, slots=True)
class QuotaRefusal:
    quota: str
    """Which quota: :data:`STREAMS_PER_ADDRESS`, ..., :data:`TABLE_FULL`."""
    status: int
    retry_after: int
    reason: str
    """The body of the answer and the log line's reason."""
    key: str
    """The address or identity over its quota (for the log)."""


def parse_period(value: Any, where: str) -> float:
    """``per``: seconds as a number, or ``500ms``, ``1s``, ``2m``, ``1h``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _PERIOD.match(str(value))
        if match is None:
            raise ConfigError(where, f"'{value}' is not a duration (500ms, 1s, 2m, 1h)")
        seconds = float(match[1]) * _UNIT[match[2]]
    if not seconds > 0 or math.isinf(seconds):
        raise ConfigError(where, "must be a duration over zero")
    return seconds


def parse_policy(options: Mapping[str, Any], where: str) -> QuotaPolicy:
    """``options.x-ssegate-quotas`` (schema-checked) as a policy; ConfigError at its path."""
    rate: OpenRate | None = None
    opens = options.get(OPENS_PER_IDENTITY)
    if opens is not None:
        per = parse_period(opens.get("per", 1), f"{where}.{OPENS_PER_IDENTITY}.per")
        count = float(opens["rate"])
        burst = float(opens.get("burst", count))
        if burst < 1:
            given = "" if "burst" in opens else f" (without one it is the rate, {opens['rate']})"
            raise ConfigError(f"{where}.{OPENS_PER_IDENTITY}.burst", f"must be at least 1{given}")
        spelled = f"{opens['rate']} per {opens.get('per', 1)}, burst {opens.get('burst', count)}"
        rate = OpenRate(count / per, burst, spelled)
    trusted: tuple[IpNetwork, ...] = ()
    proxies = options.get("trusted-proxies")
    if proxies is not None:
        for i, entry in enumerate(proxies):
            try:
                trusted_networks([entry])
            except ValueError as exc:
                raise ConfigError(f"{where}.trusted-proxies[{i}]", str(exc)) from None
        trusted = trusted_networks(proxies)
        if options.get(STREAMS_PER_ADDRESS) is None:
            raise ConfigError(
                f"{where}.trusted-proxies", f"is read only to count {STREAMS_PER_ADDRESS}"
            )
    policy = QuotaPolicy(
        streams_per_identity=options.get(STREAMS_PER_IDENTITY),
        streams_per_address=options.get(STREAMS_PER_ADDRESS),
        opens_per_identity=rate,
        trusted_proxies=trusted,
    )
    if (policy.streams_per_identity, policy.streams_per_address, rate) == (None, None, None):
        raise ConfigError(where, "names no quota (streams-per-identity, streams-per-address, ...)")
    return policy


class QuotaBook:
    """One binding's quotas over the shared tables: :meth:`admit` a stream, :meth:`release`
    what it holds once it ends."""

    def __init__(
        self,
        binding: str,
        policy: QuotaPolicy,
        memory: QuotaMemory,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.binding = binding
        self.policy = policy
        self.memory = memory
        self.clock = clock

    def admit(self, address: str, identities: list[str]) -> tuple[list[bytes], QuotaRefusal | None]:
        """Count a stream from ``address`` whose credentials established ``identities``
        (``guard identity``): the keys it holds, to hand to :meth:`release`; or a refusal."""
        policy = self.policy
        limits: list[tuple[bytes, int, str, str]] = []
        if policy.streams_per_address is not None:
            key = digest(f"{self.binding}\0address\0{address}")
            limits.append((key, policy.streams_per_address, STREAMS_PER_ADDRESS, address))
        if policy.streams_per_identity is not None:
            for identity in identities:
                key = digest(f"{self.binding}\0identity\0{identity}")
                limits.append((key, policy.streams_per_identity, STREAMS_PER_IDENTITY, identity))
        held = [key for key, *_ in limits]
        rate = policy.opens_per_identity
        with self.memory.locked() as memory:
            outcome = memory.counters.acquire([(key, limit) for key, limit, *_ in limits])
            if outcome == FULL:
                return [], _table_full(address)
            if outcome != ADMITTED:
                _, limit, quota, who = limits[outcome]
                reason = f"too many streams: the {quota} quota ({limit}) is reached"
                return [], QuotaRefusal(quota, 429, CONCURRENCY_RETRY_AFTER, reason, who)
            if rate is None:
                return held, None
            now = self.clock()
            for identity in identities:
                key = digest(f"{self.binding}\0opens\0{identity}")
                wait = memory.buckets.take(key, now, rate.rate, rate.burst)
                if wait is None or wait > 0:
                    memory.counters.release(held)
                    if wait is None:
                        return [], _table_full(identity)
                    reason = (
                        f"too many streams opened: the {OPENS_PER_IDENTITY} quota"
                        f" ({rate.spelled}) is reached"
                    )
                    retry = max(1, math.ceil(wait))
                    return [], QuotaRefusal(OPENS_PER_IDENTITY, 429, retry, reason, identity)
        return held, None

    def release(self, held: list[bytes]) -> None:
        """The stream that :meth:`admit` counted with ``held`` ended."""
        if held:
            with self.memory.locked() as memory:
                memory.counters.release(held)


def _table_full(key: str) -> QuotaRefusal:
    reason = "the quota table is full: no slot to count another client in"
    return QuotaRefusal(TABLE_FULL, 503, CONCURRENCY_RETRY_AFTER, reason, key)
