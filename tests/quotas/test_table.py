"""The fixed-size tables: counts per key, all or none, bounded, and token buckets, over a plain
buffer (the shared mapping is only where the buffer lives)."""

from __future__ import annotations

from ssegate.quotas.table import ADMITTED, FULL, PROBE, BucketTable, CounterTable, digest


def counters(capacity: int) -> CounterTable:
    return CounterTable(memoryview(bytearray(CounterTable.size(capacity, 4))), capacity)


def buckets(capacity: int) -> BucketTable:
    return BucketTable(memoryview(bytearray(BucketTable.size(capacity, 32))), capacity)


def test_a_key_is_admitted_up_to_its_limit_and_the_next_is_refused_naming_it() -> None:
    table = counters(64)
    key = digest("address 10.0.0.1")
    assert [table.acquire([(key, 3)]) for _ in range(4)] == [ADMITTED] * 3 + [0]
    assert table.count(key) == 3


def test_a_refusal_counts_nothing_for_the_keys_before_it() -> None:
    table = counters(64)
    address, identity = digest("address 10.0.0.1"), digest("identity alice")
    assert table.acquire([(identity, 1)]) == ADMITTED
    assert table.acquire([(address, 10), (identity, 1)]) == 1
    assert table.count(address) == 0 and table.keys() == 1


def test_a_released_slot_is_forgotten_at_zero_and_its_place_reused() -> None:
    table = counters(64)
    key = digest("identity alice")
    table.acquire([(key, 5)])
    table.acquire([(key, 5)])
    table.release([key])
    assert table.count(key) == 1
    table.release([key])
    assert table.count(key) == 0 and table.keys() == 0
    assert table.acquire([(key, 1)]) == ADMITTED and table.keys() == 1


def test_releasing_a_key_that_holds_nothing_changes_nothing() -> None:
    table = counters(64)
    table.release([digest("nobody")])
    assert table.keys() == 0


def test_many_keys_in_a_small_table_each_keep_their_own_count() -> None:
    table = counters(256)
    keys = [digest(f"address 10.0.{n // 256}.{n % 256}") for n in range(200)]
    for n, key in enumerate(keys):
        for _ in range(n % 3 + 1):
            assert table.acquire([(key, 10)]) == ADMITTED
    assert [table.count(key) for key in keys] == [n % 3 + 1 for n in range(200)]


def test_a_full_table_refuses_a_new_key_and_takes_it_once_a_slot_frees() -> None:
    table = counters(PROBE)
    held = [digest(f"k{n}") for n in range(PROBE)]
    assert all(table.acquire([(key, 1)]) == ADMITTED for key in held)
    newcomer = digest("one more")
    assert table.acquire([(newcomer, 1)]) == FULL
    assert table.keys() == PROBE
    table.release([held[7]])
    assert table.acquire([(newcomer, 1)]) == ADMITTED


def test_a_new_bucket_starts_full_and_refuses_once_its_burst_is_spent() -> None:
    table = buckets(64)
    key = digest("opens alice")
    waits = [table.take(key, 50.0, rate=1.0, burst=2.0) for _ in range(3)]
    assert waits == [0.0, 0.0, 1.0]
    assert table.take(key, 51.0, rate=1.0, burst=2.0) == 0.0


def test_a_full_bucket_table_evicts_buckets_that_have_refilled_but_not_others() -> None:
    table = buckets(PROBE)
    for n in range(PROBE):
        assert table.take(digest(f"k{n}"), 10.0, rate=1.0, burst=1.0) == 0.0
    assert table.take(digest("newcomer"), 10.5, rate=1.0, burst=1.0) is None
    assert table.take(digest("newcomer"), 11.0, rate=1.0, burst=1.0) == 0.0
