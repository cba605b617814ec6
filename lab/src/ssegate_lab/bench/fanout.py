"""``ssegate bench fanout``: plain SSE fan-out through ssegate, and Mercure beside it, pair by pair.

Both servers get the same load from the same code. ssegate runs the chain of ``bench proxy``
(:func:`~ssegate_lab.bench.proxy.write_proxy_config`: the gateway proxying the example upstream,
which the fixed-rate publisher feeds); Mercure (:mod:`ssegate_lab.bench.mercure`, built at bench
time) runs as one hub, fed by POSTs at the same rate
(:mod:`ssegate_lab.bench.mercure_publisher`). Every case is measured by
:func:`~ssegate_lab.bench.proxy.run_case` with the load clients of
:mod:`ssegate_lab.bench.load`, which read both servers' events with one scan: ``id`` is the
publisher's sequence number on both, the data is the publisher's monotonic stamp.

A run measures, per server:

1. **Idle memory**: ``idle_clients`` subscribers held idle; RSS growth divided by them
   (ssegate: :func:`~ssegate_lab.bench.proxy.run_proxy_idle` on a fresh gateway; Mercure: a fresh
   hub, the same steps).
2. **Equal load**, for each transport (``h1`` plain, ``tls-h1``, ``tls-h2``) and each
   (clients, rate): ssegate's case, then Mercure's, at once after it, so that the two of a pair
   share the machine's conditions as far as possible.
3. **The p99 ladder** (:mod:`ssegate_lab.bench.ladder`): at ``ladder_clients``, rates climb until
   p99 exceeds :data:`P99_TARGET_MS`, an event goes missing or comes twice, a stream fails or
   the publisher falls behind, then bisect between the last rate that passed and the first
   that failed until they are within 10 %; the last rate that passed is the server's
   throughput at that p99. A step whose load client or publisher was saturated is invalid
   and ends that server's climb. The servers take turns at each rate, over one transport
   (``ladder_transport``: plain HTTP/1.1 unless asked), and the climb is bounded in time.

tls-h2 cases hold most streams with h2load (:mod:`ssegate_lab.bench.case`).

**Mercure's publish path.** ssegate takes its events from one upstream connection (the
upstream server is its own process, measured apart); Mercure takes one ``POST`` with a JWT per
event, parsed and verified by the hub itself, so the hub's CPU holds its intake as well as its
fan-out. With ``mercure_publish_cost="separated"`` (the default) a publish-only run first
measures that intake: the hub's CPU per event published to a topic nobody subscribes to, and
the publisher's own. Every Mercure case then reports the hub's CPU less that estimate as its
fan-out CPU (``cpu_s.server_fanout``, ``events_per_server_fanout_cpu_s``), and the pairs
compare fan-out CPU with fan-out CPU. The publisher's CPU share is reported with every case,
and a ladder step where it was saturated is invalid rather than a failure of the hub.
``"included"`` leaves the hub's CPU whole, as it was measured before.

Then the ratios ssegate/Mercure: delivered events/s and p99 at equal load, memory per idle
connection, and throughput at equal p99 (:mod:`ssegate_lab.bench.fanout_report`, which also
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

from ssegate_lab.bench import validity
from ssegate_lab.bench.case import run_case, self_cpu_seconds
from ssegate_lab.bench.fanout_report import ratios
from ssegate_lab.bench.gateway import GatewayProcess, ProcessSample
from ssegate_lab.bench.ladder import FAILED, INVALID, PASSED, climb
from ssegate_lab.bench.load import LoadClients, LoadSpec
from ssegate_lab.bench.mercure import HUB_DEFAULTS, HUB_PATH, MercureHub, ensure_mercure
from ssegate_lab.bench.mercure_publisher import publish_to_hub
from ssegate_lab.bench.proxy import run_proxy_idle, upstream_publisher, write_proxy_config
from ssegate_lab.bench.publisher import Published, UpstreamProcess

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
PUBLISH_COSTS = ("separated", "included")
"""Mercure's publish path: measured and taken out of its fan-out CPU, or left in."""
PUBLISH_PATH_RATE = 1000.0
PUBLISH_PATH_SECONDS = 2.0
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
        *,
        use_h2load: bool = True,
        publish_path_us_per_event: float = 0.0,
    ) -> None:
        self.name = name
        self.ports = ports
        """TLS or not → port."""
        self.path = path
        self.sample = sample
        self.upstream = upstream
        self.publish = publish
        """(rate, duration) → what was published."""
        self.use_h2load = use_h2load
        self.publish_path_us_per_event = publish_path_us_per_event
        """The server's own CPU per published event spent taking it in (0: none measured)."""

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

        case = run_case(
            spec, rate, duration, processes, self.sample, self.upstream, publish,
            use_h2load=self.use_h2load,
        )  # fmt: skip
        time.sleep(0.5)
        return _row(self.name, transport, case, notes["publisher"], self.publish_path_us_per_event)


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
    server: str,
    transport: str,
    case: dict[str, Any],
    publisher: dict[str, Any],
    publish_path_us_per_event: float = 0.0,
) -> dict[str, Any]:
    """A case as the fan-out reports it: the server's CPU and RSS under the server's name, and
    its fan-out CPU (its CPU less ``publish_path_us_per_event`` per event published)."""
    cpu = dict(case.pop("cpu_s"))
    server_cpu = cpu.pop("gateway")
    upstream_cpu = cpu.pop("upstream")
    rss = case.pop("gateway_rss_mib")
    upstream_rss = case.pop("upstream_rss_mib")
    busy = sum(v for k, v in cpu.items() if k != "wall" and not isinstance(v, list))
    busy += server_cpu + upstream_cpu + sum(cpu["clients"])
    row: dict[str, Any] = {"server": server, "transport": transport, **case}
    row["cpu_s"] = {"server": server_cpu}
    received = case["distinct"]
    row["events_per_server_cpu_s"] = round(received / server_cpu) if server_cpu > 0 else None
    intake = publish_path_us_per_event * case["published"] / 1e6
    fanout_cpu = max(0.0, server_cpu - intake)
    row["cpu_s"]["server_publish_path_estimate"] = round(intake, 3)
    row["cpu_s"]["server_fanout"] = round(fanout_cpu, 2)
    row["events_per_server_fanout_cpu_s"] = round(received / fanout_cpu) if fanout_cpu > 0 else None
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


