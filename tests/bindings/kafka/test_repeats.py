"""Repeats: the rule (a record whose id a record at most ``horizon`` offsets before it carries),
its bound, and the fetch thread leaving repeats and the ids it read ahead out of its batches."""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from ssegate.bindings.kafka.client import KafkaClient
from ssegate.bindings.kafka.fetch_events import Fetched
from ssegate.bindings.kafka.fetch_records import RecordBatches
from ssegate.bindings.kafka.fetcher import FetchThread
from ssegate.bindings.kafka.repeats import MAX_ID_BYTES, Repeat, RepeatFilter, record_id
from ssegate.kafka.topics import RECORD_ID_HEADER


def repeats_among(repeats: RepeatFilter, ids: Sequence[bytes | None], first: int = 0) -> list[int]:
    """The offsets judged repeats, of records ``first``, ``first + 1``, ... with ``ids``."""
    found = []
    for offset, found_id in enumerate(ids, first):
        if found_id is not None and repeats.earlier_copy(offset, found_id) is not None:
            found.append(offset)
    return found


def test_a_record_whose_id_came_earlier_in_the_horizon_is_a_repeat_of_that_copy() -> None:
    repeats = RepeatFilter(horizon=100, start=0)
    assert repeats.earlier_copy(0, b"a") is None
    assert repeats.earlier_copy(1, b"b") is None
    assert repeats.earlier_copy(5, b"a") == 0
    assert repeats.earlier_copy(6, b"c") is None


def test_the_horizon_counts_offsets_back_from_the_repeat_inclusive() -> None:
    within = RepeatFilter(horizon=10, start=0)
    assert repeats_among(within, [b"a"] + [None] * 9 + [b"a"]) == [10]
    beyond = RepeatFilter(horizon=10, start=0)
    assert repeats_among(beyond, [b"a"] + [None] * 10 + [b"a"]) == []


def test_a_third_copy_is_a_repeat_of_the_second_when_the_first_is_beyond_the_horizon() -> None:
    repeats = RepeatFilter(horizon=10, start=0)
    assert repeats.earlier_copy(0, b"a") is None
    assert repeats.earlier_copy(8, b"a") == 0
    assert repeats.earlier_copy(16, b"a") == 8


def test_a_record_read_again_is_not_a_repeat_of_itself() -> None:
    repeats = RepeatFilter(horizon=10, start=0)
    assert repeats_among(repeats, [b"a", b"b", b"c"]) == []
    assert repeats_among(repeats, [b"b", b"c"], first=1) == []  # the reader went back to 1
    assert repeats.earlier_copy(3, b"b") == 1


def test_at_most_the_ids_of_the_horizon_are_remembered() -> None:
    repeats = RepeatFilter(horizon=1000, start=0)
    repeats_among(repeats, [b"%d" % n for n in range(50_000)])
    assert len(repeats) == 1001
    assert repeats.earlier_copy(50_000, b"49000") == 49_000
    assert repeats.earlier_copy(50_001, b"49000") == 50_000
    assert repeats.earlier_copy(50_002, b"49001") is None  # forgotten: 1,001 offsets back


def test_a_long_id_is_remembered_by_a_digest_and_still_found() -> None:
    repeats = RepeatFilter(horizon=10, start=0)
    long_id, other = b"x" * (MAX_ID_BYTES + 1) + b"1", b"x" * (MAX_ID_BYTES + 1) + b"2"
    assert repeats.earlier_copy(0, long_id) is None
    assert repeats.earlier_copy(1, other) is None
    assert repeats.earlier_copy(2, long_id) == 0
    assert all(len(kept) == 16 for kept in repeats._seen)


def test_a_reader_starting_later_reads_the_horizon_before_it() -> None:
    assert RepeatFilter(horizon=100, start=5_000).reading_from == 4_900
    assert RepeatFilter(horizon=100, start=40).reading_from == 0


