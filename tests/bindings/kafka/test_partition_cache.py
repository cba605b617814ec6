"""The per-partition cache on its own: bounds, compaction, reading from an offset."""

from __future__ import annotations

from ssegate.bindings.kafka.partition_cache import PartitionCache, message_size
from ssegate.kafka.topics import KafkaMessage


def msg(offset: int, key: bytes | None = None, value: bytes | None = b"v") -> KafkaMessage:
    return KafkaMessage("t", 0, offset, key, value)


def filled(count: int, **options: object) -> PartitionCache:
    cache = PartitionCache(0, 0, **options)  # type: ignore[arg-type]
    cache.append([msg(n, value=b"x" * 10) for n in range(count)], now=0.0)
    return cache


def test_reading_from_an_offset_returns_that_message_and_the_rest_in_order() -> None:
    cache = filled(10)
    messages, after = cache.read_from(4)
    assert [m.offset for m in messages] == [4, 5, 6, 7, 8, 9]
    assert after == 10 == cache.next_offset


def test_a_limited_read_says_where_to_continue() -> None:
    cache = filled(10)
    first, after = cache.read_from(0, limit=3)
    rest, end = cache.read_from(after)
    assert [m.offset for m in first] == [0, 1, 2] and after == 3
    assert [m.offset for m in rest] == list(range(3, 10)) and end == 10


def test_the_byte_bound_evicts_the_oldest_and_moves_the_start() -> None:
    one = message_size(msg(0, value=b"x" * 10))
    cache = filled(10, max_bytes=one * 4)
    assert len(cache) == 4
    assert cache.start_offset == 6
    assert cache.bytes == one * 4
    assert [m.offset for m in cache.read_from(cache.start_offset)[0]] == [6, 7, 8, 9]


def test_the_age_bound_evicts_what_arrived_too_long_ago() -> None:
    cache = PartitionCache(0, 0, max_age=10.0)
    cache.append([msg(0), msg(1)], now=0.0)
    cache.append([msg(2)], now=8.0)
    evicted = cache.evict(now=11.0)
    assert evicted.messages == 2
    assert cache.start_offset == 2
    assert cache.evict(now=100.0).messages == 1
    assert cache.start_offset == cache.next_offset == 3


def test_a_compacted_cache_keeps_the_latest_value_per_key() -> None:
    cache = PartitionCache(0, 0, compacted=True)
    cache.append(
        [msg(0, b"a", b"1"), msg(1, b"b", b"1"), msg(2, b"a", b"2"), msg(3, None, b"n")], 0
    )
    messages, _ = cache.read_from(0)
    assert [(m.key, m.value) for m in messages] == [(b"b", b"1"), (b"a", b"2"), (None, b"n")]
    assert cache.bytes == sum(message_size(m) for m in messages)


def test_a_tombstone_removes_the_key_for_new_readers_but_not_for_resumed_ones() -> None:
    cache = PartitionCache(0, 0, compacted=True)
    cache.append([msg(0, b"a", b"1"), msg(1, b"b", b"1"), msg(2, b"a", None)], 0)
    fresh, _ = cache.read_from(0, skip_tombstones=True)
    resumed, _ = cache.read_from(1)
    assert [(m.key, m.value) for m in fresh] == [(b"b", b"1")]
    assert [(m.key, m.value) for m in resumed] == [(b"b", b"1"), (b"a", None)]


def test_compaction_is_not_cut_by_age() -> None:
    cache = PartitionCache(0, 0, compacted=True, max_age=1.0)
    cache.append([msg(0, b"a", b"1")], 0)
    assert cache.evict(now=1000.0).messages == 0
    assert len(cache) == 1


def test_storage_is_rebuilt_after_many_evictions_and_reads_stay_right() -> None:
    one = message_size(msg(0, value=b"x" * 10))
    cache = PartitionCache(0, 0, max_bytes=one * 100)
    for start in range(0, 5000, 50):
        cache.append([msg(n, value=b"x" * 10) for n in range(start, start + 50)], 0)
    messages, after = cache.read_from(4950)
    assert [m.offset for m in messages] == list(range(4950, 5000))
    assert cache.start_offset == 4900 and after == 5000


def test_skipping_past_invalid_offsets_moves_next_offset() -> None:
    cache = filled(3)
    cache.skip_to(7)
    assert cache.next_offset == 7
    assert [m.offset for m in cache.read_from(0)[0]] == [0, 1, 2]
