"""Running the gateway: one event loop per process, ``--workers`` processes sharing the ports.

With one worker the gateway runs in this process (with ``SO_REUSEPORT`` when asked, so that
independent ``start`` processes share the ports). With more, this process forks the workers
(each opens its own listeners with ``SO_REUSEPORT``, so the kernel spreads connections across
them), forwards SIGINT/SIGTERM, and exits once they have drained. Bindings that do their work
once per host are linked to worker 0 before the fork (:mod:`.worker_links`). Processes sharing
ports pass HTTP/1.1 challenge answers to each other (:mod:`ssegate.guards.relay`). A worker that
fails to start stops the others: the gateway is up whole or not at all.

Every held connection is a file descriptor, so before anything listens the soft
``RLIMIT_NOFILE`` is raised to the hard limit (the workers inherit it), and each worker logs the
limit it runs with (``gateway.open_files_limit``) and the allocator it runs on
(``gateway.allocator``: :mod:`ssegate.host.allocator`). Once it serves, each worker's long-lived
objects are left out of the garbage collector's routine passes (:mod:`ssegate.host.collector`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ssegate.config.errors import ConfigError
from ssegate.config.model import Config
from ssegate.engine.runtime import Runtime
from ssegate.host import allocator, worker_links
from ssegate.host.collector import LongLivedObjects
from ssegate.host.worker_links import WorkerLink
from ssegate.quotas import shared as quotas
from ssegate.telemetry import log

DRAIN_SECONDS = 3.0
KILL_AFTER_SECONDS = 5.0
EXIT_CONFIG = 2
EXIT_START_FAILED = 1
NR_OPEN_DEFAULT = 1_048_576
"""The kernel's ceiling on descriptors per process when ``/proc/sys/fs/nr_open`` is unreadable."""


def install_event_loop() -> None:
    """Use uvloop where it is installed (it is a dependency; the fallback is for odd platforms)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def serve(
    config: Config,
    *,
    workers: int = 1,
    reuse_port: bool = False,
    on_ready: Callable[[Runtime], None] | None = None,
) -> int:
    """Run the gateway until SIGINT/SIGTERM; returns the process exit status. ``reuse_port``
    shares the ports with other gateway processes even with one worker."""
    raise_open_files_limit()
    if workers <= 1:
        return _run_worker(config, reuse_port=reuse_port, on_ready=on_ready)
    return _supervise(config, workers, on_ready)


def raise_open_files_limit() -> tuple[int, int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; (soft before, soft now, hard).

    A default soft limit of 1,024 would cap the gateway at about a thousand connections while
    the hard limit allows far more. An unlimited hard limit is capped at the kernel's
    ``nr_open``. If the raise is refused the soft limit stays as it was.
    """
    before, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _nr_open() if hard == resource.RLIM_INFINITY else hard
    if before != resource.RLIM_INFINITY and before < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return before, before, hard
        return before, target, hard
    return before, before, hard


def _nr_open() -> int:
    try:
        return int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        return NR_OPEN_DEFAULT


def _log_open_files_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard and hard != resource.RLIM_INFINITY:
        log.warning(
            "gateway.open_files_limit",
            pid=os.getpid(),
            soft=soft,
            hard=hard,
            reason="the soft limit could not be raised to the hard limit",
        )
    else:
        log.event("gateway.open_files_limit", pid=os.getpid(), soft=soft, hard=hard)


def _run_worker(
    config: Config,
    *,
    reuse_port: bool,
    on_ready: Callable[[Runtime], None] | None,
    links: Mapping[str, WorkerLink] | None = None,
) -> int:
    install_event_loop()
    return asyncio.run(_worker_main(config, reuse_port, on_ready, links))


async def _worker_main(
    config: Config,
    reuse_port: bool,
    on_ready: Callable[[Runtime], None] | None,
    links: Mapping[str, WorkerLink] | None,
) -> int:
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    runtime = Runtime(config, links=links)
    try:
        await runtime.start(reuse_port=reuse_port)
    except ConfigError as exc:
        print(f"ssegate: {exc}", file=sys.stderr)
        await runtime.stop(grace=0.5)
        return EXIT_CONFIG
    _log_open_files_limit()
    log.event("gateway.allocator", pid=os.getpid(), allocator=allocator.in_use())
    collector = LongLivedObjects.install(loop, runtime.metrics)
    if on_ready is not None:
        on_ready(runtime)
    await stopping.wait()
    log.event("gateway.stopping", pid=os.getpid())
    await runtime.stop(grace=DRAIN_SECONDS)
    if collector is not None:
        collector.close()
    return 0


def _supervise(config: Config, workers: int, on_ready: Callable[[Runtime], None] | None) -> int:
    children: list[int] = []
    links = worker_links.plan(config, workers)
    quotas.prepare(config)  # x-ssegate-quotas: counts every worker shares, made before the fork
    for index in range(workers):
        pid = os.fork()
        if pid == 0:  # the worker
            status = 1
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                status = _run_worker(
                    config,
                    reuse_port=True,
                    on_ready=on_ready if index == 0 else None,
                    links=links.take(index),
                )
            finally:
                os._exit(status)
        children.append(pid)
    links.close()

    stop_requested = False

    def request_stop(signum: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True
        for child in children:
            _signal(child, signal.SIGTERM)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    worst = 0
    remaining = set(children)
    deadline: float | None = None
    while remaining:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            if stop_requested and deadline is None:
                deadline = time.monotonic() + KILL_AFTER_SECONDS
            if deadline is not None and time.monotonic() > deadline:
                for child in remaining:
                    _signal(child, signal.SIGKILL)
            time.sleep(0.05)
            continue
        remaining.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        if code != 0 and not stop_requested:
            # A worker died on its own: the gateway is not whole any more; stop the others.
            print(f"ssegate: worker {pid} exited with status {code}; stopping", file=sys.stderr)
            worst = max(worst, code if code > 0 else EXIT_START_FAILED)
            stop_requested = True
            for child in remaining:
                _signal(child, signal.SIGTERM)
        elif code > 0:
            worst = max(worst, code)
    return worst


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