IDS = st.lists(st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d", b"e"])), max_size=80)


@settings(max_examples=300, deadline=None)
@given(ids=IDS, horizon=st.integers(1, 12), start=st.integers(0, 80))
def test_every_reader_finds_the_same_repeats_wherever_it_starts(
    ids: list[bytes | None], horizon: int, start: int
) -> None:
    from_the_log_start = RepeatFilter(horizon, 0)
    everywhere = repeats_among(from_the_log_start, ids)
    later = RepeatFilter(horizon, start)
    first = min(later.reading_from, len(ids))
    found = [o for o in repeats_among(later, ids[first:], first) if o >= start]
    assert found == [o for o in everywhere if o >= start]


def test_the_id_is_the_last_id_header() -> None:
    assert record_id(()) is None
    assert record_id((("tenant", b"acme"),)) is None
    headers = ((RECORD_ID_HEADER, b"input"), ("ssegate-reason", b"bad"), (RECORD_ID_HEADER, b"dl"))
    assert record_id(headers) == b"dl"


# -- the fetch thread's batches ----------------------------------------------------------------


def record(offset: int, value: bytes, record_id: bytes | None = None) -> Message:
    headers = [("tenant", b"acme")] + ([(RECORD_ID_HEADER, record_id)] if record_id else [])
    return Message(topic="t", partition=0, offset=offset, key=b"k", value=value,
                   headers=headers, timestamp=(1, 1_700_000_000_000))  # fmt: skip


def fetch_thread(horizon: int) -> RecordBatches:
    """The batches of a fetch thread not started: made without a broker."""
    return FetchThread(KafkaClient("k", ("127.0.0.1:9",)), lambda events: None, {},
                       repeat_horizon=horizon).records  # fmt: skip


def test_a_batch_leaves_repeats_out_and_moves_past_them() -> None:
    thread = fetch_thread(100)
    assert thread.reading_from(False, "t", 0, 0, 0) == 0
    batch = thread.batch(
        "t", 0, [record(0, b"x", b"a"), record(1, b"y", b"b"), record(2, b"x", b"a")], False
    )
    assert isinstance(batch, Fetched)
    assert [m.offset for m in batch.messages] == [0, 1]
    assert batch.repeats == [Repeat(2, 0, b"a")]
    assert batch.next_offset == 3


def test_records_without_an_id_are_never_repeats() -> None:
    thread = fetch_thread(100)
    thread.reading_from(False, "t", 0, 0, 0)
    batch = thread.batch("t", 0, [record(n, b"same") for n in range(3)], False)
    assert batch is not None and [m.offset for m in batch.messages] == [0, 1, 2]


def test_a_reader_starting_at_x_reads_the_horizon_before_x_and_hands_over_from_x() -> None:
    thread = fetch_thread(10)
    assert thread.reading_from(False, "t", 0, 50, 0) == 40
    read_ahead = thread.batch("t", 0, [record(n, b"v", b"%d" % n) for n in range(40, 45)], False)
    assert read_ahead is None  # only learnt the ids: nothing to hand over
    batch = thread.batch(
        "t", 0, [record(n, b"v", b"%d" % n) for n in range(45, 50)] + [record(50, b"v", b"42"),
                                                                      record(51, b"v", b"51")],
        False,
    )  # fmt: skip
    assert isinstance(batch, Fetched)
    assert [m.offset for m in batch.messages] == [51]
    assert batch.repeats == [Repeat(50, 42, b"42")]
    assert batch.next_offset == 52


def test_the_read_ahead_does_not_go_before_the_log_start() -> None:
    thread = fetch_thread(1000)
    assert thread.reading_from(True, "t", 0, 50, 20) == 20


def test_horizon_zero_skips_nothing_and_reads_nothing_ahead() -> None:
    thread = fetch_thread(0)
    assert thread.reading_from(False, "t", 0, 50, 0) == 50
    batch = thread.batch("t", 0, [record(50, b"x", b"a"), record(51, b"x", b"a")], False)
    assert batch is not None and [m.offset for m in batch.messages] == [50, 51]
    assert batch.repeats == []
