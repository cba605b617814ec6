"""The figures and verdicts of ``ssegate bench stalled`` (pure: values in, values out).

The targets, per run:

- **p99**: the live readers' p99 while the stalled clients are there is at most
  :data:`P99_RATIO_MAX` times their p99 in the baseline;
- **bound**: every stalled client sees its connection end within :func:`end_bound` seconds of
  its own connect (it is dropped once it has been behind the partition cache's start for the
  slow-client timeout);
- **abortive**: every one of them sees a reset (``ECONNRESET``), not an orderly end;
- **RSS**: the gateway's resident memory once they are gone is at most :data:`RSS_RATIO_MAX`
  times what it was at the end of the baseline;
- **complete**: the live readers lost no event and got none twice (counted by event id), and
  none of their streams ended.

:func:`summarize` takes the median of each figure over the runs, with its spread (the lowest
and highest run), and judges the medians; the bound, the abortive end and completeness must
hold in every run.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from ssegate.bindings.sse.slow_clients import STALL_MARK

P99_RATIO_MAX = 2.0
RSS_RATIO_MAX = 1.10
SWEEP_TICK = 1.0
"""The longest interval between two checks of a stream (the sse server's sweep)."""
END_MARGIN = 5.0
"""Seconds past the bound after which a stalled client still open counts as never ended."""


def end_bound(
    stream_bytes_per_s: float,
    rcvbuf: int,
    timeout: float,
    held_for: float = 0.0,
    stall_mark: int = STALL_MARK,
) -> float:
    """Seconds from a stalled client's connect to the end of its connection, at the latest.

    The stream fills the client's receive buffer and then the stall mark at the stream's rate
    (a stall found at a refused write comes sooner). The stream stops there, and the partition
    cache holds its place for ``held_for`` seconds (its ``max-age``; 0 for a stream replaying
    history the cache is letting go). Once it has been stalled for ``timeout`` it is asked at
    every sweep whether it is behind the cache, found so within a tick of falling behind, and
    dropped ``timeout`` seconds after that. One more tick is allowed for the event loop to be
    late (the sweep and the timer run on it among every other callback)."""
    if stream_bytes_per_s <= 0:
        return math.inf
    fill = (stall_mark + rcvbuf) / stream_bytes_per_s
    return round(fill + max(timeout, held_for + SWEEP_TICK) + timeout + 2 * SWEEP_TICK, 2)


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of ``values`` (None when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def ends(
    ended_s: Sequence[float | None], how: Sequence[str], bound: float, margin: float = END_MARGIN
) -> dict[str, Any]:
    """The stalled clients' ends: seconds from connect to end, against ``bound``."""
    seen = [value for value in ended_s if value is not None]
    spread = {
        name: None if (value := percentile(seen, fraction)) is None else round(value, 2)
        for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))
    }
    return {
        "connected": len(ended_s),
        "ended": len(seen),
        "within_bound": sum(value <= bound for value in seen),
        "never_ended": sum(value is None or value > bound + margin for value in ended_s),
        "by_reset": sum(kind == "reset" for kind in how),
        "by_eof": sum(kind == "eof" for kind in how),
        "bound_s": bound,
        "end_s": {"min": round(min(seen), 2) if seen else None, **spread},
    }


def accepted(
    head_s: Sequence[float | None], status: Sequence[str], head_at_s: Sequence[float | None]
) -> dict[str, Any]:
    """How many stalled clients got their response head (and a ``200``), the seconds from each
    one's connect to its head, and the heads per second from the first connect to the last head
    (``head_at_s``: each head's time from the first connect)."""
    seen = [value for value in head_s if value is not None]
    spread = {
        name: None if (value := percentile(seen, fraction)) is None else round(value, 3)
        for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))
    }
    last = max((value for value in head_at_s if value is not None), default=0.0)
    return {
        "connected": len(head_s),
        "heads": len(seen),
        "ok": sum(code == "200" for code in status),
        "last_head_s": round(last, 3) if seen else None,
        "per_s": round(len(seen) / last, 1) if seen and last > 0 else None,
        "head_s": spread,
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 3)


