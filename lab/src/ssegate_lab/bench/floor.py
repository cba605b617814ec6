"""``ssegate bench floor``: ssegate beside the reference fan-out server, pair by pair.

Every fan-out figure is read against a floor: what a minimal server in C does with the same load
(``sse_floor.c``, :mod:`ssegate_lab.bench.floor_server`: one thread, epoll, each event framed
once and sent to every socket). One example upstream
(:class:`~ssegate_lab.bench.publisher.UpstreamProcess`) feeds both: ssegate proxies it as in
``bench proxy`` (:func:`~ssegate_lab.bench.proxy.write_proxy_config`), the floor reads it over
one connection. The floor serves TLS 1.3 with the same certificate and key as the gateway's
keystore, written out as PEM.

For each transport (``h1``, ``tls-h1``), each (clients, rate) and each run, ssegate's case and
then the floor's are measured by :func:`~ssegate_lab.bench.case.run_case` with the same load
clients and the same fixed-rate publisher, back to back so that the two share the machine's
conditions. A case reports the server's CPU per delivery (its CPU seconds ÷ the distinct events
its streams read), p99, missing and duplicated events and the load client's CPU;
:mod:`ssegate_lab.bench.floor_report` divides ssegate's figures by the floor's and judges them.
The upstream's CPU is reported with each case (``cpu_s.upstream``) and is not counted as the
server's. Both servers' CPU is read from the scheduler's nanosecond counters where the kernel
keeps them (:func:`~ssegate_lab.bench.floor_server.scheduled_seconds`; ``cpu_clock`` in the
results says which clock was read), since clock ticks are too coarse beside the floor's.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from ssegate.cache import NotPrepared
from ssegate_lab.bench.case import run_case
from ssegate_lab.bench.floor_report import FLOOR, OURS, cpu_us_per_delivery, judge, pairs, table
from ssegate_lab.bench.floor_server import FloorServer, precise_sample, scheduled_seconds
from ssegate_lab.bench.foundation import PASSWORD
from ssegate_lab.bench.gateway import GatewayProcess, ProcessSample
from ssegate_lab.bench.load import LoadSpec
from ssegate_lab.bench.proxy import upstream_publisher, write_proxy_config
from ssegate_lab.bench.publisher import UpstreamProcess

TRANSPORTS = {"h1": False, "tls-h1": True}
"""Transport label → TLS (HTTP/1.1 on both)."""
PAUSE_SECONDS = 0.5
"""Between two cases, so that the last one's connections are gone."""


def pem_from_keystore(keystore: Path, password: str, directory: Path) -> tuple[Path, Path]:
    """The keystore's certificate chain and key as PEM files in ``directory``."""
    key, certificate, chain = pkcs12.load_key_and_certificates(
        keystore.read_bytes(), password.encode()
    )
    if key is None or certificate is None:
        raise ValueError(f"{keystore} holds no key and certificate")
    cert_path, key_path = directory / "floor-cert.pem", directory / "floor-key.pem"
    certs = [certificate, *chain]
    cert_path.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


def row(server: str, transport: str, run: int, case: dict[str, Any]) -> dict[str, Any]:
    """A case as this scenario reports it: the server's CPU under ``server`` and per delivery."""
    cpu = dict(case.pop("cpu_s"))
    server_cpu = cpu.pop("gateway")
    out: dict[str, Any] = {"server": server, "transport": transport, "run": run, **case}
    out["server_rss_mib"] = out.pop("gateway_rss_mib")
    out["cpu_s"] = {"server": server_cpu, **cpu}
    out["cpu_us_per_delivery"] = cpu_us_per_delivery(server_cpu, case["distinct"])
    out["client_cpu_s"] = round(sum(cpu["clients"]), 2)
    return out


@dataclass(frozen=True, slots=True)
class _Target:
    """One server under measurement: its name, its ports (TLS or not), its process."""

    name: str
    ports: dict[bool, int]
    pid: int


