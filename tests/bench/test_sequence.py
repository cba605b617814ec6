"""Per-stream sequence accounting: new, duplicated, skipped and late numbers."""

from __future__ import annotations

from ssegate_lab.bench.sequence import MAX_HOLES, BatchCounts, StreamSequence


def test_numbers_in_order_are_all_new() -> None:
    sequence = StreamSequence()
    assert sequence.take([5, 6, 7]) == BatchCounts()
    assert sequence.take([8]) == BatchCounts()
    assert sequence.highest == 8


def test_the_first_number_sets_the_start_so_joining_midway_skips_nothing() -> None:
    sequence = StreamSequence()
    assert sequence.take([1000]) == BatchCounts()


def test_a_batch_delivered_twice_is_all_duplicates() -> None:
    sequence = StreamSequence()
    sequence.take(list(range(10)))
    assert sequence.take(list(range(10))) == BatchCounts(duplicates=10)


def test_a_repeat_inside_a_batch_whose_ends_look_whole_is_found() -> None:
    sequence = StreamSequence()
    assert sequence.take([0, 1, 1, 3]) == BatchCounts(duplicates=1, skipped=1)


def test_a_skipped_number_that_arrives_later_is_late_once_then_a_duplicate() -> None:
    sequence = StreamSequence()
    assert sequence.take([0, 1, 5]) == BatchCounts(skipped=3)
    assert sequence.open_holes == 3
    assert sequence.take([3]) == BatchCounts(late=1)
    assert sequence.take([3]) == BatchCounts(duplicates=1)
    assert sequence.take([2, 4]) == BatchCounts(late=2)
    assert sequence.open_holes == 0


def test_only_so_many_holes_are_kept_and_the_oldest_goes_first() -> None:
    sequence = StreamSequence()
    sequence.take(list(range(0, 2 * (MAX_HOLES + 2), 2)))  # 0, 2, 4, ...: one hole too many
    assert sequence.open_holes == MAX_HOLES
    assert sequence.take([1]) == BatchCounts(duplicates=1)  # the forgotten hole
    assert sequence.take([3]) == BatchCounts(late=1)
