"""How long a fetched batch gathers: from what handing the last batches over cost the loop,
and since the batch before it."""

from __future__ import annotations

import math

import pytest

from ssegate.bindings.kafka.fanout_pace import EASE, FANOUT_LINGER_MAX, FANOUT_SHARE, FanoutPace
from ssegate.bindings.kafka.fetcher import gather_for


def test_before_any_batch_each_record_is_handed_over_without_waiting() -> None:
    assert FanoutPace().linger == 0.0


def test_the_linger_keeps_handing_over_to_its_share_of_the_loop() -> None:
    pace = FanoutPace()
    linger = pace.observe(0.002)  # 1,000 streams written in 2 ms
    assert linger == pytest.approx(0.002 / FANOUT_SHARE)
    assert 0.002 / linger <= FANOUT_SHARE


def test_the_linger_is_one_hand_overs_cost_not_more() -> None:
    # 1,000 new clients that never read make a batch cost 4 ms until their windows shut: the
    # live readers' records wait that long at the fetch, not twice it
    assert FanoutPace().observe(0.004) == pytest.approx(0.004)


def test_a_cheap_fan_out_lingers_little_whatever_its_subscriber_count() -> None:
    # 20,000 filtered streams of which a batch reaches a handful: 0.2 ms of loop time
    linger = FanoutPace().observe(0.0002)
    assert linger == pytest.approx(0.0002 / FANOUT_SHARE)
    assert linger < 0.001


def test_a_costlier_batch_raises_the_linger_at_once() -> None:
    pace = FanoutPace()
    pace.observe(0.0005)
    assert pace.observe(0.004) == pytest.approx(0.004 / FANOUT_SHARE)


def test_a_cheaper_batch_lowers_it_only_part_of_the_way() -> None:
    pace = FanoutPace()
    pace.observe(0.005)
    linger = pace.observe(0.0)
    assert linger == pytest.approx(0.005 * (1 - EASE) / FANOUT_SHARE)
    for _ in range(60):
        linger = pace.observe(0.0)
    assert linger < 0.0001  # cheap batches bring it down in the end


def test_the_linger_is_capped_however_costly_the_fan_out() -> None:
    assert FanoutPace().observe(0.05) == FANOUT_LINGER_MAX
    assert FanoutPace().observe(5.0) == FANOUT_LINGER_MAX


def test_a_record_long_after_the_previous_batch_is_handed_over_at_once() -> None:
    assert gather_for(0.02, last_batch=10.0, now=10.5) == 0.0
    assert gather_for(0.02, last_batch=-math.inf, now=0.0) == 0.0


def test_a_record_soon_after_the_previous_batch_gathers_until_a_linger_has_passed() -> None:
    assert gather_for(0.02, last_batch=10.0, now=10.005) == pytest.approx(0.015)
    assert gather_for(0.02, last_batch=10.0, now=10.0) == pytest.approx(0.02)


def test_no_linger_never_gathers() -> None:
    assert gather_for(0.0, last_batch=10.0, now=10.0) == 0.0
