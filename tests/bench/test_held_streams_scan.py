"""The held-stream scanner: counts, gaps and latencies, event by event or by a read's ends."""

from __future__ import annotations

import asyncio
import time

from ssegate_lab.bench.held_streams import EXACT_PER_READ, SAMPLE_EVERY, _Counters, _HeldStream


def stream() -> tuple[_HeldStream, _Counters]:
    loop = asyncio.new_event_loop()
    counters = _Counters()
    held = _HeldStream(b"", loop.create_future(), counters)
    held._streaming = True
    return held, counters


def events(sequences: range | list[int], stamp_ns: int) -> bytes:
    return b"".join(
        b'id:x\ndata:{"t":%d,"n":%d}\n\n' % (stamp_ns + i, n) for i, n in enumerate(sequences)
    )


def test_a_small_read_is_counted_event_by_event() -> None:
    held, counters = stream()
    held.data_received(events(range(EXACT_PER_READ), time.monotonic_ns()))
    assert counters.received == EXACT_PER_READ
    assert counters.gaps == 0
    assert counters.histogram.total == EXACT_PER_READ


def test_a_large_read_counts_every_event_and_charges_each_the_oldest_latency() -> None:
    held, counters = stream()
    old = time.monotonic_ns() - 40_000_000  # produced 40 ms ago
    held.data_received(events(range(100), old))
    assert counters.received == 100
    assert counters.gaps == 0
    assert counters.histogram.total == 100
    p50 = counters.histogram.percentile_ms(0.5)
    assert p50 is not None and p50 >= 40


def test_a_large_read_charges_its_newest_latency_to_the_lower_bound() -> None:
    held, counters = stream()
    now = time.monotonic_ns()
    oldest, newest = now - 40_000_000, now - 5_000_000  # the batch spans 40 ms .. 5 ms ago
    wire = b"".join(
        b'id:x\ndata:{"t":%d,"n":%d}\n\n' % (oldest + (newest - oldest) * n // 99, n)
        for n in range(100)
    )
    held.data_received(wire)
    upper, lower = counters.histogram, counters.lower
    assert upper.total == lower.total == 100
    upper_p50, lower_p50 = upper.percentile_ms(0.5), lower.percentile_ms(0.5)
    assert upper_p50 is not None and lower_p50 is not None
    assert upper_p50 >= 40
    assert 5 <= lower_p50 < 40


def test_the_sampled_estimate_weighs_one_read_in_so_many_and_lies_between_the_bounds() -> None:
    held, counters = stream()
    sequence = 0
    for _ in range(2 * SAMPLE_EVERY):  # 2 sampled reads of 20 events, each 40 ms .. 21 ms old
        now = time.monotonic_ns()
        held.data_received(
            b"".join(
                b'id:x\ndata:{"t":%d,"n":%d}\n\n' % (now - (40 - i) * 1_000_000, sequence + i)
                for i in range(20)
            )
        )
        sequence += 20
    assert counters.received == counters.sampled.total == 2 * SAMPLE_EVERY * 20
    assert counters.gaps == 0
    lower, sampled, upper = (
        h.percentile_ms(0.5) for h in (counters.lower, counters.sampled, counters.histogram)
    )
    assert lower is not None and sampled is not None and upper is not None
    assert lower < sampled < upper
    assert 28 <= sampled <= 34  # the middle of 21..40 ms


def test_a_small_read_counts_the_same_exact_latencies_in_both_bounds() -> None:
    held, counters = stream()
    held.data_received(events(range(EXACT_PER_READ), time.monotonic_ns() - 10_000_000))
    assert counters.lower.counts == counters.histogram.counts == counters.sampled.counts


def test_a_large_read_finds_gaps_inside_it_and_before_it() -> None:
    held, counters = stream()
    now = time.monotonic_ns()
    held.data_received(events(range(20), now))
    held.data_received(events([25, *range(27, 50)], now))  # 20-24 and 26 missing
    assert counters.received == 44
    assert counters.gaps == 6


def test_a_read_split_inside_an_event_waits_for_the_rest() -> None:
    held, counters = stream()
    wire = events(range(30), time.monotonic_ns())
    held.data_received(wire[:100])
    held.data_received(wire[100:])
    assert counters.received == 30
    assert counters.gaps == 0


def test_events_delivered_twice_are_counted_as_duplicates_event_by_event() -> None:
    held, counters = stream()
    now = time.monotonic_ns()
    held.data_received(events([0, 1, 2], now))
    held.data_received(events([1, 2, 3], now))
    assert (counters.received, counters.gaps, counters.duplicates) == (6, 0, 2)


def test_a_large_read_delivered_twice_is_counted_as_duplicates() -> None:
    """A batch repeated in full: the span of sequence numbers holds half the events."""
    held, counters = stream()
    batch = events(range(20), time.monotonic_ns())
    held.data_received(batch + batch)
    assert counters.received == 40
    assert counters.duplicates == 20 and counters.gaps == 0


def test_a_large_read_with_as_many_events_as_its_span_still_finds_a_repeat_and_a_hole() -> None:
    """Its ends look whole (0 .. 19, 20 events), but 9 came twice and 10 never came."""
    held, counters = stream()
    held.data_received(events([*range(10), 9, *range(11, 20)], time.monotonic_ns()))
    assert (counters.received, counters.duplicates, counters.gaps) == (20, 1, 1)


def test_a_batch_delivered_twice_and_a_hole_are_counted_apart() -> None:
    held, counters = stream()
    now = time.monotonic_ns()
    batch = events(range(10), now)
    held.data_received(batch + batch + events(range(20, 30), now))
    assert (counters.received, counters.duplicates, counters.gaps) == (30, 10, 10)
    assert counters.received - counters.duplicates == 20  # distinct: what was delivered


def test_a_late_event_fills_its_hole_and_is_no_duplicate() -> None:
    held, counters = stream()
    now = time.monotonic_ns()
    held.data_received(events([0, 1, 3], now))
    held.data_received(events([2, 4], now))
    assert (counters.received, counters.gaps, counters.late, counters.duplicates) == (5, 1, 1, 0)


def test_duplicates_are_counted_across_reads_of_either_size() -> None:
    held, counters = stream()
    now = time.monotonic_ns()
    held.data_received(events(range(30), now))  # a large read
    held.data_received(events(range(25, 30), now))  # a small one, all seen before
    held.data_received(events(range(20, 40), now))  # a large one, half seen before
    assert (counters.received, counters.duplicates, counters.gaps) == (55, 15, 0)
