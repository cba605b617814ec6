"""How long a fetched batch gathers, as the fan-out grows."""

from __future__ import annotations

from ssegate.bindings.kafka.cache_server import FANOUT_LINGER_MAX, fanout_linger


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
