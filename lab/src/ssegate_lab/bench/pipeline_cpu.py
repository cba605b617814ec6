"""Where the CPU went during a benchmark case: the machine as a whole, and this process tree.

The machine's CPUs are shared with other work; :class:`CpuShare` reads ``/proc/stat`` for the
machine's busy time and ``/proc/<pid>/stat`` for this process and its live descendants, split
into the driver (this process), the Spark JVM, Spark's Python workers, and a Kafka broker and
an ssegate gateway started from here. A descendant that exits during the case takes its CPU
time with it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

_TICKS = os.sysconf("SC_CLK_TCK")


class CpuShare:
    """How busy the machine's CPUs were since creation, and which of it was this process tree:
    this process (the driver), its Spark JVM, Spark's Python workers, its Kafka broker and its
    gateway."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.machine = _machine_busy_s()
        self.ours = _tree_cpu_s(os.getpid())

    def shares(self) -> dict[str, Any]:
        wall = max(time.monotonic() - self.started, 1e-6) * (os.cpu_count() or 1)
        busy = _machine_busy_s() - self.machine
        now = _tree_cpu_s(os.getpid())
        ours = {part: round(now[part] - self.ours.get(part, 0.0), 1) for part in now}
        return {
            "machine_busy_share": round(min(busy / wall, 1.0), 2),
            "cpu_s": ours,
            "other_work_cpu_s": round(max(busy - sum(ours.values()), 0.0), 1),
        }


def _machine_busy_s() -> float:
    """Busy CPU-seconds of the whole machine since boot (``/proc/stat``)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICKS


def _tree_cpu_s(root: int) -> dict[str, float]:
    """CPU-seconds used so far by ``root`` and its live descendants, by part (``/proc``)."""
    parents: dict[int, int] = {}
    used: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        after_name = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parents[pid] = int(after_name[1])
        used[pid] = (_part(command), (int(after_name[11]) + int(after_name[12])) / _TICKS)
    totals = {
        "driver": 0.0, "spark_jvm": 0.0, "python_workers": 0.0, "broker": 0.0, "gateway": 0.0
    }  # fmt: skip
    for pid, (part, seconds) in used.items():
        ancestor = pid
        while ancestor > 1 and ancestor != root:
            ancestor = parents.get(ancestor, 0)
        if ancestor == root:
            totals[part] += seconds
    return totals


def _part(command: bytes) -> str:
    if b"kafka.Kafka" in command:
        return "broker"
    if b"SparkSubmit" in command:
        return "spark_jvm"
    if b"pyspark" in command:
        return "python_workers"
    if b"-m\0ssegate\0start\0" in command:
        return "gateway"
    return "driver"
