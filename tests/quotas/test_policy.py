"""``x-ssegate-quotas`` read and decided: which quota refuses, with what status and wait, and
that a refused or ended stream holds nothing."""

from __future__ import annotations

import pytest

from ssegate.config.errors import ConfigError
from ssegate.quotas.policy import (
    OPENS_PER_IDENTITY,
    STREAMS_PER_ADDRESS,
    STREAMS_PER_IDENTITY,
    TABLE_FULL,
    QuotaBook,
    parse_period,
    parse_policy,
)
from ssegate.quotas.shared import QuotaMemory
from ssegate.quotas.table import PROBE

WHERE = "bindings.sse.options.x-ssegate-quotas"


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def book(options: dict[str, object], clock: Clock | None = None, slots: int = 256) -> QuotaBook:
    memory = QuotaMemory(counter_slots=slots, bucket_slots=slots)
    return QuotaBook("sse", parse_policy(options, WHERE), memory, clock or Clock())


def test_the_address_quota_refuses_with_429_and_a_small_fixed_retry_after() -> None:
    quotas = book({STREAMS_PER_ADDRESS: 2})
    assert quotas.admit("10.0.0.1", [])[1] is None
    assert quotas.admit("10.0.0.1", [])[1] is None
    held, refusal = quotas.admit("10.0.0.1", [])
    assert held == [] and refusal is not None
    assert (refusal.quota, refusal.status, refusal.retry_after) == (STREAMS_PER_ADDRESS, 429, 5)
    assert "streams-per-address quota (2)" in refusal.reason
    assert quotas.admit("10.0.0.2", [])[1] is None


def test_the_identity_quota_counts_each_identity_apart_from_its_addresses() -> None:
    quotas = book({STREAMS_PER_IDENTITY: 1, STREAMS_PER_ADDRESS: 10})
    assert quotas.admit("10.0.0.1", ["g alice"])[1] is None
    _, refusal = quotas.admit("10.0.0.2", ["g alice"])
    assert refusal is not None and refusal.quota == STREAMS_PER_IDENTITY
    assert refusal.key == "g alice"
    assert quotas.admit("10.0.0.1", ["g bob"])[1] is None
    assert quotas.admit("10.0.0.1", [])[1] is None  # no credentials: the address alone


def test_a_released_stream_gives_its_slots_back() -> None:
    quotas = book({STREAMS_PER_IDENTITY: 1, STREAMS_PER_ADDRESS: 1})
    held, _ = quotas.admit("10.0.0.1", ["g alice"])
    assert quotas.admit("10.0.0.1", ["g alice"])[1] is not None
    quotas.release(held)
    assert quotas.admit("10.0.0.1", ["g alice"])[1] is None


def test_the_opening_rate_refuses_past_the_burst_with_the_refill_time_and_holds_nothing() -> None:
    clock = Clock()
    quotas = book(
        {STREAMS_PER_ADDRESS: 100, OPENS_PER_IDENTITY: {"rate": 1, "per": "4s", "burst": 2}},
        clock,
    )
    assert quotas.admit("10.0.0.1", ["g alice"])[1] is None
    assert quotas.admit("10.0.0.1", ["g alice"])[1] is None
    _, refusal = quotas.admit("10.0.0.1", ["g alice"])
    assert refusal is not None
    assert (refusal.quota, refusal.status, refusal.retry_after) == (OPENS_PER_IDENTITY, 429, 4)
    with quotas.memory.locked() as memory:  # the refused stream's address slot was given back
        assert memory.counters.keys() == 1
    clock.now += 4
    assert quotas.admit("10.0.0.1", ["g alice"])[1] is None
    assert quotas.admit("10.0.0.1", [])[1] is None  # the rate is per identity only


def test_a_full_table_refuses_with_503_rather_than_grow() -> None:
    quotas = book({STREAMS_PER_ADDRESS: 1}, slots=PROBE)
    for n in range(PROBE):
        assert quotas.admit(f"10.0.0.{n}", [])[1] is None
    _, refusal = quotas.admit("10.0.1.1", [])
    assert refusal is not None and (refusal.quota, refusal.status) == (TABLE_FULL, 503)


@pytest.mark.parametrize(
    ("value", "seconds"), [(2, 2.0), (0.5, 0.5), ("500ms", 0.5), ("1s", 1.0), ("2m", 120.0)]
)
def test_periods_read_as_seconds(value: object, seconds: float) -> None:
    assert parse_period(value, "per") == seconds


@pytest.mark.parametrize(
    ("options", "path", "message"),
    [
        (
            {"trusted-proxies": ["10.0.0.1/8"], STREAMS_PER_ADDRESS: 1},
            ".trusted-proxies[0]",
            "bits",
        ),
        ({"trusted-proxies": ["nowhere"], STREAMS_PER_ADDRESS: 1}, ".trusted-proxies[0]", "not"),
        ({"trusted-proxies": ["10.0.0.0/8"], STREAMS_PER_IDENTITY: 1}, ".trusted-proxies", "read"),
        ({OPENS_PER_IDENTITY: {"rate": 1, "per": "0s"}}, ".opens-per-identity.per", "over zero"),
        ({OPENS_PER_IDENTITY: {"rate": 0.5}}, ".opens-per-identity.burst", "at least 1"),
        ({"trusted-proxies": []}, ".trusted-proxies", "read only"),
    ],
)
def test_what_the_schema_cannot_say_is_refused_at_its_path(
    options: dict[str, object], path: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        parse_policy(options, WHERE)
    assert refused.value.path == WHERE + path