def _outcome(row: dict[str, Any]) -> tuple[str, str]:
    """A ladder step: invalid when the client or the publisher was saturated; passed when p99
    is within the target, every event came once to every stream and the publisher kept up."""
    if row["client_saturated"]:
        return INVALID, f"load client saturated ({row['client_cpu_share']:.0%} of a core)"
    publisher = row["publisher"]
    if row["publisher_cpu_share"] > validity.SATURATED_SHARE:
        return INVALID, f"publisher saturated ({row['publisher_cpu_share']:.0%} of a core)"
    p99 = row["latency_ms"]["p99"]
    reasons = validity.losses(row)
    if p99 is None or p99 > P99_TARGET_MS:
        reasons.append(f"p99 {p99} ms")
    if publisher.get("refused", 0):
        reasons.append(f"{publisher['refused']} publications refused")
    if publisher["achieved_events_per_s"] < KEPT_UP * publisher["rate"]:
        reasons.append(f"publisher reached {publisher['achieved_events_per_s']:g} ev/s")
    return (FAILED, "; ".join(reasons)) if reasons else (PASSED, "")


_STEP_FIELDS = (
    "rate", "offered_events_per_s", "delivered_events_per_s", "missing", "duplicates", "gaps",
    "latency_ms", "cpu_s", "events_per_server_cpu_s", "events_per_server_fanout_cpu_s",
    "client_cpu_share", "client_saturated", "publisher_cpu_share", "publisher",
)  # fmt: skip


