"""When a measured result may stand as a verdict: complete delivery, a load client with CPU to
spare, and enough runs (pure).

- **Delivery** (:func:`delivery`): what a case owed its streams against what they read. The
  events read include any that came twice, so the count that meets what was owed is the
  distinct one: ``missing = expected - (received - duplicates)``. A case is **complete** when
  nothing is missing, duplicated, misdelivered, skipped (a gap) or late, every stream opened and
  none was closed early, no worker made a full garbage collection inside the measured window
  (``gc_full_in_window``: its pause is what the case would have measured), and the case does
  not say itself that it is not (``complete: false``);
  :func:`losses` names what broke it. A case that names its missing events ``lost`` (the Kafka
  scenarios) is read the same way.
- **The load client** (:func:`client_load`): each client process's CPU time over the wall time
  and the cores it may use (one for a single-threaded Python client). Above
  :data:`SATURATED_SHARE` the client, not the server, may be what set the figures: the result
  is flagged ``client_saturated`` and judges nothing. A result that does not say judges nothing
  either.
- **Runs** (:func:`median`): a verdict takes the median of at least :data:`MIN_RUNS` runs.

A target's status is one of four: ``met`` and ``missed`` are verdicts; ``not measured`` says the
results hold no measurement of the target (no case of its size, load or run length, or fewer
than :data:`MIN_RUNS` runs); ``no verdict`` says they hold one that cannot stand (a load client
saturated, or not known not to be; a peer with no figure to compare with).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable
from typing import Any

MET = "met"
MISSED = "missed"
NOT_MEASURED = "not measured"
NO_VERDICT = "no verdict"
"""A target's statuses (the module docstring says what each means)."""
SATURATED_SHARE = 0.8
"""A load client busier than this share of the cores it may use is saturated."""
MIN_RUNS = 3


def delivery(
    expected: int, received: int, duplicates: int, gaps: int, late: int, span_s: float
) -> dict[str, Any]:
    """A case's delivery figures; events/s counts distinct events over ``span_s``."""
    distinct = received - duplicates
    return {
        "expected": expected,
        "received": received,
        "distinct": distinct,
        "missing": expected - distinct,
        "duplicates": duplicates,
        "gaps": gaps,
        "late": late,
        "delivered_events_per_s": round(distinct / span_s, 1) if span_s > 0 else 0.0,
    }


LOSS_COUNTS = (
    ("duplicates", "duplicated"),
    ("misdelivered", "misdelivered"),
    ("not_in_sink", "event(s) the sink never held"),
    ("unknown_ids", "event(s) with an unknown id"),
    ("unreadable", "event(s) unreadable"),
    ("gaps", "gap(s)"),
    ("late", "late"),
    ("closed_early", "stream(s) closed early"),
    ("gc_full_in_window", "full collection(s) in the measured window"),
)
"""Counts of a case that each break it, and the words for them."""


def losses(row: dict[str, Any]) -> list[str]:
    """What makes a case incomplete, in words; empty when it is complete."""
    found = []
    missing = row.get("missing", row.get("lost")) or 0
    if missing > 0:
        found.append(f"{missing:,} lost")
    elif missing < 0:
        found.append(f"{-missing:,} more than owed")
    failed = row.get("failed") or 0
    if failed > 0:
        found.append(f"{failed:,} stream(s) not opened")
    elif failed < 0:
        found.append(f"{-failed:,} stream(s) answered beyond those asked (ended and opened again)")
    for field, words in LOSS_COUNTS:
        if row.get(field):
            found.append(f"{row[field]:,} {words}")
    if (row.get("h2load") or {}).get("complete") is False:
        found.append("h2load's streams short of the bytes owed")
    if row.get("complete") is False and not found:
        found.append("the case says it is not complete")
    return found


def cores_available() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def client_load(
    cpu_seconds: Iterable[float], wall_s: float, cores_each: float = 1.0
) -> dict[str, Any]:
    """The busiest load client process's CPU share, and whether it was saturated.

    ``cpu_seconds`` has one entry per client process, each measured over ``wall_s``;
    ``cores_each`` is how many cores one process may use (its threads, at most the cores).
    """
    capacity = wall_s * max(cores_each, 1e-9)
    shares = [cpu / capacity for cpu in cpu_seconds] if wall_s > 0 else []
    share = max(shares, default=0.0)
    return {"client_cpu_share": round(share, 3), "client_saturated": share > SATURATED_SHARE}


def median(values: Iterable[float]) -> float | None:
    kept = list(values)
    return statistics.median(kept) if kept else None
