"""A Spark standalone cluster on this machine, made of the jars pyspark ships: a master, N workers.

``ssegate spark start`` runs ``org.apache.spark.deploy.master.Master`` and one
``org.apache.spark.deploy.worker.Worker`` per worker, each a JVM of its own on 127.0.0.1,
detached from the caller until ``ssegate spark stop``; ``ssegate pipeline run --master
spark://127.0.0.1:7077`` then runs a pipeline there. pyspark's ``jars/`` directory is
the classpath and pyspark's directory is ``SPARK_HOME``, where a worker finds the jars of the
executors it launches. Everything lives in one directory::

    <dir>/cluster.json     ports, sizes and process ids, rewritten whenever a process starts
    <dir>/master.log       the master's output (previous run: master.log.1)
    <dir>/worker-<n>.log   worker n's output
    <dir>/worker-<n>/      worker n's work directory: per application, each executor's
                           stdout and stderr

The master's state (its workers, ALIVE or DEAD, and its applications) is what its web UI serves
as JSON at ``/json/``; a worker is ready once it is listed there ALIVE. A worker killed (even
with SIGKILL) takes its executors with it: each executor watches its worker and exits when the
connection drops. :func:`start_cluster` on a directory whose master runs starts only the
workers that are not running, so it also brings back a killed worker.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssegate.cache import cache_root
from ssegate.engine.runtime import free_port
from ssegate.telemetry.log import event
from ssegate_lab import daemons

DEFAULT_PORT = 7077
DEFAULT_WEB_PORT = 8080
STOP_TIMEOUT = 30.0
DAEMON_HEAP = "256m"
"""The master and the workers only schedule; the executors have their own JVMs."""
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_STATE_FILE = "cluster.json"


class ClusterError(Exception):
    """The cluster could not be started or described; the message says why."""


@dataclass(frozen=True)
class WorkerInfo:
    index: int
    pid: int
    port: int
    work_dir: Path
    log_path: Path


@dataclass(frozen=True)
class ClusterInfo:
    port: int
    web_port: int
    directory: Path
    master_pid: int
    workers: tuple[WorkerInfo, ...]
    """The workers whose process runs, by index."""

    @property
    def master_url(self) -> str:
        return _master_url(self.port)

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def worker(self, index: int) -> WorkerInfo:
        for worker in self.workers:
            if worker.index == index:
                return worker
        raise ClusterError(f"worker {index} of the cluster in {self.directory} is not running")


def default_directory(port: int = DEFAULT_PORT) -> Path:
    return cache_root() / f"spark-cluster-{port}"


def start_cluster(
    directory: Path | None = None,
    *,
    port: int = DEFAULT_PORT,
    web_port: int = DEFAULT_WEB_PORT,
    workers: int = 2,
    cores: int = 1,
    memory: str = "1g",
    timeout: float = 120.0,
) -> ClusterInfo:
    """Start what is not running of a master on 127.0.0.1:``port`` and ``workers`` workers,
    each offering ``cores`` cores and ``memory`` to executors; return once all are ALIVE.

    A master already running on ``directory`` keeps its ports (asking for others is an error);
    its workers that run are left alone, the missing ones started.
    """
    directory = (directory or default_directory(port)).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    with open(directory / ".start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two callers starting one directory start one cluster
        state = _read_state(directory)
        if not _is_daemon(state.get("master_pid", 0), _MASTER_CLASS, directory):
            state = _launch_master(directory, port, web_port, deadline)
        elif (state["port"], state["web_port"]) != (port, web_port):
            raise ClusterError(f"the cluster in {directory} already runs at"
                               f" {_master_url(state['port'])}")  # fmt: skip
        pids = [w for w in state.get("workers", []) if w["index"] >= workers]
        for index in range(workers):
            known = _worker_state(state, index)
            if known and _is_daemon(known["pid"], _WORKER_CLASS, directory):
                pids.append(known)
            else:
                pids.append(_launch_worker(directory, state["port"], index, cores, memory))
        state["workers"] = sorted(pids, key=lambda w: int(w["index"]))
        _write_state(directory, state)
    info = _info(directory, state)
    _wait_for_workers(info, [w.port for w in info.workers if w.index < workers], deadline)
    event("pipeline.cluster.started", master=info.master_url, workers=len(info.workers))
    return info


def cluster_status(target: Path | int | None = None) -> ClusterInfo | None:
    """The cluster of a directory (or of a port's default directory), if its master runs."""
    directory = _directory_of(target)
    state = _read_state(directory)
    if not _is_daemon(state.get("master_pid", 0), _MASTER_CLASS, directory):
        return None
    return _info(directory, state)


def stop_cluster(target: Path | int | None = None, *, timeout: float = STOP_TIMEOUT) -> bool:
    """Stop the workers (each stops its executors), then the master: SIGTERM, SIGKILL after
    ``timeout`` seconds. Returns False when nothing of the cluster was running."""
    directory = _directory_of(target)
    state = _read_state(directory)
    workers = [(int(w["pid"]), _WORKER_CLASS) for w in state.get("workers", [])]
    running = [(pid, name) for pid, name in workers if _is_daemon(pid, name, directory)]
    _end(running, directory, timeout)
    master = [(int(state.get("master_pid", 0)), _MASTER_CLASS)]
    master = [(pid, name) for pid, name in master if _is_daemon(pid, name, directory)]
    _end(master, directory, timeout)
    (directory / _STATE_FILE).unlink(missing_ok=True)
    if running or master:
        event("pipeline.cluster.stopped", directory=directory)
    return bool(running or master)


def kill_worker(info: ClusterInfo, index: int) -> None:
    """SIGKILL worker ``index``, as a machine's crash would end it; return once it is gone."""
    worker = info.worker(index)
    daemons.kill(worker.pid, _WORKER_CLASS, _cluster_property(info.directory))
    event("pipeline.cluster.worker.killed", index=index, pid=worker.pid)


def master_state(info: ClusterInfo, timeout: float = 5.0) -> dict[str, Any]:
    """What the master's web UI says as JSON: ``workers`` (with ``port`` and ``state``),
    ``activeapps``, ``aliveworkers``..."""
    with urllib.request.urlopen(f"{info.web_url}/json/", timeout=timeout) as answer:
        document: dict[str, Any] = json.load(answer)
    return document


def spark_home() -> Path:
    """pyspark's directory: its ``jars/`` is Spark's classpath."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "jars").is_dir():
        raise ClusterError(f"pyspark at {home} has no jars/ directory")
    return home


def _launch_master(directory: Path, port: int, web_port: int, deadline: float) -> dict[str, Any]:
    for wanted in (port, web_port):
        if not daemons.port_is_free(wanted):
            raise ClusterError(f"port {wanted} on 127.0.0.1 is already in use by another process")
    arguments = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web_port)]
    pid = _launch(directory, "master", _MASTER_CLASS, arguments)
    state: dict[str, Any] = {"port": port, "web_port": web_port, "master_pid": pid, "workers": []}
    _write_state(directory, state)
    info = _info(directory, state)
    while True:
        with contextlib.suppress(OSError, ValueError):
            if master_state(info, timeout=2.0).get("status") == "ALIVE":
                return state
        _check_alive(pid, _MASTER_CLASS, directory, "master", deadline)
        time.sleep(0.2)


def _launch_worker(
    directory: Path, master_port: int, index: int, cores: int, memory: str
) -> dict[str, Any]:
    work_dir = directory / f"worker-{index}"
    work_dir.mkdir(exist_ok=True)
    port = free_port()
    arguments = [
        _master_url(master_port), "--host", "127.0.0.1", "--port", str(port),
        "--webui-port", "0", "--cores", str(cores), "--memory", memory,
        "--work-dir", str(work_dir),
    ]  # fmt: skip
    pid = _launch(directory, f"worker-{index}", _WORKER_CLASS, arguments)
    return {"index": index, "pid": pid, "port": port}


def _launch(directory: Path, name: str, main_class: str, arguments: list[str]) -> int:
    home = spark_home()
    command = [
        "java", f"-Xmx{DAEMON_HEAP}", "-XX:+ExitOnOutOfMemoryError", "-XX:TieredStopAtLevel=1",
        "-Dspark.port.maxRetries=0", _cluster_property(directory),
        "-cp", f"{home / 'jars'}/*", main_class, *arguments,
    ]  # fmt: skip
    log_path = directory / f"{name}.log"
    return daemons.spawn(command, log_path, directory, _daemon_environment(home)).pid


def _daemon_environment(home: Path) -> Mapping[str, str]:
    """What ``sbin/spark-daemon.sh`` would set: a worker builds its executors' command from it."""
    core = next(iter(sorted((home / "jars").glob("spark-core_*.jar"))), None)
    found = re.match(r"spark-core_(\d+\.\d+)-", core.name) if core else None
    if found is None:
        raise ClusterError(f"no spark-core jar in {home / 'jars'}")
    return {
        "SPARK_HOME": str(home),
        "SPARK_SCALA_VERSION": found.group(1),
        "SPARK_LOCAL_IP": "127.0.0.1",  # the web UIs listen on loopback only
        "SPARK_PUBLIC_DNS": "127.0.0.1",  # and say so in their links
    }


def _wait_for_workers(info: ClusterInfo, ports: list[int], deadline: float) -> None:
    while True:
        with contextlib.suppress(OSError, ValueError):
            alive = {w["port"] for w in master_state(info)["workers"] if w["state"] == "ALIVE"}
            if alive >= set(ports):
                return
        for worker in info.workers:
            _check_alive(worker.pid, _WORKER_CLASS, info.directory, f"worker-{worker.index}",
                         deadline)  # fmt: skip
        time.sleep(0.2)


def _check_alive(pid: int, main_class: str, directory: Path, name: str, deadline: float) -> None:
    log_path = directory / f"{name}.log"
    if not _is_daemon(pid, main_class, directory):
        raise ClusterError(f"the Spark {name} exited while starting; last lines of {log_path}:\n"
                           f"{daemons.log_tail(log_path)}")  # fmt: skip
    if time.monotonic() > deadline:
        raise ClusterError(f"the Spark {name} did not get ready in time; last lines of {log_path}:"
                           f"\n{daemons.log_tail(log_path)}")  # fmt: skip


def _end(processes: list[tuple[int, str]], directory: Path, timeout: float) -> None:
    for pid, main_class in processes:
        daemons.stop(pid, main_class, _cluster_property(directory), timeout=timeout)


def _info(directory: Path, state: Mapping[str, Any]) -> ClusterInfo:
    workers = tuple(
        WorkerInfo(int(w["index"]), int(w["pid"]), int(w["port"]),
                   directory / f"worker-{w['index']}", directory / f"worker-{w['index']}.log")
        for w in state.get("workers", [])
        if _is_daemon(int(w["pid"]), _WORKER_CLASS, directory)
    )  # fmt: skip
    return ClusterInfo(
        int(state["port"]),
        int(state["web_port"]),
        directory,
        int(state["master_pid"]),
        workers,
    )


def _worker_state(state: Mapping[str, Any], index: int) -> dict[str, Any] | None:
    for worker in state.get("workers", []):
        if worker["index"] == index:
            return dict(worker)
    return None


def _read_state(directory: Path) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads((directory / _STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return state


def _write_state(directory: Path, state: Mapping[str, Any]) -> None:
    staged = directory / f".{_STATE_FILE}.{os.getpid()}.tmp"
    staged.write_text(json.dumps(state, indent=2) + "\n")
    staged.replace(directory / _STATE_FILE)


def _is_daemon(pid: int, main_class: str, directory: Path) -> bool:
    """Whether ``pid`` is this directory's master or worker JVM, not exited."""
    return daemons.is_running(pid, main_class, _cluster_property(directory))


def _cluster_property(directory: Path) -> str:
    """The JVM option that tells a cluster's processes from others (and other clusters')."""
    return f"-Dssegate.spark.cluster={directory}"


def _directory_of(target: Path | int | None) -> Path:
    if isinstance(target, int):
        return default_directory(target).resolve()
    return (target or default_directory()).resolve()


def _master_url(port: int) -> str:
    return f"spark://127.0.0.1:{port}"


def add_spark_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``spark start|stop|status``; each sets ``func`` to a handler returning a status."""
    spark = subparsers.add_parser(
        "spark",
        help="run a Spark standalone cluster for the pipeline",
        description="A Spark standalone master and workers on 127.0.0.1, from pyspark's jars,"
        " running detached until `ssegate spark stop`; `ssegate pipeline run --master URL`"
        " runs a pipeline there.",
    )
    commands = spark.add_subparsers(title="commands", metavar="COMMAND", required=True)
    start = commands.add_parser("start", help="start the master and workers; print the master URL")
    _add_location_arguments(start)
    start.add_argument("--web-port", type=int, default=DEFAULT_WEB_PORT, metavar="PORT",
                       help=f"the master's web UI (default: {DEFAULT_WEB_PORT})")  # fmt: skip
    start.add_argument("--workers", type=int, default=2, help="how many workers (default: 2)")
    start.add_argument("--cores", type=int, default=1, help="cores per worker (default: 1)")
    start.add_argument("--memory", default="1g",
                       help="memory per worker for its executors (default: 1g)")  # fmt: skip
    start.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                       help="how long to wait for every worker (default: 120)")  # fmt: skip
    start.set_defaults(func=_start_command)
    stop = commands.add_parser("stop", help="stop the workers and the master")
    _add_location_arguments(stop)
    stop.set_defaults(func=_stop_command)
    status = commands.add_parser("status", help="say whether the master runs (exit 0) or not (1)")
    _add_location_arguments(status)
    status.set_defaults(func=_status_command)


def cli_spark(argv: Sequence[str]) -> int:
    """Run ``ssegate spark ARGV`` and return its exit status."""
    return daemons.run_command(add_spark_parser, "spark", argv)


def _add_location_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"the master's port on 127.0.0.1 (default: {DEFAULT_PORT})",
    )
    parser.add_argument("--dir", type=Path, metavar="DIR",
                        help="state and logs (default: $SSEGATE_CACHE or ~/.cache/ssegate,"
                        " then spark-cluster-PORT)")  # fmt: skip


def _start_command(args: argparse.Namespace) -> int:
    try:
        info = start_cluster(args.dir, port=args.port, web_port=args.web_port,
                             workers=args.workers, cores=args.cores, memory=args.memory,
                             timeout=args.timeout)  # fmt: skip
    except ClusterError as exc:
        print(f"ssegate: {exc}", file=sys.stderr)
        return 1
    _describe(info)
    return 0


def _stop_command(args: argparse.Namespace) -> int:
    directory = _directory_of(args.dir or args.port)
    stopped = stop_cluster(directory)
    print(f"{'stopped' if stopped else 'no cluster was running in'} {directory}")
    return 0


def _status_command(args: argparse.Namespace) -> int:
    info = cluster_status(args.dir or args.port)
    if info is None:
        print("not running")
        return 1
    _describe(info)
    return 0


def _describe(info: ClusterInfo) -> None:
    print(f"master: {info.master_url}")
    print(f"web UI: {info.web_url}")
    print(f"workers: {len(info.workers)} running, logs and state in {info.directory}")