def run_floor(
    clients: list[int],
    rates: list[float],
    *,
    binary: Path,
    duration: float = 3.0,
    runs: int = 3,
    transports: tuple[str, ...] = ("h1", "tls-h1"),
    client_processes: int = 1,
    workers: int = 1,
) -> dict[str, Any]:
    """Every (transport, clients, rate) pair, ``runs`` times: ssegate's case, then the floor's.

    ``rates`` is one publish rate (events/s) for every client count, or one per count;
    ``binary`` is the reference server (setup step ``sse-floor``).
    """
    if len(rates) not in (1, len(clients)):
        raise ValueError("give one rate, or one rate per client count")
    unknown = [t for t in transports if t not in TRANSPORTS]
    if unknown:
        raise ValueError(f"unknown transports {unknown}: use {', '.join(TRANSPORTS)}")
    if runs < 1:
        raise ValueError("runs must be at least 1")
    per_count = rates * len(clients) if len(rates) == 1 else rates
    results: dict[str, Any] = {
        "scenario": "floor",
        "duration_s": duration,
        "runs": runs,
        "transports": list(transports),
        "gateway_workers": workers,
        "client_processes": client_processes,
        "floor": {"binary": str(binary)},
        "cases": [],
    }
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        upstream = stack.enter_context(UpstreamProcess())
        config, plain, tls_port = write_proxy_config(tmp, upstream.http_port)
        gateway = stack.enter_context(GatewayProcess(config, workers=workers))
        pem = pem_from_keystore(tmp / "localhost.p12", PASSWORD, tmp)
        floor = FloorServer(binary, upstream.http_port, pem)
        stack.callback(lambda: results["floor"].update(floor.stopped_counts()))
        stack.enter_context(floor)
        targets = [
            _Target(OURS, {False: plain, True: tls_port}, gateway.pid),
            _Target(FLOOR, {False: floor.port, True: floor.tls_port}, floor.pid),
        ]
        results["cpu_clock"] = (
            "schedstat (ns)" if scheduled_seconds(floor.pid) is not None else "ticks (10 ms)"
        )
        for transport in transports:
            for count, rate in zip(clients, per_count, strict=True):
                for run in range(1, runs + 1):
                    for target in targets:
                        case = _case(target, transport, count, rate, duration, client_processes,
                                     upstream)  # fmt: skip
                        results["cases"].append(row(target.name, transport, run, case))
    results["pairs"] = pairs(results["cases"])
    results["verdicts"] = judge(results["pairs"])
    return results


def _case(
    target: _Target,
    transport: str,
    clients: int,
    rate: float,
    duration: float,
    processes: int,
    upstream: UpstreamProcess,
) -> dict[str, Any]:
    tls = TRANSPORTS[transport]
    spec = LoadSpec(port=target.ports[tls], clients=clients, tls=tls, max_seconds=duration + 60)
    publisher = upstream_publisher(upstream.publish_port, rate, duration, 0)
    readings: list[ProcessSample] = []

    def server() -> ProcessSample:
        readings.append(precise_sample(target.pid))
        return readings[-1]

    case = run_case(spec, rate, duration, processes, server, upstream.sample, publisher,
                    use_h2load=False)  # fmt: skip
    # run_case reads the server as the publication starts and once the streams stopped, and
    # rounds the difference to 10 ms: the same two readings, to the microsecond
    case["cpu_s"]["gateway"] = round(readings[-1].cpu_seconds - readings[-2].cpu_seconds, 6)
    time.sleep(PAUSE_SECONDS)
    return case


def add_floor_parser(scenarios: Any) -> None:
    """``ssegate bench floor``, beside the other scenarios."""
    from ssegate_lab.bench.cli import _int_list

    floor = scenarios.add_parser(
        "floor",
        help="ssegate and the reference fan-out server in C, pair by pair: ssegate ÷ floor",
    )
    floor.add_argument("--clients", type=_int_list, default=[100, 1000, 10000])
    floor.add_argument(
        "--rate", type=_int_list, default=[200, 20, 2],
        help="events/s: one, or one per client count",
    )  # fmt: skip
    floor.add_argument("--duration", type=float, default=3.0, help="seconds of publishing")
    floor.add_argument(
        "--runs", type=lambda text: _int_list(text)[0], default=3,
        help="pairs per size (a verdict takes the median of 3)",
    )  # fmt: skip
    floor.add_argument(
        "--transports", type=_transport_list, default=("h1", "tls-h1"), help="h1, tls-h1"
    )
    floor.add_argument("--client-processes", type=int, default=1)
    floor.add_argument("--workers", type=int, default=1, help="gateway worker processes")
    floor.add_argument("--out", type=Path, default=None)
    floor.set_defaults(func=_floor)


def _transport_list(text: str) -> tuple[str, ...]:
    values = tuple(part.strip() for part in text.split(",") if part.strip())
    if not values or any(value not in TRANSPORTS for value in values):
        raise argparse.ArgumentTypeError(f"{text!r}: transports are {', '.join(TRANSPORTS)}")
    return values


def _floor(args: argparse.Namespace) -> int:
    from ssegate_lab.bench.result_file import default_path, write
    from ssegate_lab.setup_tools import SetupFailed, prepared

    if len(args.rate) not in (1, len(args.clients)):
        print("ssegate bench floor: --rate takes one rate, or one per client count")
        return 2
    try:
        binary = prepared("sse-floor")
    except (NotPrepared, SetupFailed) as missing:
        print(f"ssegate bench floor: {missing}")
        return 2
    results = run_floor(
        args.clients,
        [float(rate) for rate in args.rate],
        binary=binary,
        duration=args.duration,
        runs=args.runs,
        transports=args.transports,
        client_processes=args.client_processes,
        workers=args.workers,
    )
    out = write(results, args.out or default_path("floor"), args.provenance)
    print(table(results["pairs"], results["verdicts"]))
    print(f"written to {out}")
    return 0
