"""The slow moments :mod:`ssegate_lab.loop_lag` recorded: the worst, and per worker in a window.

``python -m ssegate_lab.loop_lag_report DIR [--worst N] [--stacks K]`` prints the N longest
moments of every ``DIR/*.jsonl`` (which process, when, how long, what the loop thread did with
its CPU, the garbage collections that overlapped) with their K most sampled stacks of the loop
thread, leaf frame last. :func:`window_summary` is what ``ssegate bench keyed --loop-lag`` keeps
in a case's result: per worker, the moments over a length inside the measured window.

Everything here is pure over the lines read; a line cut short (a process killed while writing
it) is counted, not fatal.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WORST = 10
STACKS = 5
OVER_MS = 50.0
"""Moments shorter than this are left out of a case's summary."""


@dataclass
class Recorded:
    """What a directory of ``.jsonl`` files holds."""

    processes: list[dict[str, Any]] = field(default_factory=list)
    moments: list[dict[str, Any]] = field(default_factory=list)
    unreadable_lines: int = 0


def parse_lines(lines: Iterable[str], recorded: Recorded | None = None) -> Recorded:
    """Sort each JSON line into processes and moments."""
    recorded = recorded if recorded is not None else Recorded()
    for text in lines:
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            recorded.unreadable_lines += 1
            continue
        kind = line.get("kind") if isinstance(line, dict) else None
        if kind == "process":
            recorded.processes.append(line)
        elif kind == "moment":
            recorded.moments.append(line)
        else:
            recorded.unreadable_lines += 1
    return recorded


def read_directory(directory: Path) -> Recorded:
    recorded = Recorded()
    for path in sorted(directory.glob("*.jsonl")):
        parse_lines(path.read_text(encoding="utf-8").splitlines(), recorded)
    return recorded


def worst(moments: Iterable[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """The ``count`` longest moments, longest first."""
    return sorted(moments, key=lambda m: m["duration_ms"], reverse=True)[:count]


def top_stacks(stacks: dict[str, int], count: int) -> list[tuple[str, int]]:
    """The ``count`` most sampled stacks, most first (ties in stack order)."""
    return sorted(stacks.items(), key=lambda item: (-item[1], item[0]))[:count]


def in_window(
    moments: Iterable[dict[str, Any]], started: float, ended: float, over_ms: float
) -> list[dict[str, Any]]:
    """The moments over ``over_ms`` that began inside ``[started, ended]`` (``CLOCK_MONOTONIC``
    seconds, as ``time.monotonic()`` reads it in any process of the machine)."""
    return [
        m
        for m in moments
        if m["duration_ms"] > over_ms and started <= m["start_monotonic"] <= ended
    ]


def case_summary(directory: Path, case: dict[str, Any], gateway_pid: int) -> dict[str, Any]:
    """:func:`window_summary` of the gateway ``gateway_pid`` (and the workers it forked) over a
    keyed case's measured window (its ``window_monotonic_s``)."""
    started, ended = case["window_monotonic_s"]
    return window_summary(read_directory(directory), started, ended, gateway=gateway_pid)


def window_summary(
    recorded: Recorded,
    started: float,
    ended: float,
    *,
    gateway: int | None = None,
    over_ms: float = OVER_MS,
    stacks: int = STACKS,
) -> dict[str, Any]:
    """Per process of the ``gateway`` pid (itself and the workers it forked; ``None``: every
    process that had started by ``ended``): its moments over ``over_ms`` that began in the
    window (how many, the longest, when the longest began in seconds from ``started``) and its
    ``stacks`` most sampled loop-thread stacks over all of them."""
    processes = [
        p
        for p in recorded.processes
        if p["started_monotonic"] <= ended and gateway in (None, p["pid"], p["ppid"])
    ]
    pids = {p["pid"] for p in processes}
    chosen = [m for m in in_window(recorded.moments, started, ended, over_ms) if m["pid"] in pids]
    workers = {pid: _empty(pid) for pid in pids}
    for pid, row in workers.items():
        mine = [m for m in chosen if m["pid"] == pid]
        if not mine:
            continue
        longest = worst(mine, 1)[0]
        merged: Counter[str] = Counter()
        for moment in mine:
            merged.update(moment["stacks"])
        row.update(
            count=len(mine),
            longest_ms=longest["duration_ms"],
            longest_at_s=round(longest["start_monotonic"] - started, 2),
            top_stacks=[[stack, n] for stack, n in top_stacks(dict(merged), stacks)],
        )
    return {
        "over_ms": over_ms,
        "moments": len(chosen),
        "workers": sorted(workers.values(), key=lambda r: (-r["longest_ms"], r["pid"])),
    }


def _empty(pid: int) -> dict[str, Any]:
    return {"pid": pid, "count": 0, "longest_ms": 0.0, "longest_at_s": None, "top_stacks": []}


def format_worst(recorded: Recorded, count: int = WORST, stacks: int = STACKS) -> str:
    """The ``count`` worst moments as text, each with its ``stacks`` top loop-thread stacks."""
    lines = [
        f"{len(recorded.moments)} slow moments in {len(recorded.processes)} processes"
        + (f" ({recorded.unreadable_lines} unreadable lines)" if recorded.unreadable_lines else "")
    ]
    for rank, moment in enumerate(worst(recorded.moments, count), 1):
        when = time.strftime("%H:%M:%S", time.gmtime(moment["start_wall"]))
        fraction = f"{moment['start_wall'] % 1:.3f}"[1:]
        lines.append(
            f"#{rank} pid {moment['pid']}: {moment['duration_ms']:.1f} ms from {when}{fraction} "
            f"UTC, {moment['samples']} samples; loop thread on a CPU "
            f"{_ms(moment.get('loop_thread_on_cpu_ms'))}, waiting for one "
            f"{_ms(moment.get('loop_thread_waiting_for_cpu_ms'))}; gc: {_gc(moment.get('gc', []))}"
        )
        total = max(1, sum(moment["stacks"].values()))
        for stack, n in top_stacks(moment["stacks"], stacks):
            lines.append(f"  {n:4d} ({n * 100 // total:3d}%) {stack}")
        others = top_stacks(moment.get("other_threads", {}), 2)
        for stack, n in others:
            lines.append(f"  other thread {n:4d} {stack}")
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f} ms"


def _gc(collections: list[dict[str, Any]]) -> str:
    if not collections:
        return "none"
    return ", ".join(
        f"gen{c['generation']} {c['ms']:.1f} ms"
        + ("" if c["on_loop_thread"] else " on another thread")
        for c in collections
    )


def writable_directory(text: str) -> Path:
    """``--loop-lag DIR``: the directory, made if need be and checked writable before a gateway
    starts, or argparse's answer saying why not."""
    directory = Path(text)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text}: cannot be made a directory ({exc})") from exc
    if not os.access(directory, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: not writable")
    return directory


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ssegate_lab.loop_lag_report",
        description="the worst slow moments of event loops, from a directory of .jsonl files",
    )
    parser.add_argument("directory", type=Path)
    parser.add_argument("--worst", type=int, default=WORST, help="how many moments")
    parser.add_argument("--stacks", type=int, default=STACKS, help="stacks per moment")
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        parser.error(f"{args.directory}: not a directory")
    print(format_worst(read_directory(args.directory), args.worst, args.stacks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
