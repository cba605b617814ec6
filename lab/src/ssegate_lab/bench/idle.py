"""``ssegate bench idle``: the gateway's resident memory per idle connection, plain and TLS.

N connections (TCP, or TCP with a completed TLS handshake) are opened to a gateway serving
static files (:func:`~ssegate_lab.bench.foundation.write_static_config`) and left idle: no request
is sent. The gateway's RSS, summed over its processes, is read before and once it holds every
connection; the growth divided by the connections it holds (counted as its open descriptors)
is the cost of one idle connection.

:mod:`ssegate_lab.bench.idle_plan` sizes a run to the machine: gateway workers and client processes
for the open-file limit, 127.0.0.x source addresses for the ephemeral ports, connects in flight
for the listen backlog. The client processes are :mod:`ssegate_lab.bench.idle_clients`.

The gateway closes a connection that has sent no request after the HTTP idle timeout
(:attr:`HttpLimits.idle_timeout`, 60 s), so connecting stops ``OPEN_MARGIN_SECONDS`` before
that: the first connection must still be open when memory is read. A count that cannot be
opened in that time (thousands of TLS handshakes) is measured at what did open, and the result
says so (``complete: false``).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ssegate.bindings.http.types import HttpLimits
from ssegate_lab.bench import validity
from ssegate_lab.bench.foundation import write_static_config
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.bench.idle_clients import HoldingClients, HoldSpec
from ssegate_lab.bench.idle_plan import (
    IdlePlan,
    PlanError,
    machine_limits,
    plan_idle,
    source_addresses,
)

SETTLE_SECONDS = 2.0
OPEN_MARGIN_SECONDS = 12.0
"""Connecting stops this long before the gateway's idle timeout would close the first one."""
HELD_WAIT_SECONDS = 20.0
"""How long the gateway may take to accept what the clients opened before memory is read."""


def open_deadline() -> float:
    """Seconds a phase may spend connecting before its first connection would time out."""
    return max(5.0, HttpLimits().idle_timeout - OPEN_MARGIN_SECONDS)


def run_idle(
    count: int = 10_000,
    *,
    tls_count: int | None = None,
    runs: int = 1,
    gateway_workers: int | None = None,
    client_processes: int | None = None,
    settle: float = SETTLE_SECONDS,
) -> dict[str, Any]:
    """RSS per idle connection: ``count`` plain, then ``tls_count`` TLS (0: none), ``runs``
    times each; the run with the median cost is reported, every run is kept."""
    if runs < 1:
        raise PlanError("runs must be 1 or more")
    limits = machine_limits()
    tls_count = count if tls_count is None else tls_count
    phases: list[tuple[str, int]] = [("plain", count)]
    if tls_count > 0:
        phases.append(("tls", tls_count))
    plans = {
        label: plan_idle(
            wanted,
            limits,
            gateway_workers=gateway_workers,
            client_processes=client_processes,
            # TLS handshakes are CPU-bound in the client: one process per core.
            min_client_processes=min(2, os.cpu_count() or 1) if label == "tls" else 1,
        )
        for label, wanted in phases
    }
    deadline = open_deadline()
    results: dict[str, Any] = {
        "scenario": "idle",
        "connections": count,
        "tls_connections": tls_count,
        "runs": runs,
        "open_deadline_s": deadline,
        "gateway_idle_timeout_s": HttpLimits().idle_timeout,
        "limits": asdict(limits),
        "plan": {label: asdict(plan) for label, plan in plans.items()},
    }
    with tempfile.TemporaryDirectory() as tmp:
        config, plain_port, tls_port = write_static_config(Path(tmp))
        block = 0
        for label, _ in phases:
            plan = plans[label]
            measured = []
            for _ in range(runs):
                port = tls_port if label == "tls" else plain_port
                sources = source_addresses(plan, block)
                block += 1
                measured.append(_measure(config, port, label == "tls", plan, sources, settle))
            results[label] = _median_run(measured)
    return results


