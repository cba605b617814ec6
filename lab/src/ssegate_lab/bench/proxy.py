"""Benchmarks of the SSE proxy chain: events/s, publish-to-receive latency, idle memory.

The chain is the one of ``examples/sse.proxy`` without a guard, written to a temporary
directory: ``tcp`` (a plain port for HTTP/1.1 and h2c, a TLS port for h2 and HTTP/1.1) →
``http`` → ``sse`` server → ``sse`` client → ``http`` client → ``tcp`` client → the example
upstream server. The downstream streams of one upstream request share one upstream connection
(:mod:`ssegate.bindings.sse.upstream`), where Zilla opens one per downstream stream.

``proxy``: for each protocol and client count, the load clients (:mod:`ssegate_lab.bench.load`;
for h2, h2load holds most streams: :mod:`ssegate_lab.bench.case`) open their streams, the
publisher (:mod:`ssegate_lab.bench.publisher`) writes a fixed rate for a fixed time, and after a
short drain the clients report. A case records delivered events/s, events missing and
duplicated, id gaps, streams closed early, latency percentiles and a histogram, and the CPU
seconds of the gateway, the upstream, the publisher and each client process over the case.
``proxy-idle``: N streams opened and left idle; gateway (and upstream) RSS per stream.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ssegate.engine.runtime import free_port
from ssegate_lab.bench.case import run_case
from ssegate_lab.bench.foundation import PASSWORD
from ssegate_lab.bench.gateway import GatewayProcess
from ssegate_lab.bench.latency import LatencyHistogram
from ssegate_lab.bench.load import LoadClients, LoadSpec
from ssegate_lab.bench.publisher import Published, UpstreamProcess, publish


def write_proxy_config(workdir: Path, upstream_port: int) -> tuple[Path, int, int]:
    """The example's proxy chain with no guard; (config path, plain port, TLS port)."""
    from ssegate_lab.testing.certs import make_keystore

    make_keystore(workdir / "localhost.p12", alias="localhost", password=PASSWORD)
    plain, tls = free_port(), free_port()
    config = workdir / "zilla.yaml"
    config.write_text(
        f"""\
name: bench-proxy
vaults:
  server:
    type: filesystem
    options:
      keys:
        store: localhost.p12
        password: {PASSWORD}
bindings:
  north_tcp_server:
    type: tcp
    kind: server
    options:
      host: 127.0.0.1
      port: [{plain}, {tls}]
    routes:
      - when:
          - port: {tls}
        exit: north_tls_server
    exit: north_http_server
  north_tls_server:
    type: tls
    kind: server
    vault: server
    options:
      keys: [localhost]
      alpn: [h2, http/1.1]
    exit: north_http_server
  north_http_server:
    type: http
    kind: server
    routes:
      - exit: north_sse_server
  north_sse_server:
    type: sse
    kind: server
    exit: south_sse_client
  south_sse_client:
    type: sse
    kind: client
    exit: south_http_client
  south_http_client:
    type: http
    kind: client
    options:
      versions: [http/1.1]
    exit: south_tcp_client
  south_tcp_client:
    type: tcp
    kind: client
    options:
      host: 127.0.0.1
      port: {upstream_port}
"""
    )
    return config, plain, tls


