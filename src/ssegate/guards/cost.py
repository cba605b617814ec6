"""What verifying a token costs per connect: a cold cache (signature check) and a warm one.

:func:`authenticate_cost` signs ``count`` tokens with a fresh key of one kind and times
:meth:`~ssegate.guards.jwt_guard.JwtGuard.authenticate`: cold is a token never seen (parse,
signature, claims), warm is the same token again (a dict lookup). :func:`verification_cost`
does that for each kind in :data:`KINDS`; ``ssegate bench jwt`` calls it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from ssegate.guards.jwks import KeySet
from ssegate.guards.jwt import ClaimsPolicy, JwtKey
from ssegate.guards.jwt_guard import JwtGuard
from ssegate.tools.token import generate_key, mint, public_jwk

KINDS = {"rsa": "RS256", "ec": "ES256", "ed25519": "EdDSA"}
"""Key kind → the algorithm its tokens are signed with."""


def authenticate_cost(
    kind: str, count: int, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, float]:
    """Microseconds per authenticate of ``count`` fresh ``kind`` tokens: (cold, warm).

    ``clock`` is wall time by default; ``time.thread_time`` counts only this thread's CPU,
    which a busy machine disturbs far less.
    """
    key = generate_key(kind)
    guard = JwtGuard("bench", KeySet({"k": JwtKey.from_jwk(public_jwk(key, "k"))}), ClaimsPolicy())
    tokens = [mint(key, kid="k", sub=f"user{n}", ttl=600) for n in range(count)]
    started = clock()
    for token in tokens:
        guard.authenticate(token)
    cold = clock() - started
    started = clock()
    for token in tokens:
        guard.authenticate(token)
    warm = clock() - started
    return cold / count * 1e6, warm / count * 1e6


def verification_cost(count: int = 200, runs: int = 1) -> dict[str, dict[str, float]]:
    """Median over ``runs`` of µs per authenticate, by kind: ``{"ec": {"cold_us": ..}}``."""
    results: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        cold, warm = zip(*(authenticate_cost(kind, count) for _ in range(runs)), strict=True)
        results[kind] = {"cold_us": statistics.median(cold), "warm_us": statistics.median(warm)}
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(verification_cost(), indent=2))
