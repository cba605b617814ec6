"""A gateway under measurement: a real ``ssegate start`` process on loopback.

Benchmarks never measure an in-process gateway: the load generator would share its event loop
and its memory. :class:`GatewayProcess` writes a config, starts ``python -m ssegate start`` with
it, waits until every listener is up, and reads the process's CPU time and resident memory
from ``/proc``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from ssegate.host.allocator import jemalloc_mapped

_PAUSE = re.compile(r"pause_ms[=\":\s]+([0-9.]+)")


@dataclass(frozen=True, slots=True)
class ProcessSample:
    rss_bytes: int
    cpu_seconds: float


def sample(pid: int) -> ProcessSample:
    """Resident memory and CPU time (user + system) of ``pid`` and its children, from ``/proc``."""
    rss = 0
    cpu = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for member in [pid, *_children(pid)]:
        try:
            status = Path(f"/proc/{member}/status").read_text()
            stat = Path(f"/proc/{member}/stat").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1]) * 1024
        fields = stat.rsplit(")", 1)[1].split()
        cpu += (int(fields[11]) + int(fields[12])) / ticks
    return ProcessSample(rss, cpu)


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine spent not idle since boot (``/proc/stat``).

    The difference over a run, minus what the measured processes used, is what other work on
    the machine took from the same cores.
    """
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(value) for value in fields[:8]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    kids = [int(p) for p in text.split()]
    return kids + [g for k in kids for g in _children(k)]


class GatewayProcess:
    """``ssegate start -c CONFIG`` in a child process, stopped on exit from the ``with``."""

    def __init__(
        self,
        config_path: Path,
        *,
        workers: int = 1,
        reuse_port: bool = False,
        env: dict[str, str] | None = None,
        expect_listeners: int = 1,
        timeout: float = 30.0,
        history: int = 200,
    ) -> None:
        self.config_path = config_path
        self.workers = workers
        self.reuse_port = reuse_port
        """``--reuse-port``: share the ports with other gateway processes."""
        self.env = {**os.environ, **(env or {})}
        self.expect_listeners = expect_listeners
        self.timeout = timeout
        self.process: subprocess.Popen[str] | None = None
        self.output: deque[str] = deque(maxlen=history)
        """The last ``history`` lines the gateway wrote (stdout and stderr)."""
        self.full_collections: list[tuple[float, float]] = []
        """``(time.monotonic(), pause in ms)`` of each full collection a worker logged
        (``gateway.gc_full``), when its line was read."""

    def __enter__(self) -> GatewayProcess:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ssegate",
                "start",
                "-c",
                str(self.config_path),
                "--workers",
                str(self.workers),
                *(["--reuse-port"] if self.reuse_port else []),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env,
        )
        deadline = time.monotonic() + self.timeout
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self._read(line)
            if line.startswith("ssegate: started"):
                # Keep draining the pipe, or a chatty gateway would block on a full pipe.
                threading.Thread(target=self._drain, daemon=True).start()
                return self
        self.stop()
        raise RuntimeError("gateway did not start:\n" + "\n".join(list(self.output)[-20:]))

    def _drain(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self._read(line)

    def _read(self, line: str) -> None:
        self.output.append(line.rstrip())
        if "gateway.gc_full" in line:
            found = _PAUSE.search(line)
            pause = float(found.group(1)) if found else float("nan")
            self.full_collections.append((time.monotonic(), pause))

    def collections_in(self, started: float, ended: float) -> dict[str, float | int]:
        """The full collections logged between two ``time.monotonic()`` instants (a measured
        window): how many, and the longest pause in ms. Each stopped a worker's loop for the
        whole of its pause, so a case that had one measured that pause, not the gateway."""
        pauses = [pause for at, pause in self.full_collections if started <= at <= ended]
        return {
            "gc_full_in_window": len(pauses),
            "gc_longest_full_pause_ms": max(pauses, default=0.0),
        }

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def sample(self) -> ProcessSample:
        return sample(self.pid)

    def allocator(self) -> str:
        """The C allocator the gateway runs on: ``jemalloc`` when it is mapped, else ``python``
        (CPython's own, over glibc's)."""
        return "jemalloc" if jemalloc_mapped(self.pid) else "python"

    def logged(self, text: str, timeout: float = 5.0) -> list[str]:
        """Recent output lines holding ``text``, waiting up to ``timeout`` s for the first."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [line for line in list(self.output) if text in line]
            if lines or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)

    def warnings(self, limit: int = 40, width: int = 400) -> list[str]:
        """The gateway's last ``limit`` warning and error lines of its own (librdkafka's are
        left out), each cut at ``width`` characters: what a result keeps of the log."""
        mine = [
            line[:width]
            for line in list(self.output)
            if (" WARNING " in line or " ERROR " in line) and not line.startswith("%")
        ]
        return mine[-limit:]

    def stop(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
