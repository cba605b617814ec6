"""``ssegate bench fanout``: plain SSE fan-out through ssegate, and Mercure beside it, pair by pair.

Both servers get the same load from the same code. ssegate runs the chain of ``bench proxy``
(:func:`~ssegate.bench.proxy.write_proxy_config`: the gateway proxying the example upstream,
which the fixed-rate publisher feeds); Mercure (:mod:`ssegate.bench.mercure`, built at bench
time) runs as one hub, fed by POSTs at the same rate
(:mod:`ssegate.bench.mercure_publisher`). Every case is measured by
:func:`~ssegate.bench.proxy.run_case` with the load clients of :mod:`ssegate.bench.load`, which
read both servers' events with one scan: ``id`` is the publisher's sequence number on both, the
data is the publisher's monotonic stamp.

A run measures, per server:

1. **Idle memory**: ``idle_clients`` subscribers held idle; RSS growth divided by them
   (ssegate: :func:`~ssegate.bench.proxy.run_proxy_idle` on a fresh gateway; Mercure: a fresh
   hub, the same steps).
2. **Equal load**, for each transport (``h1`` plain, ``tls-h1``, ``tls-h2``) and each
   (clients, rate): ssegate's case, then Mercure's, at once after it, so that the two of a pair
   share the machine's conditions as far as possible.
3. **The p99 ladder**: at ``ladder_clients``, rates climb until p99 exceeds
   :data:`P99_TARGET_MS`, an event goes missing or the publisher falls behind; the last rate
   that passed is the server's throughput at that p99. The servers take turns at each rate,
   over plain HTTP/1.1, and the climb is bounded in time.

Then the ratios ssegate/Mercure: delivered events/s and p99 at equal load, memory per idle
connection, and throughput at equal p99 (:mod:`ssegate.bench.fanout_report`, which also
draws the plot).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ssegate.bench.case import run_case
from ssegate.bench.fanout_report import ratios
from ssegate.bench.gateway import GatewayProcess, ProcessSample
from ssegate.bench.load import LoadClients, LoadSpec
from ssegate.bench.mercure import HUB_DEFAULTS, HUB_PATH, MercureHub, ensure_mercure
from ssegate.bench.mercure_publisher import publish_to_hub
from ssegate.bench.proxy import run_proxy_idle, upstream_publisher, write_proxy_config
from ssegate.bench.publisher import Published, UpstreamProcess

P99_TARGET_MS = 50.0
TOPIC = "https://example.com/bench/fanout"
TRANSPORTS: dict[str, tuple[str, bool]] = {
    "h1": ("h1", False),
    "tls-h1": ("h1", True),
    "tls-h2": ("h2", True),
}
"""Transport label → (load client protocol, TLS)."""
KEPT_UP = 0.95
"""A publisher kept up when it achieved at least this share of the asked rate."""
SETTLE_SECONDS = 2.0
LADDER_RATES = [200.0, 400.0, 600.0, 800.0, 1100.0, 1600.0, 2200.0]
"""Events/s of the p99 ladder: 20k to 220k deliveries/s at 100 clients."""


PublishedAndNoted = tuple[Published, dict[str, Any]]
"""What a publish run wrote, and the publisher's own figures (did it keep up?)."""


class _Server:
    """One server under measurement: how to reach it, sample it and publish to it."""

    def __init__(
        self,
        name: str,
        ports: dict[bool, int],
        path: str,
        sample: Callable[[], ProcessSample],
        upstream: Callable[[], ProcessSample] | None,
        publish: Callable[[float, float], PublishedAndNoted],
    ) -> None:
        self.name = name
        self.ports = ports
        """TLS or not → port."""
        self.path = path
        self.sample = sample
        self.upstream = upstream
        self.publish = publish
        """(rate, duration) → what was published."""

    def case(
        self, transport: str, clients: int, rate: float, duration: float, processes: int
    ) -> dict[str, Any]:
        protocol, tls = TRANSPORTS[transport]
        spec = LoadSpec(
            port=self.ports[tls],
            clients=clients,
            protocol=protocol,
            tls=tls,
            path=self.path,
            max_seconds=duration + 60,
        )
        notes: dict[str, Any] = {}

        def publish() -> Published:
            published, notes["publisher"] = self.publish(rate, duration)
            return published

        case = run_case(spec, rate, duration, processes, self.sample, self.upstream, publish)
        time.sleep(0.5)
        return _row(self.name, transport, case, notes["publisher"])


def _publish_to_upstream(port: int, rate: float, duration: float) -> PublishedAndNoted:
    published = upstream_publisher(port, rate, duration, 0)()
    span = (published.ended_ns - published.started_ns) / 1e9
    achieved = round(published.events / span, 1) if span > 0 else 0.0
    return published, {"rate": rate, "written": published.events,
                       "achieved_events_per_s": achieved}  # fmt: skip