def _ladders(
    servers: list[_Server],
    clients: int,
    rates: list[float],
    duration: float,
    budget: float,
    processes: int,
    transport: str,
) -> list[dict[str, Any]]:
    """Climb ``rates`` on every server over ``transport``, taking turns, then bisect to 10 %
    (:func:`climb`)."""
    by_name = {server.name: server for server in servers}

    def measure(name: str, rate: float) -> tuple[dict[str, Any], str, str]:
        row = by_name[name].case(transport, clients, rate, duration, processes)
        return {key: row[key] for key in _STEP_FIELDS}, *_outcome(row)

    reports = []
    for ladder in climb(list(by_name), rates, measure, budget):
        best = ladder.best
        reports.append(
            ladder.report()
            | {
                "transport": transport,
                "clients": clients,
                "p99_target_ms": P99_TARGET_MS,
                "best_delivered_events_per_s": best["delivered_events_per_s"] if best else None,
                "best_p99_ms": best["latency_ms"]["p99"] if best else None,
            }
        )
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
    ladder_budget: float = 180.0,
    ladder_transport: str = "h1",
    mercure: bool = True,
    mercure_transport: str = "local",
    client_processes: int = 1,
    workers: int = 1,
    h2_client: str = "h2load",
    mercure_publish_cost: str = "separated",
) -> dict[str, Any]:
    """Idle memory, every (transport, clients, rate) pair, and the p99 ladder of each server.

    ``rates`` is one publish rate (events/s) for every client count, or one per count. Without
    ``mercure``, or when its build fails (the reason is in the results), ssegate runs alone.
    ``workers`` is the gateway's worker processes; Mercure uses every core as Go does.
    ``h2_client`` ``python`` keeps h2load out of the tls-h2 cases; ``mercure_publish_cost``
    is ``separated`` or ``included`` (the module's docstring says what each does); the
    ladder climbs over ``ladder_transport``.
    """
    if mercure_publish_cost not in PUBLISH_COSTS:
        raise ValueError(f"mercure_publish_cost is one of {', '.join(PUBLISH_COSTS)}")
    if len(rates) not in (1, len(clients)):
        raise ValueError("give one rate, or one rate per client count")
    unknown = [t for t in (*transports, ladder_transport) if t not in TRANSPORTS]
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
        "h2_client": h2_client,
        "idle": [],
        "cases": [],
        "ladder": [],
        "ladder_transport": ladder_transport,
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
        use_h2load = h2_client == "h2load"
        servers = [
            _Server("ssegate", {False: plain, True: tls_port}, "/events", gateway.sample,
                    upstream.sample, to_upstream, use_h2load=use_h2load),
        ]  # fmt: skip
        hub = _start_hub(stack, hub_binary, tmp, results["mercure"]) if hub_binary else None
        if hub is not None:
            if idle_clients:
                results["idle"].append(_hub_idle(hub, idle_clients, hub_path))
            cost = _publish_cost(hub, mercure_publish_cost)
            results["mercure"]["publish_cost"] = cost
            servers.append(
                _Server("mercure", {False: hub.plain_port, True: hub.tls_port}, hub_path,
                        hub.sample, None, functools.partial(_publish_to_hub, hub),
                        use_h2load=use_h2load,
                        publish_path_us_per_event=cost.get("hub_cpu_us_per_event", 0.0))
            )  # fmt: skip
        for transport in transports:
            for count, rate in zip(clients, per_count, strict=True):
                for server in servers:
                    results["cases"].append(
                        server.case(transport, count, rate, duration, client_processes)
                    )
        if ladder:
            results["ladder"] = _ladders(
                servers,
                ladder_clients,
                ladder,
                ladder_duration,
                ladder_budget,
                client_processes,
                ladder_transport,
            )
    results["ratios"] = ratios(results)
    return results


def _publish_cost(hub: MercureHub, mode: str) -> dict[str, Any]:
    """What Mercure's publish path costs, measured with nobody subscribed (``separated``)."""
    if mode == "included":
        return {
            "mode": mode,
            "what_was_done": "the hub's CPU is reported whole: its intake of the POSTs (HTTP,"
            " JWT, one update per request) counts as fan-out",
        }
    time.sleep(SETTLE_SECONDS)
    topic = f"{TOPIC}/publish-path"
    hub_before, self_before = hub.sample(), self_cpu_seconds()
    outcome = asyncio.run(
        publish_to_hub(hub.plain_port, hub.token, topic, PUBLISH_PATH_RATE, PUBLISH_PATH_SECONDS)
    )
    hub_cpu = hub.sample().cpu_seconds - hub_before.cpu_seconds
    publisher_cpu = self_cpu_seconds() - self_before
    events = max(1, outcome.acknowledged)
    return {
        "mode": mode,
        "what_was_done": f"{outcome.acknowledged:,} updates POSTed at {PUBLISH_PATH_RATE:g}/s"
        " to a topic nobody subscribes to; the hub's CPU per update is its publish path, taken"
        " out of its CPU in every case (cpu_s.server_fanout); the publisher's CPU is this"
        " process's, reported per case as publisher_cpu_share",
        "published": outcome.acknowledged,
        "refused": outcome.refused,
        "hub_cpu_s": round(hub_cpu, 3),
        "hub_cpu_us_per_event": round(hub_cpu * 1e6 / events, 1),
        "publisher_cpu_s": round(publisher_cpu, 3),
        "publisher_cpu_us_per_event": round(publisher_cpu * 1e6 / events, 1),
    }


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
