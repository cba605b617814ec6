"""One delivery case of the proxy and fan-out benchmarks: streams open, events published, counts.

:func:`run_case` opens the streams of a :class:`~ssegate_lab.bench.load.LoadSpec`, lets a publisher
write a fixed rate for a fixed time, drains, and reports what the streams read: distinct
events, missing and duplicated ones (:mod:`~ssegate_lab.bench.validity`), latency percentiles and
a histogram, and the CPU of the server, its upstream, the publisher with the harness, and every
client process, with the busiest client's CPU share and whether it was saturated.

An h2 case holds most of its streams with h2load (:mod:`~ssegate_lab.bench.h2load`) and
:data:`~ssegate_lab.bench.h2load.LATENCY_STREAMS` with the Python h2 client, which measures latency
and counts events exactly; h2load's streams add their opened count, CPU and the events their
bytes carry, and the case says which client held what (``clients_by_client``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import time
from collections.abc import Callable
from typing import Any

from ssegate_lab.bench import validity
from ssegate_lab.bench.gateway import ProcessSample, machine_busy_seconds
from ssegate_lab.bench.h2load import THREADS, H2loadStreams, h2load_delivery, split
from ssegate_lab.bench.load import LoadClients, LoadResult, LoadSpec
from ssegate_lab.bench.publisher import Published

DRAIN_SECONDS = 1.5
H2LOAD_MARGIN_SECONDS = 3.0
"""h2load runs this long past the planned drain, so that it ends after the case does."""


def self_cpu_seconds() -> float:
    """This process's user and system CPU seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _no_process() -> ProcessSample:
    return ProcessSample(0, 0.0)


def run_case(
    spec: LoadSpec,
    rate: float,
    duration: float,
    processes: int,
    gateway: Callable[[], ProcessSample],
    upstream: Callable[[], ProcessSample] | None,
    publisher: Callable[[], Published],
    *,
    use_h2load: bool = True,
) -> dict[str, Any]:
    """One case: the streams of ``spec`` open, ``publisher`` publishes, the clients report.

    ``publisher`` publishes ``rate`` events/s for ``duration`` s from this process and returns
    what it wrote; ``gateway`` and ``upstream`` sample the server processes (``upstream`` is
    None for a server that takes the publications itself). An h2 case hands most streams to
    h2load unless ``use_h2load`` is false (or h2load is not installed).
    """
    upstream = upstream or _no_process
    python_count, bulk = (spec.clients, 0)
    if spec.protocol == "h2":
        python_count, bulk = split(spec.clients, use_h2load=use_h2load)
    with contextlib.ExitStack() as stack:
        load = stack.enter_context(
            LoadClients(dataclasses.replace(spec, clients=python_count), processes)
        )
        ready = load.wait_ready()
        h2load: H2loadStreams | None = None
        if bulk:
            h2load = _start_h2load(stack, spec, bulk, duration)
            time.sleep(h2load.open_seconds())
        else:
            time.sleep(0.2)
        gateway_before, upstream_before = gateway(), upstream()
        self_before, wall_before = self_cpu_seconds(), time.monotonic()
        busy_before, load_average = machine_busy_seconds(), os.getloadavg()[0]
        published = publisher()
        time.sleep(DRAIN_SECONDS)
        result = load.stop()
        stopped = time.monotonic()
        wall = stopped - wall_before
        gateway_after, upstream_after = gateway(), upstream()
        self_after, busy_after = self_cpu_seconds(), machine_busy_seconds()
        bulk_figures = _finish_h2load(h2load, result, stopped) if h2load else None
    gateway_cpu = gateway_after.cpu_seconds - gateway_before.cpu_seconds
    upstream_cpu = upstream_after.cpu_seconds - upstream_before.cpu_seconds
    harness_cpu = self_after - self_before
    clients_cpu = sum(result.cpu_seconds) + (bulk_figures["cpu_s"] if bulk_figures else 0.0)
    other = busy_after - busy_before - gateway_cpu - upstream_cpu - harness_cpu - clients_cpu
    measured: dict[str, Any] = {
        "wall": round(wall, 2),
        "gateway": round(gateway_cpu, 2),
        "upstream": round(upstream_cpu, 2),
        "publisher_and_harness": round(harness_cpu, 2),
        "clients": result.cpu_seconds,
        "other_work_on_machine": round(max(0.0, other), 2),
    }
    opened, failed, received = ready.opened, ready.failed, result.received
    closed_early = result.closed_early
    client = validity.client_load(result.cpu_seconds, wall)
    extra: dict[str, Any] = {}
    if bulk_figures is not None:
        measured["h2load"] = bulk_figures["cpu_s"]
        opened += bulk_figures["opened"]  # at most the streams h2load was given
        failed += bulk - bulk_figures["opened"]
        closed_early += bulk_figures.get("reopened", 0)  # ended, and opened again by h2load
        received += bulk_figures["events_estimated"]
        busiest = validity.client_load([bulk_figures["cpu_s"]], wall, THREADS)
        if busiest["client_cpu_share"] > client["client_cpu_share"]:
            client = busiest
        extra = {
            "clients_by_client": {"python-h2": python_count, "h2load": bulk},
            "latency_from": f"the Python h2 client's {ready.opened} stream(s)",
            "h2load": bulk_figures,
        }
    expected = published.events * opened
    span = (result.last_ns - published.started_ns) / 1e9 if result.last_ns else 0.0
    return {
        "protocol": spec.protocol,
        "clients": spec.clients,
        "opened": opened,
        "failed": failed,
        "rate": rate,
        "published": published.events,
        **validity.delivery(expected, received, result.duplicates, result.gaps, result.late, span),
        "closed_early": closed_early,
        "offered_events_per_s": round(expected / duration, 1),
        **client,
        "publisher_cpu_share": round(harness_cpu / wall, 3) if wall > 0 else 0.0,
        **extra,
        "latency_ms": result.histogram.summary(),
        "histogram_us": result.histogram.to_sparse(),
        "cpu_s": measured,
        "load_average_1min_at_start": round(load_average, 2),
        "gateway_rss_mib": round(gateway_after.rss_bytes / 2**20, 1),
        "upstream_rss_mib": round(upstream_after.rss_bytes / 2**20, 1),
        "errors": (ready.errors + result.errors)[:5],
    }


def _start_h2load(
    stack: contextlib.ExitStack, spec: LoadSpec, streams: int, duration: float
) -> H2loadStreams:
    scheme = "https" if spec.tls else "http"
    url = f"{scheme}://{spec.host}:{spec.port}{spec.path}"
    h2load = H2loadStreams(url, streams, spec.h2_streams, 0.0)
    h2load.seconds = h2load.open_seconds() + duration + DRAIN_SECONDS + H2LOAD_MARGIN_SECONDS
    return stack.enter_context(h2load)


def _finish_h2load(h2load: H2loadStreams, python: LoadResult, stopped: float) -> dict[str, Any]:
    """h2load's figures measured against the Python streams of the same case."""
    figures = h2load_delivery(h2load.finish(), python.body_bytes, python.opened, python.received)
    if stopped - h2load.started_at > h2load.seconds:
        figures["complete"] = False
        figures["error"] = "h2load's run ended before the case's drain did"
    return figures
