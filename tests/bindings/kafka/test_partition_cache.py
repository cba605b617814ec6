"""The per-partition cache on its own: bounds, compaction, reading from an offset."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ssegate.bindings.kafka.partition_cache import PartitionCache, message_size
from ssegate.kafka.topics import Interest, KafkaMessage


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


def test_a_read_bounded_in_bytes_stops_once_its_keys_and_values_reach_the_bound() -> None:
    cache = filled(10)  # values of 10 bytes, no keys
    first, after = cache.read_from(0, max_bytes=25)
    assert [m.offset for m in first] == [0, 1, 2] and after == 3
    [one], after = cache.read_from(3, max_bytes=1)  # one message at least
    assert one.offset == 3 and after == 4
    wanted = Interest(frozenset(), frozenset())
    keyed = PartitionCache(0, 0)
    keyed.append([msg(n, key=b"k", value=b"x" * 9) for n in range(10)], now=0.0)
    found, after = keyed.read_wanted(0, Interest(frozenset({b"k"})), limit=100, max_bytes=25)
    assert [m.offset for m in found] == [0, 1, 2] and after == 3
    assert keyed.read_wanted(0, wanted, limit=100, max_bytes=25) == ([], keyed.next_offset)


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
    assert cache.payload_bytes == sum(message_size(m) for m in messages)


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


# -- reading what an interest may want, through the index -------------------------------------


def tagged(offset: int, key: bytes | None, tenant: bytes | None = None) -> KafkaMessage:
    headers = (("tenant", tenant),) if tenant is not None else ()
    return KafkaMessage("t", 0, offset, key, b"v", headers)


def test_a_keyed_read_returns_only_that_keys_messages_in_order() -> None:
    cache = PartitionCache(0, 0)
    cache.append([tagged(n, b"k%d" % (n % 5)) for n in range(50)], now=0.0)
    messages, after = cache.read_wanted(7, Interest(keys=frozenset({b"k2"})), limit=100)
    assert [m.offset for m in messages] == [7, 12, 17, 22, 27, 32, 37, 42, 47]
    assert after == cache.next_offset == 50


def test_a_header_read_indexes_the_header_name_on_first_use_and_keeps_it_current() -> None:
    cache = PartitionCache(0, 0)
    cache.append([tagged(n, None, b"acme" if n % 3 == 0 else b"other") for n in range(9)], 0.0)
    acme = Interest(headers=frozenset({("tenant", b"acme")}))
    assert [m.offset for m in cache.read_wanted(0, acme, limit=100)[0]] == [0, 3, 6]
    cache.append([tagged(9, None, b"acme"), tagged(10, None, b"other")], now=0.0)
    assert [m.offset for m in cache.read_wanted(4, acme, limit=100)[0]] == [6, 9]


def test_keys_and_headers_of_one_interest_merge_without_repeats() -> None:
    cache = PartitionCache(0, 0)
    cache.append([tagged(0, b"a", b"x"), tagged(1, b"b", b"y"), tagged(2, b"a", b"y")], 0.0)
    interest = Interest(keys=frozenset({b"a"}), headers=frozenset({("tenant", b"y")}))
    assert [m.offset for m in cache.read_wanted(0, interest, limit=100)[0]] == [0, 1, 2]


def test_a_limited_keyed_read_continues_where_it_stopped() -> None:
    cache = PartitionCache(0, 0)
    cache.append([tagged(n, b"k" if n % 2 else b"j") for n in range(20)], now=0.0)
    want = Interest(keys=frozenset({b"k"}))
    first, after = cache.read_wanted(0, want, limit=3)
    rest, end = cache.read_wanted(after, want, limit=100)
    assert [m.offset for m in first] == [1, 3, 5]
    assert [m.offset for m in rest] == [7, 9, 11, 13, 15, 17, 19] and end == 20


def test_evicted_messages_leave_the_index() -> None:
    one = message_size(tagged(0, b"k"))
    cache = PartitionCache(0, 0, max_bytes=one * 3)
    cache.append([tagged(n, b"k") for n in range(10)], now=0.0)
    messages, _ = cache.read_wanted(0, Interest(keys=frozenset({b"k"})), limit=9)
    assert cache.start_offset > 0
    assert [m.offset for m in messages] == list(range(cache.start_offset, 10))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([None, b"a", b"b", b"c"]),
            st.sampled_from([None, b"x", b"y"]),
            st.booleans(),
        ),
        max_size=120,
    ),
    st.integers(min_value=1, max_value=40),
    st.booleans(),
    st.integers(min_value=0, max_value=130),
)
def test_an_indexed_read_equals_a_filtered_scan(
    records: list[tuple[bytes | None, bytes | None, bool]],
    budget: int,
    compacted: bool,
    start: int,
) -> None:
    one = message_size(tagged(0, b"a", b"x"))
    cache = PartitionCache(0, 0, max_bytes=one * budget, compacted=compacted)
    for offset, (key, tenant, tombstone) in enumerate(records):
        message = tagged(offset, key, tenant)
        if tombstone:
            message = KafkaMessage("t", 0, offset, key, None, message.headers)
        cache.append([message], now=0.0)
    interests = [
        Interest(keys=frozenset({b"a"})),
        Interest(headers=frozenset({("tenant", b"y")})),
        Interest(keys=frozenset({b"b", b"c"}), headers=frozenset({("tenant", b"x")})),
    ]
    offset = max(start, cache.start_offset)
    for interest in interests:
        for skip in (False, True):
            scanned = [
                m.offset
                for m in cache.read_from(offset, skip_tombstones=skip)[0]
                if interest.may_want(m)
            ]
            read: list[int] = []
            at = offset
            while True:
                chunk, at = cache.read_wanted(at, interest, limit=4, skip_tombstones=skip)
                read += [m.offset for m in chunk]
                if at >= cache.next_offset:
                    break
            assert read == scanned


def test_the_index_is_counted_in_the_cache_size_and_freed_with_its_messages() -> None:
    cache = PartitionCache(0, 0, max_age=10.0)
    cache.append([tagged(n, b"k%d" % (n % 3), b"t") for n in range(30)], now=0.0)
    cache.read_wanted(0, Interest(headers=frozenset({("tenant", b"t")})), limit=1)
    assert cache.bytes > cache.payload_bytes > 0
    assert cache.evict(now=20.0).messages == 30
    assert cache.bytes == cache.payload_bytes == 0


def test_a_key_seen_for_hours_keeps_only_the_offsets_the_cache_holds() -> None:
    one = message_size(tagged(0, b"k"))
    cache = PartitionCache(0, 0, max_bytes=one * 50)
    for offset in range(20_000):
        cache.append([tagged(offset, b"k" if offset % 3 == 0 else b"other-%d" % offset)], 0.0)
    postings = cache._index.by_key[b"k"]
    assert not isinstance(postings, int)
    held = sum(1 for m in cache.read_from(cache.start_offset)[0] if m.key == b"k")
    assert len(postings) == held
    assert len(postings.offsets) <= 2 * held + 1  # forgotten offsets do not pile up
