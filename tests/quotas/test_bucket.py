"""The opening rate's token bucket: burst at once, then the rate, and how long to wait."""

from __future__ import annotations

import pytest

from ssegate.quotas.bucket import Bucket, take


def test_a_full_bucket_allows_burst_openings_at_once_then_says_how_long_to_wait() -> None:
    bucket = Bucket(3.0, 100.0)
    waits = []
    for _ in range(4):
        bucket, wait = take(bucket, 100.0, rate=2.0, burst=3.0)
        waits.append(wait)
    assert waits == [0.0, 0.0, 0.0, 0.5]


def test_tokens_come_back_at_the_rate_and_never_past_the_burst() -> None:
    bucket, _ = take(Bucket(0.0, 0.0), 0.25, rate=2.0, burst=3.0)
    assert bucket.tokens == pytest.approx(0.5)
    bucket, wait = take(bucket, 0.5, rate=2.0, burst=3.0)
    assert wait == 0.0 and bucket.tokens == pytest.approx(0.0)
    bucket, wait = take(bucket, 1000.0, rate=2.0, burst=3.0)
    assert wait == 0.0 and bucket.tokens == pytest.approx(2.0)


def test_a_clock_behind_the_stamp_adds_no_tokens() -> None:
    bucket, wait = take(Bucket(0.0, 10.0), 9.0, rate=1.0, burst=1.0)
    assert wait == pytest.approx(1.0) and bucket.stamp == 10.0