def _median_run(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median cost per connection, with every run's cost beside it."""
    ordered = sorted(measured, key=lambda run: int(run["bytes_per_connection"]))
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["bytes_per_connection_runs"] = [run["bytes_per_connection"] for run in measured]
    kept = (
        "asked",
        "opened",
        "complete",
        "held_by_gateway",
        "open_seconds",
        "bytes_per_connection",
    )
    chosen["each_run"] = [{field: run[field] for field in kept} for run in measured]
    chosen["bytes_per_connection_median"] = round(
        statistics.median(run["bytes_per_connection"] for run in measured)
    )
    return chosen


def _measure(
    config: Path, port: int, use_tls: bool, plan: IdlePlan, sources: tuple[str, ...], settle: float
) -> dict[str, Any]:
    deadline = open_deadline()
    base_count, extra = divmod(plan.connections, plan.client_processes)
    specs = [
        HoldSpec(
            port=port,
            count=base_count + (1 if index < extra else 0),
            tls=use_tls,
            sources=sources,
            in_flight=plan.connects_in_flight,
            open_seconds=deadline,
        )
        for index in range(plan.client_processes)
    ]
    with GatewayProcess(config, workers=plan.gateway_workers) as gateway:
        _wait_for_listeners(port, plan.gateway_workers)
        time.sleep(settle)
        base = gateway.sample().rss_bytes
        base_files = _open_files(gateway.pid)
        with HoldingClients(specs) as clients:
            ready = clients.wait_ready(deadline + 60)
            opened = sum(report["opened"] for report in ready)
            seconds = max(report["seconds"] for report in ready)
            _wait_for_files(gateway.pid, sum(base_files.values()) + opened)
            time.sleep(settle)
            loaded = gateway.sample().rss_bytes
            loaded_files = _open_files(gateway.pid)
            clients.close()
        workers = [pid for pid in base_files if pid != gateway.pid] or [gateway.pid]
        held_per_process = [loaded_files.get(pid, 0) - base_files[pid] for pid in workers]
        held = sum(loaded_files.values()) - sum(base_files.values())
        return {
            "asked": plan.connections,
            "opened": opened,
            "held_by_gateway": held,
            "complete": opened == plan.connections,
            "failed": sum(report["failed"] for report in ready),
            "open_seconds": round(seconds, 2),
            "connects_per_s": round(opened / max(seconds, 0.001), 1),
            "gateway_processes": plan.gateway_workers,
            "held_per_gateway_process": sorted(held_per_process, reverse=True),
            "gateway_open_files_limit": _open_files_limit(gateway.pid),
            "client_processes": plan.client_processes,
            "client_cpu_s": round(sum(report["cpu_seconds"] for report in ready), 2),
            **validity.client_load([report["cpu_seconds"] for report in ready], seconds),
            "source_addresses": f"{sources[0]}-{sources[-1].rsplit('.', 1)[1]}",
            "rss_base_mib": round(base / 2**20, 1),
            "rss_loaded_mib": round(loaded / 2**20, 1),
            "bytes_per_connection": round((loaded - base) / (held if held > 0 else max(opened, 1))),
            "errors": [error for report in ready for error in report["errors"]][:5],
        }


# -- the gateway's side, from /proc ---------------------------------------------------------------


def _processes(pid: int) -> list[int]:
    """``pid`` and its descendants (a gateway with workers is a supervisor and its forks)."""
    found = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return found
    for child in children:
        found.extend(_processes(int(child)))
    return found


def _open_files(pid: int) -> dict[int, int]:
    counts = {}
    for member in _processes(pid):
        with contextlib.suppress(OSError):
            counts[member] = len(os.listdir(f"/proc/{member}/fd"))
    return counts


def _open_files_limit(pid: int) -> int | None:
    """The soft open-file limit the gateway's last process runs with (a worker, if any)."""
    try:
        limits = Path(f"/proc/{_processes(pid)[-1]}/limits").read_text()
    except OSError:
        return None
    for line in limits.splitlines():
        if line.startswith("Max open files"):
            value = line.split()[3]
            return int(value) if value.isdigit() else None
    return None


def _listeners(port: int) -> int:
    """Listening sockets on ``port`` (one per worker with ``SO_REUSEPORT``)."""
    try:
        table = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return 0
    wanted = f":{port:04X}"
    return sum(1 for row in table if row.split()[1].endswith(wanted) and row.split()[3] == "0A")


def _wait_for_listeners(port: int, workers: int, timeout: float = 30.0) -> None:
    """Every worker listens before the first connect, or the kernel hashes all to the first."""
    deadline = time.monotonic() + timeout
    while _listeners(port) < workers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{workers} gateway workers did not all listen on {port}")
        time.sleep(0.1)


def _wait_for_files(pid: int, target: int) -> None:
    """Until the gateway holds ``target`` descriptors, or stops gaining them."""
    deadline = time.monotonic() + HELD_WAIT_SECONDS
    last, still_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = sum(_open_files(pid).values())
        if now >= target:
            return
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since > 3.0:
            return
        time.sleep(0.2)
