"""``ssegate bench jwt``: connects/s, connect latency and RSS of N authorized SSE streams.

The gateway guards its sse route with a ``jwt`` guard; behind it is the sse-kafka proxy on a
topic nobody produces to, so a held stream is authorized and idle and costs the gateway no
upstream connection (the Kafka cache reads the topic once for everyone). Every client sends its
own token (``authorization: Bearer``; ES256 by default, one key, distinct ``sub`` each) and only
counts as opened on ``200`` with ``content-type: text/event-stream``.

Two rounds over the same tokens: **cold** (no token seen yet: each connect verifies a signature)
and, after every stream is closed, **warm** (every token is in the guard's cache of verified
tokens). A round records connects/s, p50/p99 connect latency (TCP connect start to the status
line) and the CPU of the gateway, the client (with its share of a core, flagged
``client_saturated`` past :data:`~ssegate_lab.bench.validity.SATURATED_SHARE`: connects/s is then
the client's) and the machine. After the cold round the gateway's RSS growth divided by the
streams held is the RSS per authorized stream. :func:`~ssegate.guards.cost.verification_cost`
adds the in-process cost of one authenticate.

``ssegate bench jwt --verify-only`` (:func:`run_verify`) measures that in-process cost alone,
with no gateway or broker: ``count`` fresh tokens per algorithm (RS256, ES256, EdDSA), ``runs``
times, the median and every run in µs of the thread's CPU time per verification (CPU time, as
other work on a shared machine stretches wall time by whatever it takes).
"""

from __future__ import annotations

import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ssegate.guards.cost import KINDS, authenticate_cost, verification_cost
from ssegate.tools.token import generate_key, mint, public_jwk
from ssegate_lab.bench import validity
from ssegate_lab.bench.gateway import GatewayProcess, machine_busy_seconds
from ssegate_lab.bench.held_streams import HeldStreams, sse_request
from ssegate_lab.bench.kafka_rig import (
    GUARD_AUDIENCE,
    GUARD_ISSUER,
    GUARD_ROLE,
    BenchBroker,
    write_kafka_gateway_config,
)
from ssegate_lab.broker import BrokerInfo

SETTLE_SECONDS = 1.5


def mint_tokens(kind: str, count: int) -> tuple[dict[str, str], list[str]]:
    """A public JWK and ``count`` tokens for distinct subjects, valid for ten minutes."""
    key = generate_key(kind)
    tokens = [
        mint(
            key,
            kid="bench",
            sub=f"client-{n}",
            scope=GUARD_ROLE,
            ttl=600,
            iss=GUARD_ISSUER,
            aud=GUARD_AUDIENCE,
        )
        for n in range(count)
    ]
    return public_jwk(key, "bench"), tokens


def run_verify(count: int = 2000, runs: int = 5) -> dict[str, Any]:
    """CPU µs per cold and warm ``JwtGuard.authenticate`` by algorithm: the median, each run."""
    cold: dict[str, list[float]] = {alg: [] for alg in KINDS.values()}
    warm: dict[str, list[float]] = {alg: [] for alg in KINDS.values()}
    for _ in range(runs):  # the algorithms take turns, so a busy moment spreads over all
        for kind, alg in KINDS.items():
            cold_us, warm_us = authenticate_cost(kind, count, time.thread_time)
            cold[alg].append(round(cold_us, 1))
            warm[alg].append(round(warm_us, 2))
    return {
        "scenario": "jwt-verify",
        "count": count,
        "runs": runs,
        "clock": "thread CPU time",
        "cold_us": {alg: {"median": statistics.median(v), "runs": v} for alg, v in cold.items()},
        "warm_us": {alg: {"median": statistics.median(v), "runs": v} for alg, v in warm.items()},
    }


