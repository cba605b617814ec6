"""The token bucket behind ``opens-per-identity``: pure arithmetic on a (tokens, stamp) pair.

A bucket holds up to ``burst`` tokens and gains ``rate`` tokens a second; opening a stream
takes one. A client may so open ``burst`` streams at once, then ``rate`` a second on average.
When the bucket holds less than one token the answer is how long until it holds one: the
``Retry-After`` of the refusal. Times are seconds of a clock every process shares
(``time.monotonic``, the system-wide ``CLOCK_MONOTONIC`` on Linux).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bucket:
    tokens: float
    stamp: float
    """When ``tokens`` was last brought up to date."""


def take(bucket: Bucket, now: float, rate: float, burst: float) -> tuple[Bucket, float]:
    """Refill ``bucket`` to ``now`` and take one token: ``(bucket after, 0.0)``; or, with less
    than one token there, ``(bucket refilled, seconds until one token is there)``."""
    elapsed = max(0.0, now - bucket.stamp)  # a clock never runs back; a stamp may be ahead
    tokens = min(burst, bucket.tokens + elapsed * rate)
    stamp = max(now, bucket.stamp)
    if tokens >= 1.0:
        return Bucket(tokens - 1.0, stamp), 0.0
    return Bucket(tokens, stamp), (1.0 - tokens) / rate