def verdicts(run: dict[str, Any]) -> dict[str, bool]:
    """The targets of one run (see the module docstring)."""
    stalled = run["stalled_clients"]
    live = run["live"]
    p99_ratio = run["p99_ratio"]
    rss_ratio = run["rss_ratio"]
    return {
        "p99_within_2x": p99_ratio is not None and p99_ratio <= P99_RATIO_MAX,
        "all_ended_within_bound": stalled["connected"] > 0
        and stalled["within_bound"] == stalled["connected"],
        "all_reset": stalled["by_reset"] == stalled["connected"],
        "rss_within_10_percent": rss_ratio is not None and rss_ratio <= RSS_RATIO_MAX,
        "complete": live["lost"] == 0
        and live["duplicates"] == 0
        and live["closed_early"] == 0
        and live["opened"] == live["wanted"],
    }


def median_and_spread(values: Sequence[float | None]) -> dict[str, float | None]:
    present = [value for value in values if value is not None]
    if not present:
        return {"median": None, "min": None, "max": None}
    return {
        "median": round(statistics.median(present), 3),
        "min": round(min(present), 3),
        "max": round(max(present), 3),
    }


FIGURES: dict[str, Callable[[dict[str, Any]], float | None]] = {
    "baseline_p99_ms": lambda run: run["phases"]["baseline"]["latency_ms"]["p99"],
    "stalled_p99_ms": lambda run: run["phases"]["stalled"]["latency_ms"]["p99"],
    "after_p99_ms": lambda run: run["phases"]["after"]["latency_ms"]["p99"],
    "p99_ratio": lambda run: run["p99_ratio"],
    "end_s_max": lambda run: run["stalled_clients"]["end_s"]["max"],
    "end_s_p50": lambda run: run["stalled_clients"]["end_s"]["p50"],
    "bound_s": lambda run: run["stalled_clients"]["bound_s"],
    "rss_baseline_mib": lambda run: run["rss_mib"]["baseline_end"],
    "rss_peak_mib": lambda run: run["rss_mib"]["peak"],
    "rss_after_mib": lambda run: run["rss_mib"]["after"],
    "rss_ratio": lambda run: run["rss_ratio"],
    "slow_clients_metric": lambda run: run["slow_clients_metric"]["total"],
    "accepted": lambda run: run.get("accepted", {}).get("heads"),
    "accept_head_s_p99": lambda run: run.get("accepted", {}).get("head_s", {}).get("p99"),
    "accept_head_s_max": lambda run: run.get("accepted", {}).get("head_s", {}).get("max"),
    "accept_per_s": lambda run: run.get("accepted", {}).get("per_s"),
    "live_lost": lambda run: run["live"].get("lost"),
    "live_duplicates": lambda run: run["live"].get("duplicates"),
    "load_cpu_share_stalled": lambda run: run["phases"]["stalled"]["load_cpu_share"],
    "gateway_cpu_share_stalled": lambda run: run["phases"]["stalled"]["gateway_cpu_share"],
    "other_cpu_share_stalled": lambda run: run["phases"]["stalled"]["other_cpu_share"],
}
"""What the summary reports of each run, by name."""


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians and spread over ``runs``, and the verdicts on them."""
    figures = {name: median_and_spread([pick(r) for r in runs]) for name, pick in FIGURES.items()}
    every = [run["verdicts"] for run in runs]
    p99 = figures["p99_ratio"]["median"]
    rss = figures["rss_ratio"]["median"]
    judged = {
        "p99_within_2x": p99 is not None and p99 <= P99_RATIO_MAX,
        "all_ended_within_bound": all(v["all_ended_within_bound"] for v in every),
        "all_reset": all(v["all_reset"] for v in every),
        "rss_within_10_percent": rss is not None and rss <= RSS_RATIO_MAX,
        "complete": all(v["complete"] for v in every),
    }
    return {
        "runs": len(runs),
        "figures": figures,
        "verdicts": judged,
        "passed": bool(runs) and all(judged.values()),
    }
