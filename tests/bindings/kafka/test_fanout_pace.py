"""How long a fetched batch gathers, as the fan-out grows, and since the batch before it."""

from __future__ import annotations

import math

import pytest

from ssegate.bindings.kafka.cache_server import FANOUT_LINGER_MAX, fanout_linger
from ssegate.bindings.kafka.fetcher import gather_for


def test_one_subscriber_gets_each_record_without_waiting() -> None:
    assert fanout_linger(0) == 0.0
    assert fanout_linger(1) == 0.0


def test_the_linger_grows_with_the_subscribers_to_keep_writes_per_second_bounded() -> None:
    assert fanout_linger(100) == 0.002
    assert fanout_linger(500) == 0.01
    assert fanout_linger(100) < fanout_linger(300) < fanout_linger(500)


def test_the_linger_is_capped_however_many_subscribers() -> None:
    assert fanout_linger(10_000) == FANOUT_LINGER_MAX
    assert fanout_linger(1_000_000) == FANOUT_LINGER_MAX


def test_a_record_long_after_the_previous_batch_is_handed_over_at_once() -> None:
    assert gather_for(0.02, last_batch=10.0, now=10.5) == 0.0
    assert gather_for(0.02, last_batch=-math.inf, now=0.0) == 0.0


def test_a_record_soon_after_the_previous_batch_gathers_until_a_linger_has_passed() -> None:
    assert gather_for(0.02, last_batch=10.0, now=10.005) == pytest.approx(0.015)
    assert gather_for(0.02, last_batch=10.0, now=10.0) == pytest.approx(0.02)


def test_no_linger_never_gathers() -> None:
    assert gather_for(0.0, last_batch=10.0, now=10.0) == 0.0
