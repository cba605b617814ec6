"""``ssegate start`` as a process: the open-file limit it raises and logs before it listens."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

from ssegate_lab.bench.foundation import write_static_config


def _soft_open_files(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-file limit in /proc")


def test_start_raises_the_soft_open_file_limit_to_the_hard_limit_and_logs_it(
    tmp_path: Path,
) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = 256 if hard == resource.RLIM_INFINITY else min(256, hard)

    def lowered() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))

    config, _, _ = write_static_config(tmp_path)
    gateway = subprocess.Popen(
        [sys.executable, "-m", "ssegate", "--log-level", "info", "start", "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lowered,
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
        logged = [line for line in lines if "gateway.open_files_limit" in line]
        soft = _soft_open_files(gateway.pid)
        expected = hard if hard != resource.RLIM_INFINITY else soft
        assert soft == expected > low
        assert logged and f"soft={soft}" in logged[0], lines
    finally:
        gateway.terminate()
        gateway.wait(10)