def run_proxy(
    clients: list[int],
    rates: list[float],
    *,
    duration: float = 5.0,
    protocols: tuple[str, ...] = ("h1", "h2"),
    workers: int = 1,
    tls: bool = False,
    client_processes: int = 1,
    h2_streams: int = 1,
    size: int = 0,
    h2_client: str = "h2load",
) -> dict[str, Any]:
    """Every (protocol, client count) case against one gateway and one upstream.

    ``rates`` is one publish rate (events/s) for every client count, or one per count.
    ``h2_client`` ``h2load`` gives h2load most of an h2 case's streams; ``python``: none.
    """
    if len(rates) not in (1, len(clients)):
        raise ValueError("give one rate, or one rate per client count")
    per_count = rates * len(clients) if len(rates) == 1 else rates
    results: dict[str, Any] = {
        "scenario": "proxy",
        "duration_s": duration,
        "workers": workers,
        "tls": tls,
        "client_processes": client_processes,
        "h2_streams_per_connection": h2_streams,
        "event_data_bytes": max(size, 19),
        "h2_client": h2_client,
        "cases": [],
    }
    with tempfile.TemporaryDirectory() as tmp, UpstreamProcess() as upstream:
        config, plain, tls_port = write_proxy_config(Path(tmp), upstream.http_port)
        with GatewayProcess(config, workers=workers) as gateway:
            for protocol in protocols:
                for count, rate in zip(clients, per_count, strict=True):
                    spec = LoadSpec(
                        port=tls_port if tls else plain,
                        clients=count,
                        protocol=protocol,
                        tls=tls,
                        h2_streams=h2_streams,
                        max_seconds=duration + 60,
                    )
                    publisher = upstream_publisher(upstream.publish_port, rate, duration, size)
                    case = run_case(
                        spec, rate, duration, client_processes, gateway.sample, upstream.sample,
                        publisher, use_h2load=h2_client == "h2load",
                    )  # fmt: skip
                    results["cases"].append(case)
                    time.sleep(0.5)
    return results


def upstream_publisher(
    port: int, rate: float, duration: float, size: int
) -> Callable[[], Published]:
    """What a case calls to publish to the example upstream: ``rate`` lines/s for ``duration``."""
    return lambda: asyncio.run(publish(port, rate, duration, size=size))


def run_proxy_idle(
    clients: int = 1000, *, protocol: str = "h1", tls: bool = False, settle: float = 2.0
) -> dict[str, Any]:
    """RSS per idle proxied stream: the gateway's (both of its sides) and the upstream's."""
    results: dict[str, Any] = {
        "scenario": "proxy-idle",
        "clients": clients,
        "protocol": protocol,
        "tls": tls,
    }
    with tempfile.TemporaryDirectory() as tmp, UpstreamProcess() as upstream:
        config, plain, tls_port = write_proxy_config(Path(tmp), upstream.http_port)
        with GatewayProcess(config, workers=1) as gateway:
            time.sleep(settle)
            gateway_base, upstream_base = gateway.sample(), upstream.sample()
            spec = LoadSpec(
                port=tls_port if tls else plain,
                clients=clients,
                protocol=protocol,
                tls=tls,
                max_seconds=120,
            )
            started = time.monotonic()
            with LoadClients(spec, 1) as load:
                ready = load.wait_ready()
                opened_in = time.monotonic() - started
                time.sleep(settle)
                gateway_loaded, upstream_loaded = gateway.sample(), upstream.sample()
                load.stop()
    opened = max(ready.opened, 1)
    results.update(
        {
            "opened": ready.opened,
            "failed": ready.failed,
            "open_seconds": round(opened_in, 2),
            "gateway_rss_base_mib": round(gateway_base.rss_bytes / 2**20, 1),
            "gateway_rss_loaded_mib": round(gateway_loaded.rss_bytes / 2**20, 1),
            "gateway_bytes_per_client": round(
                (gateway_loaded.rss_bytes - gateway_base.rss_bytes) / opened
            ),
            "upstream_bytes_per_client": round(
                (upstream_loaded.rss_bytes - upstream_base.rss_bytes) / opened
            ),
            "errors": ready.errors[:5],
        }
    )
    return results


def plot_latency(results: dict[str, Any], path: Path) -> str:
    """A PNG of latency CDFs, one line per (protocol, clients) case; what was done.

    matplotlib is optional (``pip install matplotlib``); without it nothing is drawn and the
    returned message says so.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install matplotlib)"
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for case in results["cases"]:
        histogram = LatencyHistogram.from_sparse(case["histogram_us"])
        points = histogram.cdf()
        if not points:
            continue
        xs, ys = zip(*points, strict=True)
        label = f"{case['protocol']} {case['clients']} clients, {case['rate']:g} ev/s"
        axes.step(xs, ys, where="post", label=label)
    axes.set_xscale("log")
    axes.set_xlabel("publish to receive latency (ms)")
    axes.set_ylabel("fraction of events")
    axes.set_title("ssegate SSE proxy: latency CDF")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return f"plot written to {path}"