def _publish_to_hub(hub: MercureHub, rate: float, duration: float) -> PublishedAndNoted:
    outcome = asyncio.run(publish_to_hub(hub.plain_port, hub.token, TOPIC, rate, duration))
    return outcome.as_published(), outcome.summary(rate)


def _row(
    server: str, transport: str, case: dict[str, Any], publisher: dict[str, Any]
) -> dict[str, Any]:
    """A case as the fan-out reports it: the server's CPU and RSS under the server's name."""
    cpu = dict(case.pop("cpu_s"))
    server_cpu = cpu.pop("gateway")
    upstream_cpu = cpu.pop("upstream")
    rss = case.pop("gateway_rss_mib")
    upstream_rss = case.pop("upstream_rss_mib")
    busy = sum(v for k, v in cpu.items() if k != "wall" and not isinstance(v, list))
    busy += server_cpu + upstream_cpu + sum(cpu["clients"])
    row: dict[str, Any] = {"server": server, "transport": transport, **case}
    row["cpu_s"] = {"server": server_cpu}
    received = case["received"]
    row["events_per_server_cpu_s"] = round(received / server_cpu) if server_cpu > 0 else None
    if server == "ssegate":
        row["cpu_s"]["upstream"] = upstream_cpu
        chain = server_cpu + upstream_cpu
        row["events_per_chain_cpu_s"] = round(received / chain) if chain > 0 else None
        row["upstream_rss_mib"] = upstream_rss
    row["cpu_s"].update(cpu)
    row["server_rss_mib"] = rss
    row["machine_busy_share"] = round(busy / max(1e-9, cpu["wall"] * (os.cpu_count() or 1)), 2)
    row["publisher"] = publisher
    return row


def _passes(row: dict[str, Any]) -> bool:
    p99 = row["latency_ms"]["p99"]
    publisher = row["publisher"]
    return (
        p99 is not None
        and p99 <= P99_TARGET_MS
        and row["missing"] == 0
        and row["gaps"] == 0
        and row["failed"] == 0
        and publisher.get("refused", 0) == 0
        and publisher["achieved_events_per_s"] >= KEPT_UP * publisher["rate"]
    )


_STEP_FIELDS = (
    "rate", "offered_events_per_s", "delivered_events_per_s", "missing", "gaps", "latency_ms",
    "cpu_s", "events_per_server_cpu_s", "publisher",
)  # fmt: skip


def _ladders(
    servers: list[_Server],
    clients: int,
    rates: list[float],
    duration: float,
    budget: float,
    processes: int,
) -> list[dict[str, Any]]:
    """Climb ``rates`` on every server, taking turns at each rate, until each fails one.

    Taking turns keeps a server's step beside the other's in time, as for the pairs; a server
    stops at its first failed rate, every server at the end of the time budget.
    """
    ladders: dict[str, dict[str, Any]] = {
        server.name: {"server": server.name, "clients": clients, "p99_target_ms": P99_TARGET_MS,
                      "steps": [], "stopped": "every rate passed", "best": None}
        for server in servers
    }  # fmt: skip
    climbing = list(servers)
    started = time.monotonic()
    for rate in rates:
        if time.monotonic() - started > budget:
            for server in climbing:
                ladders[server.name]["stopped"] = f"time budget of {budget:.0f} s spent"
            break
        for server in list(climbing):
            row = server.case("h1", clients, rate, duration, processes)
            passed = _passes(row)
            ladder = ladders[server.name]
            ladder["steps"].append({key: row[key] for key in _STEP_FIELDS} | {"passed": passed})
            if passed:
                ladder["best"] = row
            else:
                ladder["stopped"] = f"{rate:g} ev/s failed"
                climbing.remove(server)
        if not climbing:
            break
    reports = []
    for ladder in ladders.values():
        best = ladder.pop("best")
        ladder["best_rate"] = best["rate"] if best else None
        ladder["best_delivered_events_per_s"] = best["delivered_events_per_s"] if best else None
        ladder["best_p99_ms"] = best["latency_ms"]["p99"] if best else None
        reports.append(ladder)
    return reports


def _hub_idle(hub: MercureHub, count: int, path: str) -> dict[str, Any]:
    """RSS per idle subscriber of a fresh hub: the steps of ``run_proxy_idle``."""
    time.sleep(SETTLE_SECONDS)
    base = hub.sample()
    spec = LoadSpec(port=hub.plain_port, clients=count, path=path, max_seconds=120)
    with LoadClients(spec, 1) as load:
        ready = load.wait_ready()
        time.sleep(SETTLE_SECONDS)
        loaded = hub.sample()
        load.stop()
    return {
        "server": "mercure",
        "clients": count,
        "opened": ready.opened,
        "failed": ready.failed,
        "rss_base_mib": round(base.rss_bytes / 2**20, 1),
        "rss_loaded_mib": round(loaded.rss_bytes / 2**20, 1),
        "bytes_per_idle_connection": round(
            (loaded.rss_bytes - base.rss_bytes) / max(1, ready.opened)
        ),
        "errors": ready.errors[:3],
    }


