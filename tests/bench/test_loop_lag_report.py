"""The loop-lag report over recorded lines: the worst moments, their top stacks, and a case's
per-worker summary of its measured window."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from ssegate_lab.loop_lag_report import (
    format_worst,
    parse_lines,
    read_directory,
    top_stacks,
    window_summary,
    worst,
    writable_directory,
)

SUPERVISOR, WORKER_A, WORKER_B, OTHER_GATEWAY = 100, 101, 102, 200


def process(pid: int, ppid: int, started: float = 0.0) -> str:
    return json.dumps({"kind": "process", "pid": pid, "ppid": ppid, "started_monotonic": started})


def moment(pid: int, at: float, ms: float, stacks: dict[str, int] | None = None) -> str:
    line: dict[str, Any] = {
        "kind": "moment",
        "pid": pid,
        "start_wall": 1_800_000_000.0 + at,
        "start_monotonic": at,
        "duration_ms": ms,
        "samples": sum((stacks or {}).values()),
        "loop_thread_on_cpu_ms": ms * 0.9,
        "loop_thread_waiting_for_cpu_ms": 0.5,
        "gc": [{"generation": 2, "ms": ms * 0.8, "on_loop_thread": True}],
        "stacks": stacks or {},
        "other_threads": {},
    }
    return json.dumps(line)


LINES = [
    process(WORKER_A, SUPERVISOR),
    process(WORKER_B, SUPERVISOR),
    process(OTHER_GATEWAY, 1),
    moment(WORKER_A, 10.0, 120.0, {"main;run;turn;collect": 30, "main;run;turn": 5}),
    moment(WORKER_A, 12.0, 60.0, {"main;run;turn;collect": 10, "main;run;fetch": 20}),
    moment(WORKER_A, 13.0, 30.0, {"main;run;short": 9}),  # under 50 ms: left out
    moment(WORKER_B, 5.0, 240.0, {"main;run;before": 50}),  # before the window
    moment(OTHER_GATEWAY, 11.0, 500.0, {"main;run;elsewhere": 80}),  # another gateway's
    '{"kind": "moment", "pid": 101, "start_mo',  # cut short by a kill
]


def test_the_worst_moments_come_longest_first() -> None:
    recorded = parse_lines(LINES)
    assert [m["duration_ms"] for m in worst(recorded.moments, 3)] == [500.0, 240.0, 120.0]


def test_a_line_cut_short_is_counted_and_the_rest_read() -> None:
    recorded = parse_lines(LINES)
    assert recorded.unreadable_lines == 1
    assert len(recorded.moments) == 5
    assert len(recorded.processes) == 3


def test_top_stacks_are_the_most_sampled_first() -> None:
    stacks = {"a;b": 3, "a;c": 7, "a;d": 1}
    assert top_stacks(stacks, 2) == [("a;c", 7), ("a;b", 3)]


def test_the_window_summary_keeps_per_worker_the_moments_over_50_ms_inside_the_window() -> None:
    summary = window_summary(parse_lines(LINES), 8.0, 20.0, gateway=SUPERVISOR)
    assert summary["moments"] == 2
    by_pid = {row["pid"]: row for row in summary["workers"]}
    assert set(by_pid) == {WORKER_A, WORKER_B}  # not the other gateway's process
    assert by_pid[WORKER_A]["count"] == 2
    assert by_pid[WORKER_A]["longest_ms"] == 120.0
    assert by_pid[WORKER_A]["longest_at_s"] == 2.0
    assert by_pid[WORKER_A]["top_stacks"][0] == ["main;run;turn;collect", 40]
    assert by_pid[WORKER_B]["count"] == 0  # its one moment came before the window
    assert summary["workers"][0]["pid"] == WORKER_A  # the worst worker first


def test_the_printed_report_shows_each_moment_with_its_stacks_leaf_last() -> None:
    text = format_worst(parse_lines(LINES), count=2, stacks=1)
    lines = text.splitlines()
    assert lines[0].startswith("5 slow moments in 3 processes (1 unreadable lines)")
    assert lines[1].startswith(f"#1 pid {OTHER_GATEWAY}: 500.0 ms")
    assert "gen2 400.0 ms" in lines[1]
    assert lines[2].endswith("main;run;elsewhere")
    assert lines[3].startswith(f"#2 pid {WORKER_B}: 240.0 ms")
    assert len(lines) == 5  # one stack each


def test_a_directory_of_files_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / f"{WORKER_A}.jsonl").write_text("\n".join(LINES[:2]) + "\n")
    (tmp_path / f"{WORKER_B}.jsonl").write_text(LINES[3] + "\n")
    recorded = read_directory(tmp_path)
    assert (len(recorded.processes), len(recorded.moments)) == (2, 1)


def test_a_loop_lag_directory_that_cannot_be_made_is_refused_with_its_reason(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(argparse.ArgumentTypeError, match="cannot be made a directory"):
        writable_directory(str(blocker / "lag"))
    assert writable_directory(str(tmp_path / "new" / "lag")).is_dir()
