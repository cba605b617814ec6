"""What the lab's launchers share: processes that outlive the caller, found again by their
command line, and stopped.

The local Kafka broker (:mod:`ssegate_lab.broker`) and Spark cluster
(:mod:`ssegate_lab.spark_cluster`) start JVMs in sessions of their own, write their process ids
into their state directories, and later (maybe from another ``ssegate`` process) ask whether
such a pid is still theirs: alive, not a zombie, and with the arguments that name it on its
command line (a pid is reused once its process is gone). Processes started by this process are
reaped here, so none lingers as a zombie.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ssegate.jars import tail_lines

_children: dict[int, subprocess.Popen[bytes]] = {}


def spawn(
    command: Sequence[str], log_path: Path, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own, its output in ``log_path`` (the previous
    one kept as ``<name>.1``)."""
    if log_path.exists():
        log_path.replace(log_path.with_name(f"{log_path.name}.1"))
    with open(log_path, "wb") as log:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=None if env is None else {**os.environ, **env},
            start_new_session=True,
        )
    _children[child.pid] = child
    return child


def is_running(pid: int, *arguments: str) -> bool:
    """Whether ``pid`` runs, is not a zombie, and has every one of ``arguments``."""
    child = _children.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and all(argument.encode() in cmdline for argument in arguments)


def stop(pid: int, *arguments: str, timeout: float, signum: int = signal.SIGTERM) -> bool:
    """Send ``signum`` to ``pid`` (a process :func:`is_running` knows by ``arguments``),
    SIGKILL after ``timeout`` seconds; return whether it ended on ``signum``."""
    send(pid, signum)
    deadline = time.monotonic() + timeout
    while is_running(pid, *arguments) and time.monotonic() < deadline:
        time.sleep(0.05)
    clean = not is_running(pid, *arguments)
    if not clean:
        kill(pid, *arguments)
    _children.pop(pid, None)
    return clean


def kill(pid: int, *arguments: str) -> None:
    """SIGKILL ``pid``; return once it is gone."""
    send(pid, signal.SIGKILL)
    while is_running(pid, *arguments):
        time.sleep(0.05)
    _children.pop(pid, None)


def send(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether nothing accepts connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((host, port)) != 0


def log_tail(path: Path) -> str:
    """The last lines of a log, for an error message."""
    try:
        return tail_lines(path.read_text(errors="replace").splitlines())
    except OSError:
        return "(no log)"


def run_command(
    register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None],
    name: str,
    argv: Sequence[str],
) -> int:
    """Run ``ssegate NAME ARGV`` of a command ``register`` adds; return its exit status."""
    parser = argparse.ArgumentParser(prog="ssegate")
    register(parser.add_subparsers(required=True))
    args = parser.parse_args([name, *argv])
    status: int = args.func(args)
    return status