def _ssegate_idle(count: int) -> dict[str, Any]:
    measured = run_proxy_idle(count)
    return {
        "server": "ssegate",
        "clients": count,
        "opened": measured["opened"],
        "failed": measured["failed"],
        "rss_base_mib": measured["gateway_rss_base_mib"],
        "rss_loaded_mib": measured["gateway_rss_loaded_mib"],
        "bytes_per_idle_connection": measured["gateway_bytes_per_client"],
        "upstream_bytes_per_idle_connection": measured["upstream_bytes_per_client"],
        "errors": measured["errors"][:3],
    }


def run_fanout(
    clients: list[int],
    rates: list[float],
    *,
    duration: float = 4.0,
    transports: tuple[str, ...] = ("h1", "tls-h1", "tls-h2"),
    idle_clients: int = 1000,
    ladder_clients: int = 100,
    ladder_rates: list[float] | None = None,
    ladder_duration: float = 3.0,
    ladder_budget: float = 90.0,
    mercure: bool = True,
    mercure_transport: str = "local",
    client_processes: int = 1,
    workers: int = 1,
) -> dict[str, Any]:
    """Idle memory, every (transport, clients, rate) pair, and the p99 ladder of each server.

    ``rates`` is one publish rate (events/s) for every client count, or one per count. Without
    ``mercure``, or when its build fails (the reason is in the results), ssegate runs alone.
    ``workers`` is the gateway's worker processes; Mercure uses every core as Go does.
    """
    if len(rates) not in (1, len(clients)):
        raise ValueError("give one rate, or one rate per client count")
    unknown = [t for t in transports if t not in TRANSPORTS]
    if unknown:
        raise ValueError(f"unknown transports {unknown}: use {', '.join(TRANSPORTS)}")
    per_count = rates * len(clients) if len(rates) == 1 else rates
    ladder = LADDER_RATES if ladder_rates is None else ladder_rates
    results: dict[str, Any] = {
        "scenario": "fanout",
        "duration_s": duration,
        "transports": list(transports),
        "gateway_workers": workers,
        "topic": TOPIC,
        "p99_target_ms": P99_TARGET_MS,
        "idle": [],
        "cases": [],
        "ladder": [],
    }
    hub_binary = None
    if mercure:
        started = time.monotonic()
        build = ensure_mercure()
        results["mercure"] = build.as_json() | {
            "build_check_s": round(time.monotonic() - started, 1),
            "transport": mercure_transport,
            "defaults": HUB_DEFAULTS,
        }
        hub_binary = build.binary
    else:
        results["mercure"] = {"build": "not asked for"}
    hub_path = f"{HUB_PATH}?topic={urllib.parse.quote(TOPIC, safe='')}"
    if idle_clients:
        results["idle"].append(_ssegate_idle(idle_clients))
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        upstream = stack.enter_context(UpstreamProcess())
        config, plain, tls_port = write_proxy_config(tmp, upstream.http_port)
        gateway = stack.enter_context(GatewayProcess(config, workers=workers))
        to_upstream = functools.partial(_publish_to_upstream, upstream.publish_port)
        servers = [
            _Server("ssegate", {False: plain, True: tls_port}, "/events", gateway.sample,
                    upstream.sample, to_upstream),
        ]  # fmt: skip
        hub = _start_hub(stack, hub_binary, tmp, results["mercure"]) if hub_binary else None
        if hub is not None:
            if idle_clients:
                results["idle"].append(_hub_idle(hub, idle_clients, hub_path))
            servers.append(
                _Server("mercure", {False: hub.plain_port, True: hub.tls_port}, hub_path,
                        hub.sample, None, functools.partial(_publish_to_hub, hub))
            )  # fmt: skip
        for transport in transports:
            for count, rate in zip(clients, per_count, strict=True):
                for server in servers:
                    results["cases"].append(
                        server.case(transport, count, rate, duration, client_processes)
                    )
        if ladder:
            results["ladder"] = _ladders(
                servers, ladder_clients, ladder, ladder_duration, ladder_budget, client_processes
            )
    results["ratios"] = ratios(results)
    return results


def _start_hub(
    stack: contextlib.ExitStack, binary: Path, workdir: Path, report: dict[str, Any]
) -> MercureHub | None:
    """The hub, running until ``stack`` closes; None (and why, in ``report``) if it won't start."""
    hub = MercureHub(binary, workdir, transport=report["transport"])
    stack.callback(lambda: report.update(log_tail=list(hub.output)[-5:]))
    try:
        stack.enter_context(hub)
    except (RuntimeError, OSError) as exc:
        report["run"] = f"the hub did not start: {exc}"
        return None
    report["run"] = "ok"
    return hub
