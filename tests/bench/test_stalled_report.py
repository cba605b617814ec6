"""The verdicts of ``ssegate bench stalled``: bounds, percentiles, medians (pure)."""

from __future__ import annotations

import copy
import math
from typing import Any

from ssegate_lab.bench.stalled_report import (
    accepted,
    end_bound,
    ends,
    percentile,
    summarize,
    verdicts,
)


def test_the_end_bound_adds_the_fill_time_the_time_behind_the_cache_and_the_timeout() -> None:
    # 64 KiB over the mark plus an 8 KiB receive buffer at 36,864 bytes/s: 2 s to stall; the
    # cache lets its place go at once: behind when first asked (after the timeout), dropped a
    # timeout later, two sweep ticks of slack
    assert end_bound(36_864, 8192, 10.0) == 24.0
    # the cache holds its place 15 s: behind within a tick after that, dropped a timeout later
    assert end_bound(36_864, 8192, 10.0, held_for=15.0) == 30.0
    assert end_bound(0, 8192, 10.0) == math.inf


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50 and percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100 and percentile([3.0], 0.99) == 3
    assert percentile([], 0.5) is None


def test_ends_count_late_never_ended_and_orderly_closes_apart() -> None:
    summary = ends([11.0, 12.5, 14.5, None, 30.0], ["reset", "reset", "eof", "", "reset"], 13.0)
    assert (summary["connected"], summary["ended"], summary["within_bound"]) == (5, 4, 2)
    assert summary["never_ended"] == 2  # still open, and ended past bound + margin (18 s)
    assert (summary["by_reset"], summary["by_eof"]) == (3, 1)
    assert summary["end_s"] == {"min": 11.0, "p50": 12.5, "p90": 30.0, "p99": 30.0, "max": 30.0}


def test_accepted_counts_the_heads_that_came_their_status_and_their_pace() -> None:
    summary = accepted([0.5, None, 2.0, 1.0], ["200", "", "200", "503"], [0.5, None, 2.5, 1.5])
    assert (summary["connected"], summary["heads"], summary["ok"]) == (4, 3, 2)
    assert (summary["last_head_s"], summary["per_s"]) == (2.5, 1.2)
    assert summary["head_s"] == {"p50": 1.0, "p90": 2.0, "p99": 2.0, "max": 2.0}
    assert accepted([None], [""], [None])["per_s"] is None


def run(p99_ratio: float, rss_ratio: float, lost: int = 0, late: int = 0) -> dict[str, Any]:
    result: dict[str, Any] = {
        "p99_ratio": p99_ratio,
        "rss_ratio": rss_ratio,
        "live": {"wanted": 20, "opened": 20, "lost": lost, "duplicates": 0, "closed_early": 0},
        "stalled_clients": {
            "connected": 1000, "within_bound": 1000 - late, "by_reset": 1000,
            "bound_s": 14.0, "end_s": {"p50": 12.0, "max": 13.0},
        },
        "rss_mib": {"baseline_end": 80.0, "peak": 300.0, "after": 80.0 * rss_ratio},
        "slow_clients_metric": {"total": 1000.0},
        "phases": {
            name: {
                "latency_ms": {"p99": 10.0}, "load_cpu_share": 0.1, "gateway_cpu_share": 0.3,
                "other_cpu_share": 0.0,
            }
            for name in ("baseline", "stalled", "after")
        },
    }  # fmt: skip
    result["verdicts"] = verdicts(result)
    return result


def test_a_run_passes_at_the_targets_and_fails_past_each_of_them() -> None:
    assert all(run(2.0, 1.10)["verdicts"].values())
    assert not run(2.01, 1.0)["verdicts"]["p99_within_2x"]
    assert not run(1.0, 1.101)["verdicts"]["rss_within_10_percent"]
    assert not run(1.0, 1.0, lost=1)["verdicts"]["complete"]
    assert not run(1.0, 1.0, late=1)["verdicts"]["all_ended_within_bound"]
    orderly = copy.deepcopy(run(1.0, 1.0))
    orderly["stalled_clients"]["by_reset"] = 999
    assert not verdicts(orderly)["all_reset"]


def test_the_summary_judges_medians_but_needs_every_run_complete_and_on_time() -> None:
    summary = summarize([run(1.5, 1.02), run(2.5, 1.30), run(1.8, 1.05)])
    assert summary["figures"]["p99_ratio"] == {"median": 1.8, "min": 1.5, "max": 2.5}
    assert summary["verdicts"]["p99_within_2x"] and summary["verdicts"]["rss_within_10_percent"]
    assert summary["passed"]
    late = summarize([run(1.0, 1.0), run(1.0, 1.0, late=3), run(1.0, 1.0)])
    assert not late["verdicts"]["all_ended_within_bound"] and not late["passed"]
    lossy = summarize([run(1.0, 1.0, lost=1), run(1.0, 1.0), run(1.0, 1.0)])
    assert not lossy["verdicts"]["complete"] and not lossy["passed"]
