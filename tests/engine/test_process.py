"""``ssegate start`` as a process: the open-file limit it raises and logs before it listens, and
the garbage collector's schedule it sets once it serves."""

from __future__ import annotations

import contextlib
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ssegate_lab.bench.foundation import write_static_config


def _soft_open_files(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-file limit in /proc")


@contextlib.contextmanager
def _started(
    tmp_path: Path, preexec_fn: Callable[[], None] | None = None
) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """A gateway serving static files, logging at info, and the lines it wrote until started."""
    config, _, _ = write_static_config(tmp_path)
    gateway = subprocess.Popen(
        [sys.executable, "-m", "ssegate", "--log-level", "info", "start", "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=preexec_fn,
    )
    try:
        assert gateway.stdout is not None
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = gateway.stdout.readline()
            lines.append(line)
            if not line or line.startswith("ssegate: started"):
                break
        assert any(line.startswith("ssegate: started") for line in lines), lines
        yield gateway, lines
    finally:
        gateway.terminate()
        gateway.wait(10)


def test_start_raises_the_soft_open_file_limit_to_the_hard_limit_and_logs_it(
    tmp_path: Path,
) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = 256 if hard == resource.RLIM_INFINITY else min(256, hard)

    def lowered() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))

    with _started(tmp_path, lowered) as (gateway, lines):
        logged = [line for line in lines if "gateway.open_files_limit" in line]
        soft = _soft_open_files(gateway.pid)
    expected = hard if hard != resource.RLIM_INFINITY else soft
    assert soft == expected > low
    assert logged and f"soft={soft}" in logged[0], lines


def test_a_started_worker_freezes_its_long_lived_objects_and_says_so(tmp_path: Path) -> None:
    with _started(tmp_path) as (_, lines):
        logged = [line for line in lines if "gateway.gc " in line]
    assert logged, lines
    assert "policy=long-lived objects frozen" in logged[0]
    frozen = int(logged[0].split("frozen=")[1].split()[0])
    assert frozen > 10_000  # the modules, config and bindings built at start