def _harness_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_jwt(
    clients: int = 10_000,
    *,
    tls: bool = False,
    key_type: str = "ec",
    concurrency: int = 64,
    broker_info: BrokerInfo | None = None,
) -> dict[str, Any]:
    """Cold and warm rounds of ``clients`` authorized streams against one gateway.

    Without ``broker_info`` a broker is started for the run and stopped after it.
    """
    jwk, tokens = mint_tokens(key_type, clients)
    results: dict[str, Any] = {
        "scenario": "jwt",
        "clients": clients,
        "tls": tls,
        "key_type": key_type,
        "alg": jwk["alg"],
        "connect_concurrency": concurrency,
        "source": "sse-kafka on an idle topic (no upstream connection per stream)",
        "verification_us": verification_cost(),
    }
    with BenchBroker(broker_info) as broker, tempfile.TemporaryDirectory() as tmp:
        (topic,) = broker.create_topics("bench-jwt-idle", 1)
        ports = write_kafka_gateway_config(Path(tmp), broker.bootstrap, [topic], guard_keys=[jwk])
        results["broker_start_s"] = round(broker.started_in, 1)
        port = ports.tls if tls else ports.plain
        requests = [
            sse_request(f"/{topic}", port, {"authorization": f"Bearer {token}"}) for token in tokens
        ]
        with GatewayProcess(ports.config) as gateway:
            time.sleep(SETTLE_SECONDS)
            base, base_fds = gateway.sample(), _open_files(gateway.pid)
            results["gateway_rss_base_mib"] = round(base.rss_bytes / 2**20, 1)
            with HeldStreams(port, tls=tls, max_streams=clients, concurrency=concurrency) as held:
                cold = _round(held, requests, gateway, broker)
                time.sleep(SETTLE_SECONDS)
                loaded, held_fds = gateway.sample(), _open_files(gateway.pid)
                cold["gateway_rss_loaded_mib"] = round(loaded.rss_bytes / 2**20, 1)
                results["rss_bytes_per_authorized_stream"] = round(
                    (loaded.rss_bytes - base.rss_bytes) / max(1, cold["opened"])
                )
                held.close()
                results["gateway_open_files"] = {"base": base_fds, "held": held_fds}
                results["closed_streams_released_s"] = _wait_for_open_files(gateway.pid, base_fds)
                results["gateway_open_files"]["after_close"] = _open_files(gateway.pid)
                warm = _round(held, requests, gateway, broker)
                held.close()
            results["cold"] = cold
            results["warm"] = warm
            results["gateway_log_tail"] = list(gateway.output)[-5:]
    return results


def _round(
    held: HeldStreams, requests: list[bytes], gateway: GatewayProcess, broker: BenchBroker
) -> dict[str, Any]:
    gateway_before, broker_before = gateway.sample(), broker.sample()
    busy_before, harness_before = machine_busy_seconds(), _harness_cpu()
    load_average, wall_before = os.getloadavg()[0], time.monotonic()
    held.report()  # resets the client's CPU mark
    opened = held.open(requests)
    client_cpu = held.report().cpu_seconds
    gateway_cpu = gateway.sample().cpu_seconds - gateway_before.cpu_seconds
    broker_cpu = broker.sample().cpu_seconds - broker_before.cpu_seconds
    busy = machine_busy_seconds() - busy_before
    harness = _harness_cpu() - harness_before
    wall = time.monotonic() - wall_before
    other = max(0.0, busy - gateway_cpu - client_cpu - broker_cpu - harness)
    cpus = os.cpu_count() or 1
    return {
        "opened": opened.opened,
        "failed": opened.failed,
        "seconds": round(opened.seconds, 2),
        "connects_per_s": opened.connects_per_s,
        "connect_ms": opened.connect_ms,
        "gateway_cpu_s": round(gateway_cpu, 2),
        "gateway_cpu_us_per_connect": round(gateway_cpu / max(1, opened.opened) * 1e6, 1),
        "client_cpu_s": round(client_cpu, 2),
        **validity.client_load([client_cpu], wall),
        "broker_cpu_s": round(broker_cpu, 2),
        "other_work_cpu_s": round(other, 2),
        "machine_busy_share": round(busy / max(1e-9, wall * cpus), 2),
        "load_average_1min_at_start": round(load_average, 2),
        "errors": opened.errors,
    }


def _open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _wait_for_open_files(pid: int, target: int, timeout: float = 45.0) -> float:
    """Wait until the gateway has closed the streams of the last round; seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout and _open_files(pid) > target + 16:
        time.sleep(0.1)
    time.sleep(SETTLE_SECONDS)
    return round(time.monotonic() - started, 1)
