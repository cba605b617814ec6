"""The reference fan-out server (``sse_floor.c``): built once by ``./run setup``, run as a process.

``sse_floor.c`` beside this module is the least a server can do per SSE delivery (its header
comment says what it is and is not). :func:`ensure_floor` compiles it with the machine's C
compiler and OpenSSL into the cache, under a name carrying the source's digest, so that a
changed source is built again; it is the ``sse-floor`` step of
:mod:`ssegate_lab.setup_tools`, and a test or a benchmark takes the binary with ``prepared``
and never builds it.

:class:`FloorServer` runs the binary against the bench's example upstream
(:class:`~ssegate_lab.bench.publisher.UpstreamProcess`) on a plain and a TLS port as a
:class:`~ssegate_lab.bench.ready_process.ReadyProcess` (started, sampled and stopped as the
upstream is), and reads what it said of its subscribers as it stopped
(``stopped subscribers=... dropped=...``).
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import subprocess
from pathlib import Path

from ssegate.cache import cache_root, refuse_when_offline
from ssegate.engine.runtime import free_port
from ssegate_lab.bench.gateway import ProcessSample, sample
from ssegate_lab.bench.ready_process import ReadyProcess

SOURCE = Path(__file__).with_name("sse_floor.c")
COMPILE_FLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")
LIBRARIES = ("-lssl", "-lcrypto")
BUILD_SECONDS = 120.0
READY = "sse floor: ready"
STOPPED = "sse floor: stopped"


class FloorBuildFailed(RuntimeError):
    """The C compiler could not build the reference server; the message says why."""


def floor_binary_path() -> Path:
    """Where the binary built from the current source lives in the cache."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return cache_root() / "bin" / f"sse-floor-{digest}"


def ensure_floor() -> Path:
    """The reference server's binary, compiled from ``sse_floor.c`` unless it is present."""
    binary = floor_binary_path()
    if binary.is_file():
        return binary
    refuse_when_offline("sse-floor", "the reference fan-out server (sse_floor.c)", binary)
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise FloorBuildFailed("no C compiler (cc or gcc) on PATH")
    binary.parent.mkdir(parents=True, exist_ok=True)
    building = binary.with_name(binary.name + ".building")
    argv = [compiler, *COMPILE_FLAGS, "-o", str(building), str(SOURCE), *LIBRARIES]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=BUILD_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        raise FloorBuildFailed(f"`{' '.join(argv)}` took over {BUILD_SECONDS:g} s") from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise FloorBuildFailed(f"`{' '.join(argv)}` failed (exit {done.returncode}):\n{tail}")
    building.replace(binary)
    return binary


def _process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (children of any of its threads)."""
    found, waiting = [], [pid]
    while waiting:
        member = waiting.pop()
        found.append(member)
        for task in Path(f"/proc/{member}/task").glob("*/children"):
            with contextlib.suppress(OSError, ValueError):
                waiting += [int(child) for child in task.read_text().split()]
    return found


def scheduled_seconds(pid: int) -> float | None:
    """CPU seconds the threads of ``pid`` and of the processes below it have run, to the
    nanosecond (``/proc/PID/task/TID/schedstat``); None when the kernel keeps no schedstat.

    ``/proc/PID/stat`` counts in clock ticks (10 ms), too coarse beside a server that spends
    about a microsecond per delivery; a thread that ended is no longer counted here, and the
    servers measured keep their threads for the whole run."""
    total, seen = 0, False
    for member in _process_tree(pid):
        for task in Path(f"/proc/{member}/task").glob("*/schedstat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(task.read_text().split()[0])
                seen = True
    return total / 1e9 if seen else None


def precise_sample(pid: int) -> ProcessSample:
    """:func:`~ssegate_lab.bench.gateway.sample` with the CPU of :func:`scheduled_seconds`
    when the kernel keeps it."""
    ticks = sample(pid)
    scheduled = scheduled_seconds(pid)
    return ticks if scheduled is None else ProcessSample(ticks.rss_bytes, scheduled)


class FloorServer(ReadyProcess):
    """The reference server in a child process on free loopback ports, fed by one upstream."""

    def __init__(
        self,
        binary: Path,
        upstream_port: int,
        certificate: tuple[Path, Path] | None = None,
        *,
        max_buffered: int = 1 << 20,
        timeout: float = 20.0,
    ) -> None:
        """With ``certificate`` (certificate PEM, key PEM) it also listens for TLS 1.3."""
        self.port = free_port()
        self.tls_port = free_port() if certificate else 0
        argv = [str(binary), "--port", str(self.port), "--upstream-port", str(upstream_port)]
        argv += ["--max-buffered", str(max_buffered)]
        if certificate is not None:
            cert, key = certificate
            argv += ["--tls-port", str(self.tls_port), "--cert", str(cert), "--key", str(key)]
        super().__init__(argv, READY, "the reference server", timeout)

    def stopped_counts(self) -> dict[str, int]:
        """What the server said as it stopped: subscribers, dropped, events (empty before)."""
        for line in reversed(self.output):
            if line.startswith(STOPPED):
                pairs = (item.split("=", 1) for item in line.split()[3:] if "=" in item)
                return {name: int(value) for name, value in pairs}
        return {}
