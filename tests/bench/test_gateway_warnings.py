"""What a bench result keeps of its gateway's log: its own warnings and errors, the last ones."""

from __future__ import annotations

import time
from pathlib import Path

from ssegate_lab.bench.gateway import GatewayProcess


def test_a_result_keeps_the_gateways_last_warnings_and_errors_without_librdkafkas() -> None:
    gateway = GatewayProcess(Path("zilla.yaml"), history=100)
    gateway.output.extend([
        "2026-11-28 01:00:00,000 INFO ssegate: gateway.allocator allocator=jemalloc",
        "2026-11-28 01:00:01,000 WARNING ssegate: gateway.gc_full reason=growth pause=1.2",
        "%4|1795827152.485|FAIL|rdkafka#consumer-1| [thrd:x]: Connection refused WARNING ",
        "2026-11-28 01:00:02,000 ERROR ssegate: kafka.broker_down reason=x",
        "2026-11-28 01:00:03,000 WARNING ssegate: kafka.fanout_behind " + "x" * 500,
    ])  # fmt: skip
    kept = gateway.warnings(limit=2, width=70)
    assert kept == [
        "2026-11-28 01:00:02,000 ERROR ssegate: kafka.broker_down reason=x",
        ("2026-11-28 01:00:03,000 WARNING ssegate: kafka.fanout_behind " + "x" * 500)[:70],
    ]
    assert len(gateway.warnings()) == 3


def test_a_full_collection_is_counted_in_the_window_its_line_was_read_in() -> None:
    gateway = GatewayProcess(Path("zilla.yaml"), history=100)
    gateway._read("2026-11-28 01:00:00,000 INFO ssegate: http.request status=200\n")
    before = time.monotonic()
    gateway._read("2026-11-28 01:00:01,000 WARNING ssegate: gateway.gc_full reason=growth "
                  "pause_ms=86.5 walked=1412939 reclaimed=0\n")  # fmt: skip
    gateway._read('{"event": "gateway.gc_full", "pause_ms": 1086.0, "reason": "growth"}\n')
    after = time.monotonic()
    assert gateway.collections_in(before, after) == {
        "gc_full_in_window": 2,
        "gc_longest_full_pause_ms": 1086.0,
    }
    assert gateway.collections_in(after + 1, after + 2) == {
        "gc_full_in_window": 0,
        "gc_longest_full_pause_ms": 0.0,
    }
