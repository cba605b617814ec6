"""``ssegate start`` as a process: the open-file limit it raises and logs before it listens, and
the garbage collector's schedule it sets once it serves."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ssegate.cli import main
from ssegate.host.allocator import LIBRARY
from ssegate_lab.bench.foundation import write_static_config


def _soft_open_files(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-file limit in /proc")


@contextlib.contextmanager
def _started(
    tmp_path: Path,
    preexec_fn: Callable[[], None] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """A gateway serving static files, logging at info, and the lines it wrote until started."""
    config, _, _ = write_static_config(tmp_path)
    gateway = subprocess.Popen(
        [sys.executable, "-m", "ssegate", "--log-level", "info", "start", "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=preexec_fn,
        env=env,
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


def _mapped(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_a_started_gateway_runs_on_jemalloc_in_the_same_process_and_says_so(
    tmp_path: Path,
) -> None:
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONMALLOC")}
    environ.pop("SSEGATE_ALLOCATOR", None)
    with _started(tmp_path, env=environ) as (gateway, lines):
        maps = _mapped(gateway.pid)  # the pid Popen started: run again, not forked
        variables = Path(f"/proc/{gateway.pid}/environ").read_bytes().split(b"\0")
    assert LIBRARY in maps, "jemalloc is not mapped"
    assert b"PYTHONMALLOC=malloc" in variables
    logged = [line for line in lines if "gateway.allocator" in line]
    assert logged and "allocator=jemalloc" in logged[0], lines


def test_the_gateway_stays_on_cpythons_allocator_when_asked(tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONMALLOC")}
    environ["SSEGATE_ALLOCATOR"] = "python"
    with _started(tmp_path, env=environ) as (gateway, lines):
        maps = _mapped(gateway.pid)
    assert LIBRARY not in maps
    logged = [line for line in lines if "gateway.allocator" in line]
    assert logged and "allocator=python" in logged[0], lines


def test_an_unknown_allocator_stops_start_with_one_line(tmp_path: Path) -> None:
    config, _, _ = write_static_config(tmp_path)
    environ = dict(os.environ, SSEGATE_ALLOCATOR="tcmalloc")
    done = subprocess.run(
        [sys.executable, "-m", "ssegate", "start", "-c", str(config)],
        capture_output=True, text=True, env=environ, timeout=30,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "ssegate: SSEGATE_ALLOCATOR: 'tcmalloc' is not an allocator"
        " (jemalloc, or python for CPython's own)"
    )


def test_start_called_in_a_process_of_its_own_only_runs_itself_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("start called in-process ran the process again")

    monkeypatch.setattr(os, "execve", refuse)
    monkeypatch.delenv("SSEGATE_ALLOCATOR", raising=False)
    assert main(["start", "-c", str(tmp_path / "missing.yaml")]) == 2
