"""The held-stream scanner: counts, gaps and latencies, event by event or by a read's ends."""

from __future__ import annotations

import asyncio
import time

from ssegate.bench.held_streams import EXACT_PER_READ, _Counters, _HeldStream


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
