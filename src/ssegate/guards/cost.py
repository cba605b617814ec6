"""What verifying a token costs per connect: a cold cache (signature check) and a warm one.

``verification_cost()`` signs tokens with a fresh key of each kind and times
:meth:`~ssegate.guards.jwt_guard.JwtGuard.authenticate`: cold is a token never seen (parse,
signature, claims), warm is the same token again (a dict lookup). ``ssegate bench`` can call it.
"""

from __future__ import annotations

import time

from ssegate.guards.jwks import KeySet
from ssegate.guards.jwt import ClaimsPolicy, JwtKey
from ssegate.guards.jwt_guard import JwtGuard
from ssegate.tools.token import generate_key, mint, public_jwk


def verification_cost(count: int = 200) -> dict[str, dict[str, float]]:
    """Microseconds per authenticate, by key kind: ``{"ec": {"cold_us": .., "warm_us": ..}}``."""
    results: dict[str, dict[str, float]] = {}
    for kind in ("rsa", "ec", "ed25519"):
        key = generate_key(kind)
        guard = JwtGuard(
            "bench", KeySet({"k": JwtKey.from_jwk(public_jwk(key, "k"))}), ClaimsPolicy()
        )
        tokens = [mint(key, kid="k", sub=f"user{n}", ttl=600) for n in range(count)]
        started = time.perf_counter()
        for token in tokens:
            guard.authenticate(token)
        cold = time.perf_counter() - started
        started = time.perf_counter()
        for token in tokens:
            guard.authenticate(token)
        warm = time.perf_counter() - started
        results[kind] = {"cold_us": cold / count * 1e6, "warm_us": warm / count * 1e6}
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(verification_cost(), indent=2))
